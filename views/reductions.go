package views

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
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

// rangeReduce reduces view v's rows in [start, end) ascending into one
// reduction, whole buckets by their kept reductions.
func (s *Service) rangeReduce(ctx context.Context, ix *indexer, txn *badger.Txn, v int, start, end []byte, red *Reducer) ([]byte, bool, error) {
	x := ix.x
	snapGen, err := x.snapshotGen(txn)
	if err != nil {
		return nil, false, err
	}
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

	var (
		partial      [][]byte
		keys, values [][]byte
		keep         []bucketRed
		any          bool
	)
	flushRows := func() error {
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
	inRange := func(suffix []byte) bool { return len(end) == 0 || bytes.Compare(suffix, end) < 0 }
	addRow := func(val []byte) error {
		key, id, value, ok := splitRowValue(val)
		if !ok {
			return errors.New("views: bad row record")
		}
		any = true
		if red.builtin != nil {
			keys = append(keys, append([]byte(nil), key...))
		} else {
			kj, _ := json.Marshal([]json.RawMessage{key, mustJSONString(id)})
			keys = append(keys, kj)
		}
		values = append(values, append([]byte(nil), value...))
		if len(keys) >= reduceChunk {
			return flushRows()
		}
		return nil
	}
	// nextAnchorAfter: the first anchor > suffix (nil: none)
	nextAnchorAfter := func(suffix []byte) []byte {
		anchors.Seek(append(append(append([]byte{}, anchorPrefix...), suffix...), 0))
		if !anchors.Valid() {
			return nil
		}
		return anchors.Item().KeyCopy(nil)[len(anchorPrefix):]
	}
	rows.Seek(append(append([]byte{}, rowPrefix...), start...))
	for rows.Valid() {
		suffix := rows.Item().Key()[len(rowPrefix):]
		if !inRange(suffix) {
			break
		}
		if isAnchor(suffix) {
			anchor := append([]byte(nil), suffix...)
			next := nextAnchorAfter(anchor)
			if next == nil && len(end) == 0 || next != nil && inRange(next) || next != nil && bytes.Equal(next, end) {
				// the whole bucket is in the range
				r, computed, err := s.bucketReduction(ctx, txn, x, red, v, anchor, next, redPrefix)
				if err != nil {
					return nil, false, err
				}
				if r != nil {
					any = true
					if err := flushRows(); err != nil {
						return nil, false, err
					}
					partial = append(partial, r)
					if computed {
						keep = append(keep, bucketRed{view: v, anchor: anchor, red: r, gen: snapGen})
					}
				}
				if next == nil {
					break
				}
				rows.Seek(append(append([]byte{}, rowPrefix...), next...))
				continue
			}
		}
		err := rows.Item().Value(func(val []byte) error { return addRow(val) })
		if err != nil {
			return nil, false, err
		}
		rows.Next()
	}
	if err := flushRows(); err != nil {
		return nil, false, err
	}
	if len(keep) > 0 {
		ix.keepReductions(keep)
	}
	switch len(partial) {
	case 0:
		return nil, any, nil
	case 1:
		return partial[0], true, nil
	}
	out, err := red.rereduce(ctx, partial)
	return out, true, err
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
