package views

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/collate"
	"github.com/settee/settee/couchjs"
	pb "github.com/settee/settee/proto"
)

// Page sizes of one copy's answer: the coordinator asks for the next.
const (
	pageRows  = 1000
	pageBytes = 1 << 20
)

func queryErr(code, reason string) *pb.ViewReply {
	return &pb.ViewReply{Error: &pb.Error{Code: code, Reason: reason}}
}

// Query answers one page of a view of one of this node's copies.
func (s *Service) Query(ctx context.Context, q *pb.ViewQuery) *pb.ViewReply {
	def, err := s.designs.Parse(q.DdocId, q.Ddoc)
	if err != nil {
		return queryErr("bad_request", err.Error())
	}
	v, ok := def.View(q.View)
	if !ok {
		return queryErr("not_found", "missing_named_view")
	}
	handle, changes, ok := s.cfg.Copies.LocalCopy(q.Shard)
	if !ok {
		return queryErr("not_found", "no such shard copy here")
	}
	// a partitioned index is queried one partition at a time (the
	// gateway refuses a global query of one); what is read is the range
	// the bounds give, its rows in partition order
	ix, err := s.indexerFor(q.Shard, handle, changes, def, def.Partitioned(q.Partitioned))
	if err != nil {
		return queryErr("internal_error", err.Error())
	}
	switch q.Update {
	case "false":
	case "lazy":
		ix.kick()
	default:
		// an index that has the copy's latest change is current: most
		// queries ask the indexer nothing
		if !ix.x.current(ix.checkpoint()) {
			if err := ix.catchUp(ctx); err != nil {
				return queryErr("internal_error", err.Error())
			}
		}
	}
	cp := ix.checkpoint()
	reply := &pb.ViewReply{UpdateSeq: cp.Seq, Active: cp.Active, CompactRunning: s.compactRunning(handle, def.Sig)}
	if v < len(cp.Counts) {
		reply.TotalRows = cp.Counts[v]
	}
	limit := int(q.Limit)
	if limit <= 0 || limit > pageRows {
		limit = pageRows
	}
	err = s.cfg.DB.View(func(txn *badger.Txn) error {
		if q.Total {
			if q.Descending {
				// rows after the range's top: CouchDB counts the offset
				// from the end when descending
				if len(q.End) > 0 {
					if before := ix.x.rowsBefore(txn, v, q.End); before < reply.TotalRows {
						reply.Offset = reply.TotalRows - before
					}
				}
			} else if len(q.Start) > 0 {
				reply.Offset = ix.x.rowsBefore(txn, v, q.Start)
			}
		}
		if q.Reduce && q.GroupLevel == 0 {
			// whole buckets by their kept reductions (grouped queries read
			// their rows: keeping a bucket's reduction on first use cost
			// them more than it saved, measured with bench views); one
			// group is the same whichever way the range is read, so a
			// descending one reads it ascending, as CouchDB's B-tree
			// rereduces its inner nodes' reductions either way
			if err := s.groupReduce(ctx, ix, txn, v, q, limit, reply); err != nil {
				return fmt.Errorf("views: reduce: %w", err)
			}
			return nil
		}
		if q.Reduce {
			return s.reducePage(ctx, ix.x, txn, v, q, limit, reply)
		}
		size := 0
		return ix.x.rangeRows(txn, v, q.Start, q.End, q.Descending, func(r Row) bool {
			if len(reply.Rows) >= limit || size >= pageBytes {
				reply.More = true
				reply.Next = continueFrom(r.sort, q.Descending)
				return false
			}
			size += len(r.Key) + len(r.Value) + len(r.ID) + 16
			reply.Rows = append(reply.Rows, &pb.ViewRow{Key: r.Key, Id: r.ID, Value: r.Value, Sort: r.sort})
			return true
		})
	})
	if err != nil {
		return queryErr("internal_error", err.Error())
	}
	return reply
}

// continueFrom is the bound the next page starts from at row sort: start
// (inclusive) ascending; end (exclusive) descending, which is the row
// itself, read next time.
func continueFrom(sort []byte, descending bool) []byte {
	out := append([]byte(nil), sort...)
	if descending {
		// just above the row: no other row's key has it as a prefix (the
		// emit number is a prefix-free uvarint)
		out = append(out, 0)
	}
	return out
}

// GroupKey is a row's group at a level: the key itself for -1 (exact) and
// for keys that are not arrays, null for 0, else the array's first level
// elements.
func GroupKey(key []byte, level int) []byte {
	switch {
	case level < 0:
		return key
	case level == 0:
		return []byte("null")
	}
	var arr []json.RawMessage
	if len(key) == 0 || key[0] != '[' || json.Unmarshal(key, &arr) != nil {
		return key
	}
	if len(arr) <= level {
		return key
	}
	b, _ := json.Marshal(arr[:level])
	return b
}

