package views

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
	"github.com/settee/settee/storage"
	"github.com/settee/settee/tasks"
)

// Changes is where an index reads its copy's documents: the copy's by-seq
// index, a page at a time (shard.Reader).
type Changes interface {
	ReadChanges(m *pb.ReadChanges) *pb.ChangesReply
	// LastSeq is the latest change's seq, LastPurgeSeq the latest purge's.
	LastSeq() uint64
	LastPurgeSeq() uint64
	// ReadPurges answers the purge infos after a purge seq, and whether
	// some right after it were trimmed already.
	ReadPurges(since uint64, limit int) ([]*pb.PurgeInfo, bool, error)
	ReadDocInfos(ids []string) *pb.DocInfosReply
}

// checkpoint is how far an index is built, and its row counts, written in
// the same transaction as the rows it counts: a crash resumes from the
// last one with no row lost or doubled.
type checkpoint struct {
	Seq uint64 `json:"seq"`
	// Gen counts the index's commits: a reduction computed on a snapshot
	// is kept only while no commit came after it (reductions.go)
	Gen uint64 `json:"gen"`
	// PurgeSeq is the copy's purges the index has applied: a doc purged
	// whole leaves no change to read, only a purge info
	PurgeSeq uint64   `json:"purge_seq"`
	Counts   []uint64 `json:"counts"` // rows per view
	// Active is the rows' bytes (keys, doc ids, values: what _info's
	// sizes count)
	Active uint64 `json:"active"`
	DDoc   string `json:"ddoc"`
	// Views names the views the counts are of, so that an index found on
	// disk is known for what it holds (view cleanup, _info).
	Views []string `json:"views"`
}

// index is one design-doc signature's index of one shard copy: what the
// indexer builds and what queries read. Its methods run on the indexer's
// goroutine (build) or any reader's (reads, on badger snapshots).
type index struct {
	db      *badger.DB
	ks      keyspace
	def     *Def
	maps    mapper
	js      *couchjs.DDoc // where the JavaScript reduces run (JSSandbox)
	changes Changes
	log     *slog.Logger
	// sinceWrite is how long ago the node last began committing a user
	// write (nil: unknown); builds yield to writes (indexer.yield)
	sinceWrite func() time.Duration
	tasks      *tasks.Registry // nil: builds are not listed
	refresh    func() bool     // the background refresh is on (nil: on)
	shardName  string          // as _active_tasks names the copy
	// partitioned: the rows of each partition are kept together under
	// its key (Def.Partitioned; the copy's database is partitioned)
	partitioned bool
	// anchors are the views' committed count-bucket anchors, by view,
	// loaded on a build's first use (counts.go); the indexer's goroutine
	// alone touches them. nil after a failed or dropped write: read again.
	anchors map[int][][]byte
}

// loadCheckpoint reads where the index is (zero for a new one).
func (x *index) loadCheckpoint() (checkpoint, error) {
	cp := checkpoint{Counts: make([]uint64, len(x.def.Views)), DDoc: x.def.ID}
	for _, v := range x.def.Views {
		cp.Views = append(cp.Views, v.Name)
	}
	err := x.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(x.ks.checkpoint())
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error { return json.Unmarshal(v, &cp) })
	})
	if len(cp.Counts) != len(x.def.Views) {
		cp.Counts = make([]uint64, len(x.def.Views))
	}
	return cp, err
}

// batchBytes bounds one build transaction: what a user write that meets
// it in badger's write queue waits for.
const (
	batchDocs      = 500
	batchBytes     = 1 << 20
	busyBatchDocs  = 128
	busyBatchBytes = 256 << 10
)

