package httpgw

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/coordinator"
	pb "github.com/settee/settee/proto"
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
		// a design doc's id has its slash: /_shards/_design/x is _design/x
		r := ranges[coordinator.RangeOf(ranges, strings.Join(rest, "/"))]
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

// handleDbsDB serves /_node/_local/_dbs[/_all_docs|/<db>]: each database's
// shard map as its document in CouchDB's _dbs system database, read-only
// (shards are placed when a database is created; settee takes no manual
// edits of the map).
func (g *Gateway) handleDbsDB(rq *req, rest []string) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	if len(rest) == 0 || rest[0] == "_all_docs" {
		rows := []map[string]any{}
		for _, db := range g.dbs.AllDBs(rq.ctx) {
			rec, _, err := g.c.ShardMap(rq.ctx, db)
			if err != nil {
				continue // deleted meanwhile
			}
			rows = append(rows, map[string]any{"id": db, "key": db, "value": map[string]string{"rev": dbsDocRev(rec)}})
		}
		return g.writeJSON(rq, 200, map[string]any{"total_rows": len(rows), "offset": 0, "rows": rows})
	}
	rec, ranges, err := g.c.ShardMap(rq.ctx, rest[0])
	if err != nil {
		return err
	}
	byNode := map[string][]string{}
	byRange := map[string][]string{}
	changelog := [][]string{}
	for _, r := range ranges {
		name := rangeName(r)
		for _, cp := range r.Copies {
			byNode[cp.Node] = append(byNode[cp.Node], name)
			byRange[name] = append(byRange[name], cp.Node)
			changelog = append(changelog, []string{"add", name, cp.Node})
		}
	}
	// CouchDB's suffix is the creation time in seconds, ".1712345678", as
	// a list of character codes
	suffix := []int{}
	for _, ch := range "." + strconv.FormatInt(rec.CreatedUs/1e6, 10) {
		suffix = append(suffix, int(ch))
	}
	return g.writeJSON(rq, 200, map[string]any{
		"_id": rec.Name, "_rev": dbsDocRev(rec), "shard_suffix": suffix,
		"changelog": changelog, "by_node": byNode, "by_range": byRange, "props": dbPropsDoc(rec),
	})
}

// dbPropsDoc is the props member of a _dbs document: a partitioned
// database's names the hash CouchDB places its docs with.
func dbPropsDoc(rec *pb.DbRecord) map[string]any {
	if !rec.Partitioned {
		return map[string]any{}
	}
	return map[string]any{"partitioned": true, "hash": []any{"couch_partition", "hash", []any{}}}
}

// dbsDocRev is a _dbs document's revision: a hash of the database's
// incarnation and its copies, which change only when a system database
// gains the copy of a node that joined.
func dbsDocRev(rec *pb.DbRecord) string {
	h := md5.New()
	h.Write([]byte(rec.Uuid))
	for _, s := range rec.Shards {
		fmt.Fprintf(h, "|%08x-%08x@%s", s.RangeBegin, s.RangeEnd, s.Node)
	}
	return "1-" + hex.EncodeToString(h.Sum(nil))
}