// reducePage reduces the range's rows group by group; a page ends after
// limit groups, the next starting at the first row of the group after.
// The groups are reduced in batches (Reducer.BatchGroups, up to
// ReduceBatchBytes of rows), a JavaScript reduce in one call per batch.
func (s *Service) reducePage(ctx context.Context, x *index, txn *badger.Txn, v int, q *pb.ViewQuery, limit int, reply *pb.ViewReply) error {
	red, err := newReducer(x.js, x.def.Views[v].Reduce)
	if err != nil {
		return err
	}
	var (
		cur       *pendingGroup   // the group being read, nil before the first
		pend      []*pendingGroup // groups read to their end, not yet reduced
		pendBytes int
		failed    error
	)
	batch := red.BatchGroups()
	// close ends the group being read; its batch is reduced when full
	closeGroup := func() bool {
		if cur == nil {
			return true
		}
		pend, pendBytes, cur = append(pend, cur), pendBytes+cur.bytes, nil
		if len(pend) >= batch || pendBytes >= ReduceBatchBytes {
			if failed = red.reducePending(ctx, pend, reply); failed != nil {
				return false
			}
			pend, pendBytes = pend[:0], 0
		}
		return true
	}
	err = x.rangeRows(txn, v, q.Start, q.End, q.Descending, func(r Row) bool {
		g := GroupKey(r.Key, int(q.GroupLevel))
		if cur == nil || collate.Compare(g, cur.key) != 0 {
			if !closeGroup() {
				return false
			}
			if len(reply.Rows)+len(pend) >= limit {
				reply.More = true
				reply.Next = continueFrom(r.sort, q.Descending)
				return false
			}
			gs, err := collate.AppendKey(nil, g)
			if err != nil {
				failed = err
				return false
			}
			cur = &pendingGroup{key: g, sort: gs}
		}
		if red.builtin != nil {
			cur.keys = append(cur.keys, r.Key) // a builtin reads the emitted keys
		} else {
			kj, _ := json.Marshal([]json.RawMessage{r.Key, mustJSONString(r.ID)})
			cur.keys = append(cur.keys, kj) // JavaScript's reduce gets [key, docid]
		}
		cur.values = append(cur.values, r.Value)
		cur.bytes += len(cur.keys[len(cur.keys)-1]) + len(r.Value)
		if len(cur.keys) >= reduceChunk {
			// a big group is reduced a chunk at a time, then rereduced
			out, err := red.reduce(ctx, cur.keys, cur.values)
			if err != nil {
				failed = err
				return false
			}
			cur.partial = append(cur.partial, out)
			cur.keys, cur.values, cur.bytes = cur.keys[:0], cur.values[:0], 0
		}
		return true
	})
	if err != nil {
		return err
	}
	if failed == nil && !reply.More {
		closeGroup()
	}
	if failed == nil && len(pend) > 0 {
		failed = red.reducePending(ctx, pend, reply)
	}
	if failed != nil {
		return fmt.Errorf("views: reduce: %w", failed)
	}
	return nil
}

// pendingGroup is a group of a page being reduced: its rows not yet
// reduced, and the reductions of its earlier chunks.
type pendingGroup struct {
	key, sort    []byte
	keys, values [][]byte
	bytes        int // of keys and values
	partial      [][]byte
}

// reducePending reduces a batch of groups, in order, into reply's rows:
// their last chunks in one batch, then those read in several chunks
// rereduced in another.
func (r *Reducer) reducePending(ctx context.Context, pend []*pendingGroup, reply *pb.ViewReply) error {
	var (
		in  []couchjs.ReduceGroup
		ins []*pendingGroup
	)
	for _, g := range pend {
		if len(g.keys) > 0 {
			in = append(in, couchjs.ReduceGroup{Keys: g.keys, Values: g.values})
			ins = append(ins, g)
		}
	}
	if len(in) > 0 {
		outs, err := r.reduceGroups(ctx, in)
		if err != nil {
			return err
		}
		for i, g := range ins {
			g.partial = append(g.partial, outs[i])
		}
	}
	var (
		re   [][][]byte
		reGs []*pendingGroup
	)
	for _, g := range pend {
		if len(g.partial) > 1 {
			re = append(re, g.partial)
			reGs = append(reGs, g)
		}
	}
	if len(re) > 0 {
		outs, err := r.RereduceGroups(ctx, re)
		if err != nil {
			return err
		}
		for i, g := range reGs {
			g.partial = outs[i : i+1]
		}
	}
	for _, g := range pend {
		reply.Rows = append(reply.Rows, &pb.ViewRow{Key: g.key, Value: g.partial[0], Sort: g.sort})
	}
	return nil
}

// reduceChunk is how many rows one reduce call takes.
const reduceChunk = 1000

func mustJSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
