package httpgw

import (
	"context"
	"fmt"
	"net/http"

	"github.com/settee/settee/coordinator"
)

// ShardSyncer starts internal replication now (POST /db/_sync_shards);
// node implements it.
type ShardSyncer interface {
	SyncShards(ctx context.Context, db string) error
}

func rangeName(r coordinator.Range) string { return fmt.Sprintf("%08x-%08x", r.Begin, r.End) }

// handleShards serves GET /db/_shards and GET /db/_shards/<docid>.
func (g *Gateway) handleShards(rq *req, db string, rest []string) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	ranges, err := g.c.Shards(rq.ctx, db)
	if err != nil {
		return err
	}
	nodes := func(r coordinator.Range) []string {
		out := make([]string, len(r.Copies))
		for i, cp := range r.Copies {
			out[i] = cp.Node
		}
		return out
	}
	if len(rest) > 0 && rest[0] != "" {
		r := ranges[coordinator.RangeOf(ranges, rest[0])]
		return g.writeJSON(rq, 200, map[string]any{"range": rangeName(r), "nodes": nodes(r)})
	}
	out := map[string][]string{}
	for _, r := range ranges {
		out[rangeName(r)] = nodes(r)
	}
	return g.writeJSON(rq, 200, map[string]any{"shards": out})
}

// handleSyncShards asks for internal replication of a database now.
func (g *Gateway) handleSyncShards(rq *req, db string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	if _, err := g.c.Shards(rq.ctx, db); err != nil {
		return err
	}
	if s, ok := g.dbs.(ShardSyncer); ok {
		if err := s.SyncShards(rq.ctx, db); err != nil {
			return err
		}
	}
	return g.writeJSON(rq, 202, okBody)
}
