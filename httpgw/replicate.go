package httpgw

import (
	"context"
	"net/http"
)

// Replicator runs replications; node wires the replicator's scheduler in.
// Its answers are ready-made JSON bodies with their status, so the gateway
// knows nothing of jobs.
type Replicator interface {
	Replicate(ctx context.Context, body []byte) (int, []byte)
	Jobs(ctx context.Context) (int, []byte)
	Docs(ctx context.Context, db, docID string) (int, []byte)
}

var errNoReplicator = newErr(503, "service_unavailable", "the replicator is not running")

// handleReplicate serves POST /_replicate (server admins only, as CouchDB).
func (g *Gateway) handleReplicate(rq *req) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	if g.cfg.Replicator == nil {
		return errNoReplicator
	}
	b, err := readBody(rq, 1<<20)
	if err != nil {
		return err
	}
	st, out := g.cfg.Replicator.Replicate(rq.ctx, b)
	return g.writeJSON(rq, st, out)
}

// handleScheduler serves /_scheduler/jobs and /_scheduler/docs[/db[/id]].
func (g *Gateway) handleScheduler(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	if g.cfg.Replicator == nil {
		return errNoReplicator
	}
	segs := rq.segs[1:]
	if len(segs) == 0 {
		return errMissing
	}
	switch {
	case segs[0] == "jobs" && len(segs) == 1:
		st, out := g.cfg.Replicator.Jobs(rq.ctx)
		return g.writeJSON(rq, st, out)
	case segs[0] == "docs" && len(segs) <= 3:
		db, id := "", ""
		if len(segs) > 1 {
			db = segs[1]
		}
		if len(segs) > 2 {
			id = segs[2]
		}
		st, out := g.cfg.Replicator.Docs(rq.ctx, db, id)
		return g.writeJSON(rq, st, out)
	}
	return errMissing
}
