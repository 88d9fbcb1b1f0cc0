package views

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Count buckets: what a view's offset needs (the rows before a key)
// without reading them. About one row in 64 is an anchor, chosen by a
// hash of its row key so that every copy and every rebuild agrees; an
// anchor keeps the count of the rows from it up to the next anchor, and a
// head bucket (the empty suffix) those before the first. The rows before
// a key are then the buckets' counts before its bucket plus the rows from
// that bucket's anchor to the key: a sixty-fourth of the rows and at most
// about 64 more. The indexer keeps them in the same transaction as the
// rows, so they are exact at every checkpoint.
//
// A build batch touches many buckets: counts is the batch's view of them,
// one iterator per view over what is committed plus the anchors the batch
// added or removed, and the count changes summed and written once.

// isAnchor reports whether a row (by its suffix) starts a bucket.
func isAnchor(suffix []byte) bool {
	h := fnv.New64a()
	h.Write(suffix)
	return h.Sum64()&63 == 0
}

// counts is one build batch's bucket bookkeeping.
type counts struct {
	x     *index
	txn   *badger.Txn
	views map[int]*viewCounts
}

type viewCounts struct {
	prefix []byte
	// committed is the view's anchors as committed (suffixes, sorted):
	// the indexer keeps them in memory (index.anchors), so a row's
	// bucket is a binary search, not a reverse seek in badger (which
	// steps back through its memtable in O(log n) a step: half a
	// build's CPU)
	committed [][]byte
	added     [][]byte         // anchors added in the batch (suffixes), sorted
	removed   map[string]bool  // committed anchors removed in the batch
	delta     map[string]int64 // by anchor suffix ("" the head)
	set       map[string]uint64
}

func (x *index) newCounts(txn *badger.Txn) *counts {
	return &counts{x: x, txn: txn, views: map[int]*viewCounts{}}
}

func (c *counts) view(v int) *viewCounts {
	vc := c.views[v]
	if vc == nil {
		prefix := c.x.ks.anchorPrefix(v)
		vc = &viewCounts{prefix: prefix, committed: c.x.committedAnchors(c.txn, v), removed: map[string]bool{},
			delta: map[string]int64{}, set: map[string]uint64{}}
		c.views[v] = vc
	}
	return vc
}

// committedAnchors is view v's committed anchors, read from txn the first
// time (the indexer is the index's only writer, so what it read stays
// true but for its own commits, which commit apply).
func (x *index) committedAnchors(txn *badger.Txn, v int) [][]byte {
	if a, ok := x.anchors[v]; ok {
		return a
	}
	prefix := x.ks.anchorPrefix(v)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	var out [][]byte
	for it.Seek(prefix); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) > len(prefix) { // the head bucket has the empty suffix
			out = append(out, append([]byte(nil), k[len(prefix):]...))
		}
	}
	if x.anchors == nil {
		x.anchors = map[int][][]byte{}
	}
	x.anchors[v] = out
	return out
}

// commit makes the batch's anchors the committed ones, once its
// transaction has committed.
func (c *counts) commit() {
	for v, vc := range c.views {
		if len(vc.added) == 0 && len(vc.removed) == 0 {
			continue
		}
		next := make([][]byte, 0, len(vc.committed)+len(vc.added))
		for _, a := range vc.committed {
			if !vc.removed[string(a)] {
				next = append(next, a)
			}
		}
		next = append(next, vc.added...)
		slices.SortFunc(next, bytes.Compare)
		next = slices.CompactFunc(next, bytes.Equal)
		c.x.anchors[v] = next
	}
}

// bucketOf is the suffix of the anchor whose bucket holds suffix: the
// greatest anchor <= suffix (< with below), "" for the head.
func (vc *viewCounts) bucketOf(suffix []byte, below bool) string {
	best := ""
	j, hit := slices.BinarySearchFunc(vc.committed, suffix, bytes.Compare)
	if hit && !below {
		j++
	}
	for j--; j >= 0; j-- {
		if !vc.removed[string(vc.committed[j])] {
			best = string(vc.committed[j])
			break
		}
	}
	i, found := slices.BinarySearchFunc(vc.added, suffix, bytes.Compare)
	if found && !below {
		i++
	}
	if i > 0 && string(vc.added[i-1]) > best {
		best = string(vc.added[i-1])
	}
	return best
}

// nextAnchor is the first anchor after suffix, nil when none.
func (c *counts) nextAnchor(vc *viewCounts, suffix []byte) []byte {
	var next []byte
	j, hit := slices.BinarySearchFunc(vc.committed, suffix, bytes.Compare)
	if hit {
		j++
	}
	for ; j < len(vc.committed); j++ {
		if !vc.removed[string(vc.committed[j])] {
			next = vc.committed[j]
			break
		}
	}
	i, found := slices.BinarySearchFunc(vc.added, suffix, bytes.Compare)
	if found {
		i++
	}
	if i < len(vc.added) && (next == nil || bytes.Compare(vc.added[i], next) < 0) {
		next = vc.added[i]
	}
	return next
}

