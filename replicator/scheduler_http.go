package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
)

// Replicate serves POST /_replicate: a one-shot answers when done, a
// continuous one once started; cancel stops a running one. It returns the
// status and the JSON body.
func (s *Scheduler) Replicate(ctx context.Context, body []byte) (int, []byte) {
	rep, err := ParseRep(body)
	if err != nil {
		return jsonErr(400, "bad_request", err.Error())
	}
	// the id hashes a design-doc filter's source: read before the lock
	if err := s.fetchFilter(ctx, rep); err != nil {
		var fe *FilterFetchError
		if errors.As(err, &fe) {
			return jsonErr(404, "not_found", fe.Reason)
		}
		return jsonErr(500, "replication_failed", err.Error())
	}
	s.mu.Lock()
	if rep.Cancel {
		id := rep.ID
		if rep.Source != nil {
			id = rep.FullID(s.cfg.ServerUUID)
		}
		e := s.byID[id]
		if e == nil || e.docID != "" {
			s.mu.Unlock()
			return jsonErr(404, "not_found", "Replication `"+id+"` not found")
		}
		s.remove(e)
		s.mu.Unlock()
		return jsonOK(200, map[string]any{"ok": true, "_local_id": id})
	}
	repID := rep.FullID(s.cfg.ServerUUID)
	e := s.byID[repID]
	if e != nil && e.docID != "" {
		s.mu.Unlock()
		return jsonErr(409, "conflict", "replication `"+repID+"` is already run by _replicator doc `"+e.docID+"`")
	}
	if e == nil && s.closed {
		s.mu.Unlock()
		return jsonErr(500, "replication_failed", "the replicator is shutting down")
	}
	if e == nil {
		// the job writes to local databases as the server admin who
		// asked for it (its name the VDUs' userCtx)
		// (a subject of its own: the request's remembers security objects
		// as they were during the request)
		who := policy.Admin("")
		if s := policy.SubjectFrom(ctx); s != nil && s.ServerAdmin {
			who = policy.Admin(s.Name)
		}
		e = &entry{repID: repID, baseID: rep.BaseID(s.cfg.ServerUUID), rep: rep, state: "pending",
			startTime: time.Now(), stats: &pb.RepStats{}, who: who}
		e.event("added", "")
		s.byID[repID] = e
		s.startJob(e)
	}
	if rep.Continuous {
		s.mu.Unlock()
		return jsonOK(202, map[string]any{"ok": true, "_local_id": repID})
	}
	ch := make(chan JobEvent, 1)
	e.waiters = append(e.waiters, ch)
	s.mu.Unlock()
	select {
	case ev := <-ch:
		if ev.Kind == "completed" {
			return jsonOK(200, ev.Result)
		}
		if isNotFound(ev.Err) {
			return jsonErr(404, "db_not_found", ev.Err.Error())
		}
		return jsonErr(500, "replication_failed", ev.Err.Error())
	case <-ctx.Done():
		// the client went away: a one-shot transient job goes with it
		s.mu.Lock()
		if s.byID[repID] == e {
			s.remove(e)
		}
		s.mu.Unlock()
		return jsonErr(500, "timeout", "replication cancelled")
	}
}

func jsonOK(status int, v any) (int, []byte) {
	b, _ := json.Marshal(v)
	return status, append(b, '\n')
}

func jsonErr(status int, code, reason string) (int, []byte) {
	return jsonOK(status, map[string]string{"error": code, "reason": reason})
}

func (s *Scheduler) info(e *entry) any {
	switch e.state {
	case "crashing", "failed", "error":
		return map[string]any{"error": e.errMsg}
	case "pending":
		if e.errMsg != "" {
			return map[string]any{"error": e.errMsg}
		}
		return nil
	}
	return statsJSON(e.stats, e.ckptSeq)
}

func (s *Scheduler) docJSON(e *entry) map[string]any {
	m := map[string]any{
		"database": ReplicatorDB, "doc_id": e.docID, "node": s.cfg.NodeName,
		"state": e.state, "info": s.info(e), "error_count": e.errCount,
		"start_time":   e.startTime.UTC().Format(time.RFC3339),
		"last_updated": e.lastUpdated.UTC().Format(time.RFC3339),
		"id":           nullable(e.repID), "source": nil, "target": nil,
	}
	if e.rep != nil {
		m["source"], m["target"] = e.rep.Source.Redacted(), e.rep.Target.Redacted()
	}
	return m
}

// Jobs serves GET /_scheduler/jobs: the replications running or waiting.
func (s *Scheduler) Jobs(context.Context) (int, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	jobs := []map[string]any{}
	for _, e := range s.sorted() {
		if e.repID == "" || e.state == "completed" || e.state == "failed" || !s.owned(e) {
			continue
		}
		j := map[string]any{
			"id": e.repID, "database": nil, "doc_id": nil, "node": s.cfg.NodeName,
			"source": e.rep.Source.Redacted(), "target": e.rep.Target.Redacted(), "user": nil,
			"info": s.info(e), "history": e.events, "pid": nil,
			"start_time": e.startTime.UTC().Format(time.RFC3339), "state": e.state,
		}
		if e.docID != "" {
			j["database"], j["doc_id"] = ReplicatorDB, e.docID
		}
		if e.pid != nil {
			j["pid"] = e.pid.Id
		}
		jobs = append(jobs, j)
	}
	return jsonOK(200, map[string]any{"total_rows": len(jobs), "offset": 0, "jobs": jobs})
}

// Docs serves GET /_scheduler/docs[/_replicator[/<id>]].
func (s *Scheduler) Docs(_ context.Context, db, id string) (int, []byte) {
	if db != "" && db != ReplicatorDB {
		return jsonErr(404, "not_found", "Database does not exist.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != "" {
		e := s.byDoc[id]
		if e == nil || !s.owned(e) {
			return jsonErr(404, "not_found", "missing")
		}
		return jsonOK(200, s.docJSON(e))
	}
	docs := []map[string]any{}
	for _, e := range s.sorted() {
		if e.docID != "" && s.owned(e) {
			docs = append(docs, s.docJSON(e))
		}
	}
	return jsonOK(200, map[string]any{"total_rows": len(docs), "offset": 0, "docs": docs})
}

func (s *Scheduler) sorted() []*entry {
	seen := map[*entry]bool{}
	var out []*entry
	for _, m := range []map[string]*entry{s.byDoc, s.byID} {
		for _, e := range m {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].docID != out[j].docID {
			return out[i].docID < out[j].docID
		}
		return out[i].repID < out[j].repID
	})
	return out
}