// step builds one batch from cp and answers the new checkpoint and
// whether the by-seq index has more after it.
func (x *index) step(ctx context.Context, cp checkpoint) (checkpoint, bool, error) {
	if next, did, err := x.purges(cp); err != nil || did {
		return next, true, err
	}
	pageDocs, pageBytes := uint32(batchDocs), uint32(batchBytes)
	if x.sinceWrite != nil && x.sinceWrite() < 20*time.Millisecond {
		// users write: small commits, which their writes wait behind for
		// less (a build alone takes big ones, which go faster)
		pageDocs, pageBytes = busyBatchDocs, busyBatchBytes
	}
	reply := x.changes.ReadChanges(&pb.ReadChanges{Since: cp.Seq, Limit: pageDocs, IncludeDocs: true, MaxBytes: pageBytes})
	if reply.Error != nil {
		return cp, false, fmt.Errorf("views: read changes: %s", reply.Error.Reason)
	}
	if len(reply.Rows) == 0 {
		return cp, false, nil
	}
	// the docs the map functions see: live ones, design docs only when
	// the ddoc asks (options.include_design), with _conflicts
	type docAt struct {
		id  string
		row int // in docs, -1: removed
	}
	var docs [][]byte
	todo := make([]docAt, 0, len(reply.Rows))
	last := cp.Seq
	for _, r := range reply.Rows {
		info := r.Info
		if info.Seq > last {
			last = info.Seq
		}
		at := docAt{id: info.Id, row: -1}
		mapped := !strings.HasPrefix(info.Id, "_design/") || x.def.IncludeDesign()
		if x.partitioned {
			// a partitioned index has the rows of partitioned docs only
			mapped = shard.PartitionOf(info.Id) != ""
		}
		if !info.Deleted && mapped {
			doc := couchdoc.Append(nil, info.Id, info, &pb.RevBody{Rev: info.Winner, Json: r.Json, Atts: r.Atts},
				&couchdoc.Options{Conflicts: true, LocalSeq: x.def.LocalSeq()})
			at.row = len(docs)
			docs = append(docs, doc)
		}
		todo = append(todo, at)
	}
	var emits [][][]couchjs.Emit
	if len(docs) > 0 {
		var err error
		if emits, err = x.maps.MapDocs(ctx, docs); err != nil {
			return cp, false, fmt.Errorf("views: map: %w", err)
		}
	}
	next := cp
	next.Counts = append([]uint64(nil), cp.Counts...)
	next.Seq = last
	next.Gen++
	var cnt *counts
	err := storage.Update(x.db, func(txn *badger.Txn) error {
		cnt = x.newCounts(txn)
		for _, d := range todo {
			dk := x.ks.doc(d.id)
			// the doc's old rows go
			item, err := txn.Get(dk)
			switch {
			case err == nil:
				err = item.Value(func(v []byte) error {
					for _, br := range decodeBack(v) {
						k := append(x.ks.viewPrefix(br.view), br.suffix...)
						if err := txn.Delete(k); err != nil {
							return err
						}
						if err := cnt.removed(br.view, br.suffix); err != nil {
							return err
						}
						if br.view < len(next.Counts) && next.Counts[br.view] > 0 {
							next.Counts[br.view]--
						}
						next.Active -= min(next.Active, br.size)
					}
					return nil
				})
				if err != nil {
					return err
				}
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
			var back []backRow
			if d.row >= 0 && d.row < len(emits) {
				for v, es := range emits[d.row] {
					if v >= len(x.def.Views) {
						break
					}
					for n, e := range es {
						var part []byte
						if x.partitioned {
							part = partitionKey(shard.PartitionOf(d.id))
						}
						suffix, err := rowSuffix(part, e.Key, d.id, n)
						if err != nil {
							x.log.Warn("view: emit with a key that does not encode, skipped", "ddoc", x.def.ID, "view", x.def.Views[v].Name, "doc", d.id, "err", err)
							continue
						}
						k := append(x.ks.viewPrefix(v), suffix...)
						val := rowValue(e.Key, d.id, e.Value)
						if err := txn.Set(k, val); err != nil {
							return err
						}
						cnt.added(v, suffix)
						size := uint64(len(k) + len(val))
						back = append(back, backRow{view: v, suffix: suffix, size: size})
						next.Active += size
						next.Counts[v]++
					}
				}
			}
			if len(back) == 0 {
				if err := txn.Delete(dk); err != nil {
					return err
				}
			} else if err := txn.Set(dk, encodeBack(back)); err != nil {
				return err
			}
		}
		if err := cnt.flush(); err != nil {
			return err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		return txn.Set(x.ks.checkpoint(), b)
	})
	if err != nil {
		x.anchors = nil
		return cp, false, fmt.Errorf("views: write: %w", err)
	}
	cnt.commit()
	return next, reply.More, nil
}

// Row is one row of a view read from one copy.
type Row struct {
	Key   []byte // JSON
	ID    string
	Value []byte // JSON
	sort  []byte // its key after the view prefix
}

// rangeRows reads view v's rows in [start, end) (end empty: to the end),
// ascending or descending, calling f for each until it returns false.
func (x *index) rangeRows(txn *badger.Txn, v int, start, end []byte, descending bool, f func(Row) bool) error {
	prefix := x.ks.viewPrefix(v)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.Reverse = descending
	// rows are small and sit in the LSM: reading each value as it is met
	// beats a prefetch that starts a goroutine per item (a key lookup
	// reads a few rows)
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	lo := append(append([]byte{}, prefix...), start...)
	var hi []byte
	if len(end) > 0 {
		hi = append(append([]byte{}, prefix...), end...)
	}
	if descending {
		seek := hi
		if seek == nil {
			seek = append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff)
		}
		it.Seek(seek)
		// the reverse seek lands on the last key <= seek: hi is exclusive
		if it.Valid() && hi != nil && bytes.Equal(it.Item().Key(), hi) {
			it.Next()
		}
	} else {
		it.Seek(lo)
	}
	for ; it.Valid(); it.Next() {
		k := it.Item().Key()
		if descending {
			if bytes.Compare(k, lo) < 0 {
				return nil
			}
		} else if hi != nil && bytes.Compare(k, hi) >= 0 {
			return nil
		}
		var row Row
		err := it.Item().Value(func(val []byte) error {
			key, id, value, ok := splitRowValue(val)
			if !ok {
				return fmt.Errorf("views: bad row record")
			}
			row.Key = append([]byte(nil), key...)
			row.Value = append([]byte(nil), value...)
			row.ID = id
			return nil
		})
		if err != nil {
			return err
		}
		row.sort = append([]byte(nil), k[len(prefix):]...)
		if !f(row) {
			return nil
		}
	}
	return nil
}

// countRows counts view v's rows in [start, end), keys only.
func (x *index) countRows(txn *badger.Txn, v int, start, end []byte) uint64 {
	prefix := x.ks.viewPrefix(v)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	hi := append(append([]byte{}, prefix...), end...)
	var n uint64
	for it.Seek(append(append([]byte{}, prefix...), start...)); it.Valid(); it.Next() {
		if len(end) > 0 && bytes.Compare(it.Item().Key(), hi) >= 0 {
			break
		}
		n++
	}
	return n
}

// purges applies the copy's purges after the checkpoint's: the rows of a
// doc purged whole go (a doc purged in part has a new seq, and is mapped
// again as any change). It reports whether it did any (a batch of its
// own). An index behind purge infos already trimmed starts over.
func (x *index) purges(cp checkpoint) (checkpoint, bool, error) {
	infos, gap, err := x.changes.ReadPurges(cp.PurgeSeq, batchDocs)
	if err != nil {
		return cp, false, fmt.Errorf("views: read purges: %w", err)
	}
	if len(infos) == 0 {
		return cp, false, nil
	}
	if gap {
		x.log.Warn("view index behind trimmed purge infos: rebuilding it", "purge_seq", cp.PurgeSeq)
		x.anchors = nil
		if err := storage.DropPrefix(x.db, x.ks.p); err != nil {
			return cp, false, err
		}
		fresh := checkpoint{Counts: make([]uint64, len(x.def.Views)), DDoc: cp.DDoc, Views: cp.Views,
			PurgeSeq: infos[len(infos)-1].PurgeSeq, Gen: cp.Gen + 1}
		return fresh, true, nil
	}
	ids := make([]string, len(infos))
	for i, pi := range infos {
		ids[i] = pi.Id
	}
	live := map[string]bool{}
	for _, info := range x.changes.ReadDocInfos(ids).Infos {
		if info != nil && len(info.Nodes) > 0 {
			live[info.Id] = true
		}
	}
	next := cp
	next.Counts = append([]uint64(nil), cp.Counts...)
	next.PurgeSeq = infos[len(infos)-1].PurgeSeq
	next.Gen++
	var cnt *counts
	err = storage.Update(x.db, func(txn *badger.Txn) error {
		cnt = x.newCounts(txn)
		for _, id := range ids {
			if live[id] {
				continue
			}
			if err := x.dropDocRows(txn, cnt, id, &next); err != nil {
				return err
			}
		}
		if err := cnt.flush(); err != nil {
			return err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		return txn.Set(x.ks.checkpoint(), b)
	})
	if err != nil {
		x.anchors = nil
		return cp, false, fmt.Errorf("views: purge: %w", err)
	}
	cnt.commit()
	return next, true, nil
}

// dropDocRows deletes a doc's rows and its back-index.
func (x *index) dropDocRows(txn *badger.Txn, cnt *counts, id string, cp *checkpoint) error {
	dk := x.ks.doc(id)
	item, err := txn.Get(dk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = item.Value(func(v []byte) error {
		for _, br := range decodeBack(v) {
			if err := txn.Delete(append(x.ks.viewPrefix(br.view), br.suffix...)); err != nil {
				return err
			}
			if err := cnt.removed(br.view, br.suffix); err != nil {
				return err
			}
			if br.view < len(cp.Counts) && cp.Counts[br.view] > 0 {
				cp.Counts[br.view]--
			}
			cp.Active -= min(cp.Active, br.size)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return txn.Delete(dk)
}

// current reports whether the index has every change and purge the copy
// has now.
func (x *index) current(cp checkpoint) bool {
	return cp.Seq >= x.changes.LastSeq() && cp.PurgeSeq >= x.changes.LastPurgeSeq()
}
