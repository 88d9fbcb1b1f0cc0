package httpgw

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/docjson"
	"github.com/settee/settee/shard"
	"github.com/settee/settee/views"
)

// Partitioned databases (CouchDB 3): every doc but design and local ones
// has an id "partition:docid", is placed by its partition and can be read
// with its partition's others from one shard range (/db/_partition/P/...).

// isPartitioned reports whether db is a partitioned database; a database
// that cannot be looked up is not (the request then fails on its own).
func (g *Gateway) isPartitioned(rq *req, db string) bool {
	p, err := g.c.IsPartitioned(rq.ctx, db)
	return err == nil && p
}

// checkWriteID is checkDocID for a doc written to db: in a partitioned
// database the id must be "partition:docid" with neither part empty.
func (g *Gateway) checkWriteID(rq *req, db, id string) error {
	if err := checkDocID(id); err != nil {
		return err
	}
	if !g.isPartitioned(rq, db) {
		return nil
	}
	return checkPartitionedID(id)
}

// checkPartitionedID applies couch_partition's rules to a checked doc id.
func checkPartitionedID(id string) error {
	if e := shard.CheckPartitionedID(id); e != nil {
		return e
	}
	return nil
}

// checkReadID refuses, in a partitioned database, an id that cannot be a
// partitioned doc's (CouchDB answers a read or a delete of one so).
func (g *Gateway) checkReadID(rq *req, db, id string) error {
	if strings.HasPrefix(id, "_") || strings.Contains(id, ":") || !g.isPartitioned(rq, db) {
		return nil
	}
	return checkPartitionedID(id) // an id of no partition
}

// checkPartition applies CouchDB's rules to the partition of a
// /db/_partition/P path.
func checkPartition(p string) error {
	switch {
	case p == "":
		return newErr(400, "illegal_partition", "Partition must not be empty")
	case p[0] == '_':
		return newErr(400, "illegal_partition", "Partition must not start with an underscore")
	case strings.Contains(p, ":"):
		return newErr(400, "illegal_partition", "Partition must not contain a colon")
	}
	return checkDocID(p)
}

// handlePartition serves /db/_partition/P and what is under it: the
// partition's info, _all_docs, views and Mango queries, each reading the
// one shard range that holds the partition.
func (g *Gateway) handlePartition(rq *req, db string, rest []string) error {
	for len(rest) > 1 && rest[0] == "" {
		rest = rest[1:] // CouchDB's path has no empty segment: //_all_docs names partition _all_docs
	}
	if len(rest) == 0 || rest[0] == "" {
		return badRequest("invalid_partition_req")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	rec, _, err := g.c.ShardMap(rq.ctx, db)
	if err != nil {
		return err
	}
	if !rec.Partitioned {
		return badRequest("database is not partitioned")
	}
	p := rest[0]
	if err := checkPartition(p); err != nil {
		return err
	}
	rest = rest[1:]
	if len(rest) == 0 {
		if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
			return methodNotAllowed("GET")
		}
		return g.partitionInfo(rq, db, p)
	}
	switch rest[0] {
	case "_all_docs":
		return g.handleAllDocs(rq, db, "", p, rest[1:])
	case "_find":
		return g.handleFindIn(rq, db, p, false)
	case "_explain":
		return g.handleFindIn(rq, db, p, true)
	case "_design":
		if len(rest) >= 4 && rest[2] == "_view" && rest[1] != "" {
			return g.handlePartitionView(rq, db, p, "_design/"+rest[1], rest[3:])
		}
		if len(rest) == 3 && rest[2] == "_info" && rest[1] != "" {
			return g.handleDesignInfo(rq, db, "_design/"+rest[1])
		}
	}
	return errMissing
}

func (g *Gateway) partitionInfo(rq *req, db, p string) error {
	st, err := g.c.PartitionInfo(rq.ctx, db, p)
	if err != nil {
		return err
	}
	b := []byte(`{"db_name":`)
	b = docjson.AppendString(b, db)
	b = append(b, `,"sizes":{"active":`...)
	b = strconv.AppendInt(b, max(st.ActiveSize, 0), 10)
	b = append(b, `,"external":`...)
	b = strconv.AppendInt(b, max(st.ExternalSize, 0), 10)
	b = append(b, `},"partition":`...)
	b = docjson.AppendString(b, p)
	b = append(b, `,"doc_count":`...)
	b = strconv.AppendUint(b, st.DocCount, 10)
	b = append(b, `,"doc_del_count":`...)
	b = strconv.AppendUint(b, st.DelCount, 10)
	b = append(b, "}\n"...)
	return g.writeJSON(rq, 200, b)
}

// handlePartitionView serves /db/_partition/P/_design/D/_view/V[/queries].
func (g *Gateway) handlePartitionView(rq *req, db, p, ddocID string, rest []string) error {
	switch {
	case len(rest) == 1 && rest[0] != "":
		return g.handleView(rq, db, ddocID, rest[0], p)
	case len(rest) == 2 && rest[1] == "queries":
		return g.handleViewQueries(rq, db, ddocID, rest[0], p)
	}
	return errMissing
}

// inPartition sets the path's partition: the query string may name it
// too, not another.
func (a *viewArgs) inPartition(p string) error {
	if p == "" {
		return nil
	}
	if a.partition != "" && a.partition != p {
		return badRequest("Conflicting value for `partition` in query string")
	}
	a.partition = p
	return nil
}

// partitionLimit holds a partition query of a partitioned view to
// query_server_config/partition_query_limit when it is set (CouchDB
// 3.5.2's default.ini leaves it at infinity): a larger limit is refused, a
// query without one gets that many rows.
func (g *Gateway) partitionLimit(rq *req, db string, def *views.Def, a *viewArgs) error {
	if a.partition == "" || !def.Partitioned(g.isPartitioned(rq, db)) {
		return nil
	}
	return applyPartitionLimit(g.partitionQueryLimit(), &a.limit)
}

// applyPartitionLimit holds *limit (< 0: none) to max (< 0: none).
func applyPartitionLimit(max int64, limit *int) error {
	switch {
	case max < 0:
	case *limit < 0:
		*limit = int(max)
	case int64(*limit) > max:
		return queryParseErr("Limit is too large, must not exceed " + strconv.FormatInt(max, 10))
	}
	return nil
}

// partitionQueryLimit is query_server_config/partition_query_limit (-1:
// infinity, the default).
func (g *Gateway) partitionQueryLimit() int64 {
	if g.cfg.Settings == nil {
		return -1
	}
	v, err := g.cfg.Settings.ConfigValue("query_server_config", "partition_query_limit")
	if err != nil || v == "" || v == "infinity" {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// checkPartitionedIDs refuses, in a partitioned database, ids a
// partitioned doc cannot have (_revs_diff, _purge: the request fails).
func (g *Gateway) checkPartitionedIDs(rq *req, db string, ids []string) error {
	if len(ids) == 0 || !g.isPartitioned(rq, db) {
		return nil
	}
	for _, id := range ids {
		if strings.HasPrefix(id, "_") {
			continue
		}
		if err := checkPartitionedID(id); err != nil {
			return err
		}
	}
	return nil
}
