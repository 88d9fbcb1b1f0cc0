package replicator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// maxHistory is how many sessions a checkpoint doc remembers (CouchDB: 50).
const maxHistory = 50

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// rawToAny turns a raw JSON seq into a value for JSON output.
func rawToAny(raw string) any {
	if raw == "" {
		return nil
	}
	return json.RawMessage(raw)
}

// ckptDoc is the part of a checkpoint doc (_local/<base id>) that finding
// the start seq needs.
type ckptDoc struct {
	SessionID     string          `json:"session_id"`
	SourceLastSeq json.RawMessage `json:"source_last_seq"`
	History       []struct {
		SessionID   string          `json:"session_id"`
		RecordedSeq json.RawMessage `json:"recorded_seq"`
	} `json:"history"`
}

// findStartSeq reads both checkpoints and returns the seq to resume from
// and the history to extend, as CouchDB's find_replication_logs and
// compare_replication_logs: the same session on both ends resumes from the
// source's source_last_seq; else the newest session of the source's
// history the target also knows resumes from its recorded_seq; else 0.
func findStartSeq(ctx context.Context, src, tgt Endpoint, id string) (string, []any, error) {
	sb, err := src.GetLocal(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("source checkpoint: %w", err)
	}
	tb, err := tgt.GetLocal(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("target checkpoint: %w", err)
	}
	if sb == nil || tb == nil {
		return "0", nil, nil
	}
	var s, t ckptDoc
	var sraw struct {
		History []any `json:"history"`
	}
	if json.Unmarshal(sb, &s) != nil || json.Unmarshal(tb, &t) != nil || json.Unmarshal(sb, &sraw) != nil {
		return "0", nil, nil
	}
	hist := sraw.History
	if s.SessionID != "" && s.SessionID == t.SessionID && len(s.SourceLastSeq) > 0 {
		return string(s.SourceLastSeq), hist, nil
	}
	known := map[string]bool{t.SessionID: true}
	for _, h := range t.History {
		known[h.SessionID] = true
	}
	for _, h := range s.History {
		if known[h.SessionID] && len(h.RecordedSeq) > 0 {
			return string(h.RecordedSeq), hist, nil
		}
	}
	return "0", hist, nil
}

// checkpoint records the committed seq on both ends, with requests made
// under c. Every write before it was acknowledged by the target (settee
// and CouchDB acknowledge _bulk_docs after the commit), so the seq is safe
// to resume from.
func (j *jobActor) checkpoint(c context.Context, final bool) error {
	if j.commitSeq == j.lastCkpt && (!final || (len(j.history) > 0 && j.stats.MissingChecked == 0)) {
		return nil
	}
	now := time.Now()
	entry := map[string]any{
		"session_id":         j.session,
		"start_time":         j.startTime.UTC().Format(http.TimeFormat),
		"end_time":           now.UTC().Format(http.TimeFormat),
		"start_last_seq":     rawToAny(j.startSeq),
		"end_last_seq":       rawToAny(j.commitSeq),
		"recorded_seq":       rawToAny(j.commitSeq),
		"missing_checked":    j.stats.MissingChecked,
		"missing_found":      j.stats.MissingFound,
		"docs_read":          j.stats.DocsRead,
		"docs_written":       j.stats.DocsWritten,
		"doc_write_failures": j.stats.DocWriteFailures,
	}
	hist := []any{entry}
	for _, h := range j.history {
		if m, ok := h.(map[string]any); ok && m["session_id"] == j.session {
			continue
		}
		if len(hist) >= maxHistory {
			break
		}
		hist = append(hist, h)
	}
	doc := map[string]any{
		"session_id":             j.session,
		"source_last_seq":        rawToAny(j.commitSeq),
		"replication_id_version": RepIDVersion,
		"replicator":             "settee",
		"history":                hist,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if err := putLocal(c, j.cfg.source, j.cfg.baseID, b); err != nil {
		return fmt.Errorf("source checkpoint: %w", err)
	}
	if err := putLocal(c, j.cfg.target, j.cfg.baseID, b); err != nil {
		return fmt.Errorf("target checkpoint: %w", err)
	}
	j.history = hist
	j.lastCkpt = j.commitSeq
	j.updateTask()
	if !final {
		j.cfg.report(JobEvent{Kind: "progress", Stats: j.statsCopy(), Seq: j.lastCkpt})
	}
	return nil
}

// putLocal writes a checkpoint doc within a bound, as the job actor waits
// for it. An HTTP endpoint's requests time out on their own after
// connection_timeout of silence and are retried per retries_per_request:
// the bound leaves room for all of them, so that a silent peer fails with
// the timeout that says why (a fixed minute cut the retries of a long
// connection_timeout short, and failed as a bare deadline).
func putLocal(ctx context.Context, e Endpoint, id string, body []byte) error {
	bound := time.Minute
	if h, ok := e.(*HTTPEndpoint); ok && h.Timeout > 0 {
		bound = max(bound, time.Duration(h.Retries+1)*(h.Timeout+maxBackoff))
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return e.PutLocal(ctx, id, body)
}

// stopCheckpointTimeout bounds the checkpoint of a job stopped from
// outside: a node shutting down waits for it, an unreachable peer must
// not hold that up.
const stopCheckpointTimeout = 5 * time.Second

// stopCheckpoint records what a job stopped from outside (its doc deleted
// or changed, rotated out by the scheduler, cancelled, the node shutting
// down) has written, as CouchDB's job does when it is shut down: the next
// run resumes there instead of redoing up to checkpoint_interval of work.
// The job's context is cancelled by then (to stop its requests in
// flight), so the checkpoint runs under one of its own. Batches in flight
// are not acknowledged, so the committed seq does not cover them.
func (j *jobActor) stopCheckpoint() {
	c, cancel := context.WithTimeout(context.WithoutCancel(j.cfg.ctx), stopCheckpointTimeout)
	defer cancel()
	if err := j.checkpoint(c, false); err != nil {
		j.cfg.log.Warn("replicator: checkpoint of a stopped job", "rep_id", j.cfg.repID, "err", err)
	}
}
