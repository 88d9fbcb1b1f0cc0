package views

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/settee/settee/collate"
	pb "github.com/settee/settee/proto"
)

// Reductions kept per count bucket: a reduce over a range (reduce=true
// with no grouping; _count or _sum of a million rows) reads the rows at
// its two ends and each whole bucket between as one kept reduction, not
// every row. A bucket's reduction is computed by the first query that
// needs it and kept by the indexer, only if no build batch committed
// since that query's snapshot (a batch that changes a bucket's rows
// deletes its reduction in the same transaction, so a kept one is never
// stale). See DESIGN.md, "Reductions".

// bucketRed is a reduction a query computed, for the indexer to keep.
type bucketRed struct {
	view   int
	anchor []byte // the bucket's anchor suffix
	red    []byte
	gen    uint64 // the checkpoint generation of the snapshot it was computed on
}

// bucketReduction is a whole bucket's reduction: kept, or computed from
// its rows (computed reports the latter; nil: the bucket has no rows).
func (s *Service) bucketReduction(ctx context.Context, txn *badger.Txn, x *index, red *Reducer, v int, anchor, next, redPrefix []byte) ([]byte, bool, error) {
	item, err := txn.Get(append(append([]byte{}, redPrefix...), anchor...))
	switch {
	case err == nil:
		var r []byte
		if err := item.Value(func(val []byte) error { r = append([]byte(nil), val...); return nil }); err != nil {
			return nil, false, err
		}
		return r, false, nil
	case !errors.Is(err, badger.ErrKeyNotFound):
		return nil, false, err
	}
	var keys, values, partial [][]byte
	err = x.rangeRows(txn, v, anchor, next, false, func(r Row) bool {
		if red.builtin != nil {
			keys = append(keys, r.Key)
		} else {
			kj, _ := json.Marshal([]json.RawMessage{r.Key, mustJSONString(r.ID)})
			keys = append(keys, kj)
		}
		values = append(values, r.Value)
		if len(keys) >= reduceChunk {
			out, rerr := red.reduce(ctx, keys, values)
			if rerr != nil {
				err = rerr
				return false
			}
			partial, keys, values = append(partial, out), keys[:0], values[:0]
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	if len(keys) > 0 {
		out, err := red.reduce(ctx, keys, values)
		if err != nil {
			return nil, false, err
		}
		partial = append(partial, out)
	}
	switch len(partial) {
	case 0:
		return nil, false, nil
	case 1:
		return partial[0], true, nil
	}
	out, err := red.rereduce(ctx, partial)
	return out, true, err
}

// snapshotGen is the checkpoint's generation as this snapshot has it.
func (x *index) snapshotGen(txn *badger.Txn) (uint64, error) {
	item, err := txn.Get(x.ks.checkpoint())
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var cp checkpoint
	err = item.Value(func(v []byte) error { return json.Unmarshal(v, &cp) })
	if err != nil {
		return 0, fmt.Errorf("views: checkpoint: %w", err)
	}
	return cp.Gen, nil
}

// keepReductions hands reductions a query computed to the indexer, which
// keeps those still true (no batch since their snapshot); it never
// blocks the query.
func (ix *indexer) keepReductions(reds []bucketRed) {
	select {
	case ix.keep <- reds:
	default: // the indexer is busy keeping others: these are computed again
	}
}

// storeReductions keeps reductions computed on a snapshot at the index's
// current checkpoint (the indexer's goroutine is the index's only writer,
// so the check and the write cannot be overtaken).
func (ix *indexer) storeReductions(reds []bucketRed) {
	cp := ix.checkpoint()
	var ok []bucketRed
	for _, r := range reds {
		if r.gen == cp.Gen {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return
	}
	err := ix.x.db.Update(func(txn *badger.Txn) error {
		for _, r := range ok {
			if err := txn.Set(append(ix.x.ks.reductionPrefix(r.view), r.anchor...), r.red); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		ix.x.log.Warn("keeping view reductions", "err", err)
	}
}

// groupReduce is reducePage ascending with whole buckets: a bucket whose
// rows all fall in one group (its first and last keys group alike) is
// added to that group as its kept reduction, not row by row. A page ends
// after limit groups, the next starting at the first row of the group
// after.
func (s *Service) groupReduce(ctx context.Context, ix *indexer, txn *badger.Txn, v int, q *pb.ViewQuery, limit int, reply *pb.ViewReply) error {
	x := ix.x
	red, err := newReducer(s.cfg.JS, x.def.Views[v].Reduce)
	if err != nil {
		return err
	}
	snapGen, err := x.snapshotGen(txn)
	if err != nil {
		return err
	}
	level := int(q.GroupLevel)
	start, end := q.Start, q.End
	rowPrefix := x.ks.viewPrefix(v)
	anchorPrefix := x.ks.anchorPrefix(v)
	redPrefix := x.ks.reductionPrefix(v)

	opts := badger.DefaultIteratorOptions
	opts.Prefix = rowPrefix
	opts.PrefetchValues = false
	rows := txn.NewIterator(opts)
	defer rows.Close()
	ropts := opts
	ropts.Reverse = true
	back := txn.NewIterator(ropts)
	defer back.Close()
	aopts := badger.DefaultIteratorOptions
	aopts.Prefix = anchorPrefix
	aopts.PrefetchValues = false
	anchors := txn.NewIterator(aopts)
	defer anchors.Close()

	var (
		group, groupSort []byte
		keys, values     [][]byte
		partial          [][]byte
		keep             []bucketRed
	)
	reduceRows := func() error {
		if len(keys) == 0 {
			return nil
		}
		r, err := red.reduce(ctx, keys, values)
		if err != nil {
			return err
		}
		partial, keys, values = append(partial, r), keys[:0], values[:0]
		return nil
	}
	flush := func() error {
		if group == nil {
			return nil
		}
		if err := reduceRows(); err != nil {
			return err
		}
		out := partial[0]
		if len(partial) > 1 {
			var err error
			if out, err = red.rereduce(ctx, partial); err != nil {
				return err
			}
		}
		reply.Rows = append(reply.Rows, &pb.ViewRow{Key: group, Value: out, Sort: groupSort})
		group, partial = nil, nil
		return nil
	}
	// enter moves to group g; false: the page is full (next starts at sort)
	enter := func(g, sort []byte) (bool, error) {
		if group != nil && collate.Compare(g, group) == 0 {
			return true, nil
		}
		if err := flush(); err != nil {
			return false, err
		}
		if len(reply.Rows) >= limit {
			reply.More, reply.Next = true, continueFrom(sort, false)
			return false, nil
		}
		gs, err := collate.AppendKey(nil, g)
		if err != nil {
			return false, err
		}
		group, groupSort = g, gs
		return true, nil
	}
	inRange := func(suffix []byte) bool { return len(end) == 0 || bytes.Compare(suffix, end) < 0 }
	nextAnchorAfter := func(suffix []byte) []byte {
		anchors.Seek(append(append(append([]byte{}, anchorPrefix...), suffix...), 0))
		if !anchors.Valid() {
			return nil
		}
		return anchors.Item().KeyCopy(nil)[len(anchorPrefix):]
	}
	// lastKeyBefore is the key of the last row before next (nil: the view's last)
	lastKeyBefore := func(next []byte) []byte {
		if next == nil {
			back.Seek(append(append([]byte{}, rowPrefix...), 0xff, 0xff, 0xff, 0xff))
		} else {
			back.Seek(append(append([]byte{}, rowPrefix...), next...))
			if back.Valid() && bytes.Equal(back.Item().Key()[len(rowPrefix):], next) {
				back.Next()
			}
		}
		if !back.Valid() {
			return nil
		}
		var key []byte
		_ = back.Item().Value(func(val []byte) error {
			k, _, _, ok := splitRowValue(val)
			if ok {
				key = append([]byte(nil), k...)
			}
			return nil
		})
		return key
	}
	rows.Seek(append(append([]byte{}, rowPrefix...), start...))
	for rows.Valid() {
		suffix := append([]byte(nil), rows.Item().Key()[len(rowPrefix):]...)
		if !inRange(suffix) {
			break
		}
		var rowKey, rowID, rowValue []byte
		err := rows.Item().Value(func(val []byte) error {
			k, id, value, ok := splitRowValue(val)
			if !ok {
				return errors.New("views: bad row record")
			}
			rowKey, rowID, rowValue = append([]byte(nil), k...), []byte(id), append([]byte(nil), value...)
			return nil
		})
		if err != nil {
			return err
		}
		g := GroupKey(rowKey, level)
		if isAnchor(suffix) {
			next := nextAnchorAfter(suffix)
			whole := next == nil && len(end) == 0 || next != nil && (inRange(next) || bytes.Equal(next, end))
			if whole {
				if last := lastKeyBefore(next); last != nil && collate.Compare(GroupKey(last, level), g) == 0 {
					ok, err := enter(g, suffix)
					if err != nil || !ok {
						return err
					}
					r, computed, err := s.bucketReduction(ctx, txn, x, red, v, suffix, next, redPrefix)
					if err != nil {
						return err
					}
					if r != nil {
						if err := reduceRows(); err != nil {
							return err
						}
						partial = append(partial, r)
						if computed {
							keep = append(keep, bucketRed{view: v, anchor: suffix, red: r, gen: snapGen})
						}
					}
					if next == nil {
						break
					}
					rows.Seek(append(append([]byte{}, rowPrefix...), next...))
					continue
				}
			}
		}
		ok, err := enter(g, suffix)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if red.builtin != nil {
			keys = append(keys, rowKey)
		} else {
			kj, _ := json.Marshal([]json.RawMessage{rowKey, mustJSONString(string(rowID))})
			keys = append(keys, kj)
		}
		values = append(values, rowValue)
		if len(keys) >= reduceChunk {
			if err := reduceRows(); err != nil {
				return err
			}
		}
		rows.Next()
	}
	if !reply.More {
		if err := flush(); err != nil {
			return err
		}
	}
	if len(keep) > 0 {
		ix.keepReductions(keep)
	}
	return nil
}
