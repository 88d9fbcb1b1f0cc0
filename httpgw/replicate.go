package httpgw

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/settee/settee/policy"
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
	b, err := readBody(rq, mediumBody)
	if err != nil {
		return err
	}
	st, out := g.cfg.Replicator.Replicate(policy.WithSubject(rq.ctx, rq.who()), b)
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
		return errNotFoundBare
	}
	switch {
	case segs[0] == "jobs" && len(segs) == 1:
		limit, skip, err := schedulerPage(rq, true)
		if err != nil {
			return err
		}
		st, out := g.cfg.Replicator.Jobs(rq.ctx)
		return g.writeJSON(rq, st, page(out, "jobs", limit, skip))
	case segs[0] == "docs":
		db, id, err := schedulerDocsPath(segs[1:])
		if err != nil {
			return err
		}
		limit, skip, err := schedulerPage(rq, false)
		if err != nil {
			return err
		}
		st, out := g.cfg.Replicator.Docs(rq.ctx, db, id)
		if id == "" {
			out = page(out, "docs", limit, skip)
		}
		return g.writeJSON(rq, st, out)
	}
	return errNotFoundBare
}

// schedulerDocsPath splits /_scheduler/docs/{db}[/{id}] as CouchDB: the
// database is the path up to the first segment that is or ends in
// _replicator (a db name may hold "/"), at most one segment may follow.
func schedulerDocsPath(segs []string) (db, id string, err error) {
	if len(segs) == 0 {
		return "", "", nil
	}
	i := slices.IndexFunc(segs, func(s string) bool { return strings.HasSuffix(s, "_replicator") })
	if i < 0 || len(segs)-i > 2 {
		return "", "", badRequest("Invalid path")
	}
	db = strings.Join(segs[:i+1], "/")
	if i+1 < len(segs) {
		id = segs[i+1]
	}
	return db, id, nil
}

// schedulerPage reads limit and skip of /_scheduler/jobs (jobs: its own
// reasons, "limit must be an integer", "limit not in range of
// [0,infinity]") or /_scheduler/docs (the view parameters' reasons), as
// CouchDB; limit -1 when not given.
func schedulerPage(rq *req, jobs bool) (int, int, error) {
	out := [2]int{-1, 0}
	for i, name := range []string{"limit", "skip"} {
		v, ok := rq.q[name]
		if !ok || len(v) == 0 {
			continue
		}
		if !jobs {
			n, err := intParam(rq, name, 0)
			if err != nil {
				return 0, 0, err
			}
			out[i] = n
			continue
		}
		n, err := strconv.Atoi(v[len(v)-1])
		switch {
		case err != nil:
			return 0, 0, queryParseErr(name + " must be an integer")
		case n < 0:
			return 0, 0, queryParseErr(name + " not in range of [0,infinity]")
		}
		out[i] = n
	}
	return out[0], out[1], nil
}

// page applies limit and skip to the member list of a scheduler answer
// (total_rows stays the whole count; offset is skip, at most that count).
func page(out []byte, list string, limit, skip int) []byte {
	if limit < 0 && skip == 0 {
		return out
	}
	var a map[string]json.RawMessage
	var items []json.RawMessage
	if json.Unmarshal(out, &a) != nil || json.Unmarshal(a[list], &items) != nil {
		return out
	}
	offset := min(skip, len(items)) // CouchDB's offset: skip, at most the count
	items = items[offset:]
	if limit >= 0 && limit < len(items) {
		items = items[:limit]
	}
	b, _ := json.Marshal(items)
	// {"total_rows":…,"offset":…,"<list>":[…]}, in CouchDB's order
	return fmt.Appendf(nil, "{\"total_rows\":%s,\"offset\":%d,%q:%s}\n", a["total_rows"], offset, list, b)
}
