package views

import (
	"bytes"
	"context"
	"encoding/binary"
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
	last   []byte // the key of its last row
	red    []byte
	gen    uint64 // the checkpoint generation of the snapshot it was computed on
}

// keptBucket reads a bucket's kept reduction: the key of its last row and
// the reduction (ok false: none kept).
func keptBucket(txn *badger.Txn, key []byte) (last, red []byte, ok bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	err = item.Value(func(v []byte) error {
		n, w := binary.Uvarint(v)
		if w <= 0 || uint64(len(v)-w) < n {
			return errors.New("views: bad bucket reduction")
		}
		last = append([]byte(nil), v[w:w+int(n)]...)
		red = append([]byte(nil), v[w+int(n):]...)
		return nil
	})
	return last, red, err == nil, err
}

func keptValue(last, red []byte) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 4+len(last)+len(red)), uint64(len(last)))
	b = append(b, last...)
	return append(b, red...)
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
			if err := txn.Set(append(ix.x.ks.reductionPrefix(r.view), r.anchor...), keptValue(r.last, r.red)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		ix.x.log.Warn("keeping view reductions", "err", err)
	}
}

// groupReduce is reducePage ascending with whole buckets (the query path
// uses it for level 0, an ungrouped reduce; DESIGN.md says why): a bucket inside
// the range whose rows all fall in one group (its first and last keys
// group alike) and whose reduction is kept joins that group as it, not
// row by row. A whole bucket with none kept is read row by row as ever,
// and its reduction computed on the way, for the indexer to keep. A page
// ends after limit groups, the next starting at the first row of the
// group after.
func (s *Service) groupReduce(ctx context.Context, ix *indexer, txn *badger.Txn, v int, q *pb.ViewQuery, limit int, reply *pb.ViewReply) error {
	x := ix.x
	red, err := newReducer(x.js, x.def.Views[v].Reduce)
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
	aopts := badger.DefaultIteratorOptions
	aopts.Prefix = anchorPrefix
	aopts.PrefetchValues = false
	anchors := txn.NewIterator(aopts)
	defer anchors.Close()

	// a reducer's input, reduced a chunk at a time
	type acc struct{ keys, values, partial [][]byte }
	push := func(a *acc, key, id, value []byte) error {
		if red.builtin != nil {
			a.keys = append(a.keys, key)
		} else {
			kj, _ := json.Marshal([]json.RawMessage{key, mustJSONString(string(id))})
			a.keys = append(a.keys, kj)
		}
		a.values = append(a.values, value)
		if len(a.keys) >= reduceChunk {
			r, err := red.reduce(ctx, a.keys, a.values)
			if err != nil {
				return err
			}
			a.partial, a.keys, a.values = append(a.partial, r), nil, nil
		}
		return nil
	}
	total := func(a *acc) ([]byte, error) {
		if len(a.keys) > 0 {
			r, err := red.reduce(ctx, a.keys, a.values)
			if err != nil {
				return nil, err
			}
			a.partial, a.keys, a.values = append(a.partial, r), nil, nil
		}
		switch len(a.partial) {
		case 0:
			return nil, nil
		case 1:
			return a.partial[0], nil
		}
		return red.rereduce(ctx, a.partial)
	}

	var (
		group, groupSort []byte
		cur              acc
		keep             []bucketRed
		// the whole bucket being read row by row, to keep its reduction
		bk       *acc
		bkAnchor []byte
		bkNext   []byte
		bkLast   []byte
	)
	flush := func() error {
		if group == nil {
			return nil
		}
		out, err := total(&cur)
		if err != nil {
			return err
		}
		if out != nil {
			reply.Rows = append(reply.Rows, &pb.ViewRow{Key: group, Value: out, Sort: groupSort})
		}
		group, cur = nil, acc{}
		return nil
	}
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
	finishBucket := func() error {
		if bk == nil {
			return nil
		}
		r, err := total(bk)
		if err != nil {
			return err
		}
		if r != nil {
			keep = append(keep, bucketRed{view: v, anchor: bkAnchor, last: bkLast, red: r, gen: snapGen})
		}
		bk = nil
		return nil
	}
	inRange := func(suffix []byte) bool { return len(end) == 0 || bytes.Compare(suffix, end) < 0 }
	nextAnchorAfter := func(suffix []byte) []byte {
		anchors.Seek(append(append(append([]byte{}, anchorPrefix...), suffix...), 0))
		if !anchors.Valid() {
			return nil
		}
		return anchors.Item().KeyCopy(nil)[len(anchorPrefix):]
	}
	rows.Seek(append(append([]byte{}, rowPrefix...), start...))
	for rows.Valid() {
		suffix := append([]byte(nil), rows.Item().Key()[len(rowPrefix):]...)
		if !inRange(suffix) {
			break
		}
		if bk != nil && bkNext != nil && bytes.Compare(suffix, bkNext) >= 0 {
			if err := finishBucket(); err != nil {
				return err
			}
		}
		var rowKey, rowID, rowVal []byte
		err := rows.Item().Value(func(val []byte) error {
			k, id, value, ok := splitRowValue(val)
			if !ok {
				return errors.New("views: bad row record")
			}
			rowKey, rowID, rowVal = append([]byte(nil), k...), []byte(id), append([]byte(nil), value...)
			return nil
		})
		if err != nil {
			return err
		}
		g := GroupKey(rowKey, level)
		if isAnchor(suffix) {
			next := nextAnchorAfter(suffix)
			if next == nil && len(end) == 0 || next != nil && (inRange(next) || bytes.Equal(next, end)) {
				last, kept, ok, err := keptBucket(txn, append(append([]byte{}, redPrefix...), suffix...))
				if err != nil {
					return err
				}
				if ok && collate.Compare(GroupKey(last, level), g) == 0 {
					in, err := enter(g, suffix)
					if err != nil {
						return err
					}
					if !in {
						return s.endGroups(ix, keep, reply, flush, false)
					}
					cur.partial = append(cur.partial, kept)
					if next == nil {
						break
					}
					rows.Seek(append(append([]byte{}, rowPrefix...), next...))
					continue
				}
				// a JavaScript reduce costs a call per bucket kept: paid by
				// an ungrouped reduce, not by every grouped one
				if !ok && (red.builtin != nil || level == 0) {
					bk, bkAnchor, bkNext, bkLast = &acc{}, suffix, next, nil
				}
			}
		}
		in, err := enter(g, suffix)
		if err != nil {
			return err
		}
		if !in {
			bk = nil // not read to its end: nothing to keep
			return s.endGroups(ix, keep, reply, flush, false)
		}
		if err := push(&cur, rowKey, rowID, rowVal); err != nil {
			return err
		}
		if bk != nil {
			if err := push(bk, rowKey, rowID, rowVal); err != nil {
				return err
			}
			bkLast = rowKey
		}
		rows.Next()
	}
	// a bucket read to its end: the view's, or the range's where its next
	// anchor is the range's end
	if bk != nil && (bkNext == nil && len(end) == 0 || bkNext != nil && bytes.Equal(bkNext, end)) {
		if err := finishBucket(); err != nil {
			return err
		}
	}
	return s.endGroups(ix, keep, reply, flush, true)
}

// endGroups ends a page of groups: the last group flushed unless the page
// is full, and the buckets' reductions handed to the indexer.
func (s *Service) endGroups(ix *indexer, keep []bucketRed, reply *pb.ViewReply, flush func() error, last bool) error {
	if last && !reply.More {
		if err := flush(); err != nil {
			return err
		}
	}
	if len(keep) > 0 {
		ix.keepReductions(keep)
	}
	return nil
}
