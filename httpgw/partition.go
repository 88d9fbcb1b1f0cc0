package httpgw

import (
	"strings"

	"github.com/settee/settee/shard"
)

// Partitioned databases (CouchDB 3): every doc but design and local ones
// has an id "partition:docid", is placed by its partition and can be read
// with its partition's others from one shard range (/db/_partition/P/...).

var errNotPartitionForm = newErr(400, "illegal_docid", "Doc id must be of form partition:id")

// isPartitioned reports whether db is a partitioned database; a database
// that cannot be looked up is not (the request then fails on its own).
func (g *Gateway) isPartitioned(rq *req, db string) bool {
	rec, _, err := g.c.ShardMap(rq.ctx, db)
	return err == nil && rec.Partitioned
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
	if strings.HasPrefix(id, "_design/") || strings.HasPrefix(id, "_local/") {
		return nil
	}
	p, rest, ok := strings.Cut(id, ":")
	switch {
	case !ok:
		return errNotPartitionForm
	case p == "":
		return newErr(400, "illegal_partition", "Partition must not be empty")
	case rest == "":
		return errDocIDEmpty
	}
	return nil
}

// checkReadID refuses, in a partitioned database, an id that cannot be a
// partitioned doc's (CouchDB answers a read or a delete of one so).
func (g *Gateway) checkReadID(rq *req, db, id string) error {
	if strings.HasPrefix(id, "_") || strings.Contains(id, ":") || !g.isPartitioned(rq, db) {
		return nil
	}
	return errNotPartitionForm
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

// partitionOf is the partition of a doc id ("" for none).
func partitionOf(id string) string { return shard.PartitionOf(id) }