// added notes a row written (after the row itself).
func (c *counts) added(v int, suffix []byte) {
	vc := c.view(v)
	if !isAnchor(suffix) {
		vc.delta[vc.bucketOf(suffix, false)]++
		return
	}
	// a new bucket: the rows from it to the next anchor (the txn has them
	// all, this one included) leave the bucket it splits
	prev := vc.bucketOf(suffix, true)
	n := c.x.countRows(c.txn, v, suffix, c.nextAnchor(vc, suffix))
	s := append([]byte(nil), suffix...)
	i, _ := slices.BinarySearchFunc(vc.added, s, bytes.Compare)
	vc.added = slices.Insert(vc.added, i, s)
	delete(vc.removed, string(s))
	vc.set[string(s)] = n
	delete(vc.delta, string(s))
	vc.delta[prev] -= int64(n) - 1
}

// removed notes a row deleted (after the delete).
func (c *counts) removed(v int, suffix []byte) error {
	vc := c.view(v)
	if !isAnchor(suffix) {
		vc.delta[vc.bucketOf(suffix, false)]--
		return nil
	}
	key := string(suffix)
	n, err := c.current(vc, key)
	if err != nil {
		return err
	}
	if i, found := slices.BinarySearchFunc(vc.added, suffix, bytes.Compare); found {
		vc.added = slices.Delete(vc.added, i, i+1)
	} else {
		vc.removed[key] = true
	}
	delete(vc.set, key)
	delete(vc.delta, key)
	// its other rows go back to the bucket before
	vc.delta[vc.bucketOf(suffix, true)] += int64(n) - 1
	return nil
}

// current is an anchor's count as the batch has it so far.
func (c *counts) current(vc *viewCounts, key string) (uint64, error) {
	n, ok := vc.set[key]
	if !ok {
		var err error
		if n, err = getCount(c.txn, append(append([]byte{}, vc.prefix...), key...)); err != nil {
			return 0, err
		}
	}
	return uint64(max(int64(n)+vc.delta[key], 0)), nil
}

// flush writes the batch's counts and closes its iterators.
func (c *counts) flush() error {
	for v, vc := range c.views {
		// a bucket whose rows changed loses its kept reduction (a query
		// computes it again)
		rp := c.x.ks.reductionPrefix(v)
		for key := range vc.removed {
			if err := c.txn.Delete(append(append([]byte{}, vc.prefix...), key...)); err != nil {
				return err
			}
			if err := c.txn.Delete(append(append([]byte{}, rp...), key...)); err != nil {
				return err
			}
		}
		for key := range vc.set {
			if err := c.txn.Delete(append(append([]byte{}, rp...), key...)); err != nil {
				return err
			}
		}
		for key := range vc.delta {
			if err := c.txn.Delete(append(append([]byte{}, rp...), key...)); err != nil {
				return err
			}
		}
		touched := map[string]bool{}
		for k := range vc.set {
			touched[k] = true
		}
		for k := range vc.delta {
			touched[k] = true
		}
		for k := range touched {
			if vc.removed[k] {
				continue
			}
			n, err := c.current(vc, k)
			if err != nil {
				return err
			}
			if err := setCount(c.txn, append(append([]byte{}, vc.prefix...), k...), n); err != nil {
				return err
			}
		}
	}
	return nil
}

func getCount(txn *badger.Txn, key []byte) (uint64, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		n, _ = binary.Uvarint(v)
		return nil
	})
	return n, err
}

func setCount(txn *badger.Txn, key []byte, n uint64) error {
	return txn.Set(key, binary.AppendUvarint(nil, n))
}

// rowsBefore counts view v's rows before suffix: the buckets before its
// bucket, then the rows of its bucket up to it (a read, on a snapshot).
func (x *index) rowsBefore(txn *badger.Txn, v int, suffix []byte) uint64 {
	prefix := x.ks.anchorPrefix(v)
	// the bucket: the greatest anchor <= suffix
	bucket := ""
	{
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.Reverse = true
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		it.Seek(append(append([]byte{}, prefix...), suffix...))
		if it.Valid() {
			bucket = string(it.Item().Key()[len(prefix):])
		}
		it.Close()
	}
	var n uint64
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false // counts are tiny and in the LSM: no prefetch goroutines
	it := txn.NewIterator(opts)
	bk := append(append([]byte{}, prefix...), bucket...)
	for it.Seek(prefix); it.Valid(); it.Next() {
		if bytes.Compare(it.Item().Key(), bk) >= 0 {
			break
		}
		_ = it.Item().Value(func(val []byte) error {
			c, _ := binary.Uvarint(val)
			n += c
			return nil
		})
	}
	it.Close()
	return n + x.countRows(txn, v, []byte(bucket), suffix)
}
