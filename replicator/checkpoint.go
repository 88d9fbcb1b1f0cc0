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

	pb "github.com/settee/settee/proto"
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

// findStartSeq reads both checkpoints and returns the seq to resume from,
// the history to extend and the counters to start from, as CouchDB's
// compare_replication_logs and init_state: the same session on both ends
// resumes from the source's source_last_seq with the source's whole
// history; else the newest session of the source's history that the
// target also knows resumes from its recorded_seq, with the history older
// than that session (CouchDB drops the rest); else 0, with none. The
// counters are those of the history's first entry, so that a session's
// docs_written and the others count every session since the first, as
// CouchDB reports them.
func findStartSeq(ctx context.Context, src, tgt Endpoint, id string) (string, []any, *pb.RepStats, error) {
	sb, err := src.GetLocal(ctx, id)
	if err != nil {
		return "", nil, nil, fmt.Errorf("source checkpoint: %w", err)
	}
	tb, err := tgt.GetLocal(ctx, id)
	if err != nil {
		return "", nil, nil, fmt.Errorf("target checkpoint: %w", err)
	}
	if sb == nil || tb == nil {
		return "0", nil, &pb.RepStats{}, nil
	}
	var s, t ckptDoc
	var sraw struct {
		History []json.RawMessage `json:"history"`
	}
	if json.Unmarshal(sb, &s) != nil || json.Unmarshal(tb, &t) != nil || json.Unmarshal(sb, &sraw) != nil || len(sraw.History) != len(s.History) {
		return "0", nil, &pb.RepStats{}, nil
	}
	if s.SessionID != "" && s.SessionID == t.SessionID && len(s.SourceLastSeq) > 0 {
		return string(s.SourceLastSeq), anyHistory(sraw.History), historyStats(sraw.History), nil
	}
	known := map[string]bool{t.SessionID: true}
	for _, h := range t.History {
		known[h.SessionID] = true
	}
	for i, h := range s.History {
		if known[h.SessionID] && len(h.RecordedSeq) > 0 {
			rest := sraw.History[i+1:]
			return string(h.RecordedSeq), anyHistory(rest), historyStats(rest), nil
		}
	}
	return "0", nil, &pb.RepStats{}, nil
}

func anyHistory(h []json.RawMessage) []any {
	out := make([]any, len(h))
	for i, e := range h {
		out[i] = e
	}
	return out
}

// historyStats are the counters of a history's first entry (none when it
// is empty or they are not numbers).
func historyStats(h []json.RawMessage) *pb.RepStats {
	var e struct {
		DocsRead         uint64 `json:"docs_read"`
		DocsWritten      uint64 `json:"docs_written"`
		MissingChecked   uint64 `json:"missing_checked"`
		MissingFound     uint64 `json:"missing_found"`
		DocWriteFailures uint64 `json:"doc_write_failures"`
		BulkGetDocs      uint64 `json:"bulk_get_docs"`
		BulkGetAttempts  uint64 `json:"bulk_get_attempts"`
	}
	if len(h) == 0 || json.Unmarshal(h[0], &e) != nil {
		return &pb.RepStats{}
	}
	return &pb.RepStats{DocsRead: e.DocsRead, DocsWritten: e.DocsWritten, MissingChecked: e.MissingChecked,
		MissingFound: e.MissingFound, DocWriteFailures: e.DocWriteFailures, BulkGetDocs: e.BulkGetDocs, BulkGetAttempts: e.BulkGetAttempts}
}

// checkpoint records the committed seq on both ends, with requests made
// under c. Every write before it was acknowledged by the target (settee
// and CouchDB acknowledge _bulk_docs after the commit), so the seq is safe
// to resume from.
func (j *jobActor) checkpoint(c context.Context, final bool) error {
	if j.commitSeq == j.lastCkpt && (!final || (len(j.history) > 0 && j.stats.MissingChecked == j.seed.GetMissingChecked())) {
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
		"bulk_get_docs":      j.stats.BulkGetDocs,
		"bulk_get_attempts":  j.stats.BulkGetAttempts,
	}
	hist := []any{entry}
	for _, h := range j.history {
		if sessionOf(h) == j.session {
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

// sessionOf is a history entry's session_id: the entries are this
// session's own maps, or raw JSON from the checkpoint it resumed from.
func sessionOf(h any) string {
	switch h := h.(type) {
	case map[string]any:
		s, _ := h["session_id"].(string)
		return s
	case json.RawMessage:
		var e struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(h, &e)
		return e.SessionID
	}
	return ""
}
