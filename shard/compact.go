package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard/revtree"
	"github.com/settee/settee/tasks"
)

// Compaction of one shard copy, online.
//
// A compactor goroutine walks the by-seq index alone (seed 002: each entry
// carries the full doc info) on badger snapshots, a page at a time. For
// each doc it computes the compacted rev tree: non-leaf revisions lose their
// bodies (HasBody=false, so they read as missing and revs_info says
// "missing"), and the tree is stemmed to _revs_limit. It reads nothing else,
// except the leaf bodies' attachment lists when the shard holds attachments
// (mark and sweep of att/<digest>).
//
// The compactor never writes. It sends each page's changes to the shard
// actor as a compactBatch, which joins the write queue and is applied by the
// committer after the group's doc updates, in the same synced transaction.
// Each change is conditional: it applies only if the doc's by-seq entry
// still exists, that is, if the doc has not changed since the compactor read
// it (every update, purge or compaction of a doc that changes its tree
// deletes its old seq key). A doc updated meanwhile keeps its new revision
// and is met again at its new seq. One batch is in flight at a time, so
// compaction adds at most one page of work to any group commit.
//
// Every batch is a complete, atomic change: a crash leaves a consistent
// shard, and compaction can run again from the start (it is idempotent).
// When the walk is done, orphaned attachments are swept (in one more
// batch), the shard's file size estimate is reset, and the node's Disk
// makes badger give the space back (serialised node-wide).

// compactPage bounds one batch: docs and bytes of doc infos read, and the
// records the batch writes or deletes (it joins a group commit that
// concurrent writers wait for, so it must stay small).
const (
	compactPageDocs    = 500
	compactPageBytes   = 4 << 20
	compactPageEntries = 1000
)

// compactOp is the compacted doc info of the doc found at seq.
type compactOp struct {
	seq     uint64
	id      string
	info    []byte // marshalled FullDocInfo
	deleted bool
	oldLen  int
	drop    []string // revs whose bodies go
}

// compactBatch is sent by the compactor to its shard actor (in-process
// only, like commitDone). The actor answers compactBatchDone once it is
// committed.
type compactBatch struct {
	ops   []compactOp
	sweep []string // attachment digests no leaf refers to
	final bool     // the walk is over: reset the file size estimate
}

type compactBatchDone struct{ err error }

// compactEnded tells the actor its compactor is gone.
type compactEnded struct{ err error }

// applyCompact runs in the committer, after the group's doc updates.
func (s *store) applyCompact(w *writer, meta *pb.ShardMeta, _ *pb.ShardStats, b *compactBatch, keep map[string]bool) error {
	for _, op := range b.ops {
		if _, err := w.txn.Get(s.k.seq(op.seq)); errors.Is(err, badger.ErrKeyNotFound) {
			continue // changed since the compactor read it
		} else if err != nil {
			return err
		}
		var um byte
		if op.deleted {
			um = metaDeleted
		}
		if err := w.setMeta(s.k.id(op.id), op.info, um); err != nil {
			return err
		}
		if err := w.set(s.k.seq(op.seq), op.info); err != nil {
			return err
		}
		for _, r := range op.drop {
			if err := w.del(s.k.body(op.id, r)); err != nil {
				return err
			}
		}
		meta.ActiveSize += 2 * int64(len(op.info)-op.oldLen)
	}
	if len(b.sweep) > 0 {
		written := make(map[string]bool, len(w.digests))
		for _, d := range w.digests {
			written[d] = true
		}
		for _, d := range b.sweep {
			if keep[d] || written[d] {
				continue // referenced by a write made during the compaction
			}
			if err := w.del(s.k.att(d)); err != nil {
				return err
			}
		}
	}
	return nil
}

// compactor is the goroutine side of one compaction.
type compactor struct {
	st        *store
	self      *actor.PID
	root      *actor.RootContext
	name      string
	revsLimit int
	tasks     *tasks.Registry
	disk      *Disk
	log       *slog.Logger
}

func (c *compactor) run() (err error) {
	start := time.Now()
	if !c.disk.acquire() {
		return ErrClosed
	}
	total := c.st.countChanges(0).N
	candidates, err := c.st.attDigests()
	end := c.st.lastSeq()
	c.disk.release()
	if err != nil {
		return err
	}
	var task *tasks.Task
	if c.tasks != nil {
		task = c.tasks.Start("database_compaction", map[string]any{
			"database": c.name, "progress": 0, "changes_done": 0, "total_changes": total,
			"phase": "document_copy", "retry": false,
		})
		defer task.Done()
	}
	marked := map[string]bool{}
	var last, done uint64
	// Walk to the seq the shard had when compaction started, then catch
	// up once with what was written meanwhile (docs updated during the
	// walk moved to new seqs); whatever comes later is compacted next time.
	for pass := 0; pass < 2; pass++ {
		for last < end {
			ops, next, n, err := c.page(last, end, candidates, marked)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			if len(ops) > 0 {
				if err := c.send(&compactBatch{ops: ops}); err != nil {
					return err
				}
			}
			last = next
			done += uint64(n)
			if task != nil {
				task.Update(map[string]any{"changes_done": done, "total_changes": max(total, done),
					"progress": min(99, int(done*100/max(total, done, 1)))})
			}
		}
		if !c.disk.acquire() {
			return ErrClosed
		}
		e := c.st.lastSeq()
		c.disk.release()
		if e > end {
			end = e
			continue
		}
		break
	}
	var sweep []string
	for d := range candidates {
		if !marked[d] {
			sweep = append(sweep, d)
		}
	}
	if err := c.send(&compactBatch{sweep: sweep, final: true}); err != nil {
		return err
	}
	if task != nil {
		task.Update(map[string]any{"progress": 100, "phase": "reclaim"})
	}
	c.log.Info("shard compacted", "shard", c.name, "docs", done, "took", time.Since(start).Round(time.Millisecond))
	if c.disk != nil {
		if err := c.disk.Reclaim(); err != nil {
			return fmt.Errorf("reclaim: %w", err)
		}
	}
	return nil
}

// send hands a batch to the actor and waits for its commit.
func (c *compactor) send(b *compactBatch) error {
	r, err := c.root.RequestFuture(c.self, b, 5*time.Minute).Result()
	if err != nil {
		return err
	}
	d, ok := r.(compactBatchDone)
	if !ok {
		return fmt.Errorf("compact: unexpected answer %T", r)
	}
	return d.err
}

// page reads the by-seq entries after last (up to end) and computes their
// compacted doc infos. It returns the ops, the last seq read and how many
// entries it read.
func (c *compactor) page(last, end uint64, candidates, marked map[string]bool) ([]compactOp, uint64, int, error) {
	if !c.disk.acquire() {
		return nil, last, 0, ErrClosed
	}
	defer c.disk.release()
	var ops []compactOp
	n, size, entries := 0, 0, 0
	next := last
	err := c.st.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = c.st.k.seqPrefix()
		opts.PrefetchSize = 64
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(c.st.k.seq(last + 1)); it.Valid(); it.Next() {
			seq := beUint64(it.Item().Key()[5:])
			if seq > end || n >= compactPageDocs || size >= compactPageBytes || entries >= compactPageEntries {
				return nil
			}
			info := &pb.FullDocInfo{}
			var oldLen int
			if err := it.Item().Value(func(v []byte) error {
				oldLen = len(v)
				return proto.Unmarshal(v, info)
			}); err != nil {
				return err
			}
			n++
			size += oldLen
			next = seq
			drop := compactInfo(info, c.revsLimit)
			if len(candidates) > 0 {
				if err := c.mark(txn, info, marked); err != nil {
					return err
				}
			}
			if drop == nil {
				continue
			}
			b, err := proto.Marshal(info)
			if err != nil {
				return err
			}
			ops = append(ops, compactOp{seq: seq, id: info.Id, info: b, deleted: info.Deleted, oldLen: oldLen, drop: drop})
			entries += 2 + len(drop)
		}
		return nil
	})
	return ops, next, n, err
}

// compactInfo compacts a rev tree in place: bodies of non-leaf revs are
// dropped, the tree is stemmed to limit. It returns the revs whose body
// records go, nil when the tree did not change.
func compactInfo(info *pb.FullDocInfo, limit int) []string {
	nodes := info.Nodes
	hasChild := make([]bool, len(nodes))
	for _, nd := range nodes {
		if nd.Parent >= 0 && int(nd.Parent) < len(nodes) {
			hasChild[nd.Parent] = true
		}
	}
	var drop []string
	changed := false
	for i, nd := range nodes {
		if hasChild[i] && nd.HasBody {
			drop = append(drop, revtree.Rev{Pos: nd.Pos, Hash: nd.Hash}.String())
			nd.HasBody = false
			nd.BodySize = 0
			changed = true
		}
	}
	if limit <= 0 {
		limit = DefaultRevsLimit
	}
	// stemmed revs are never leaves: their bodies are in drop already
	if len(revtree.Stem(info, limit)) > 0 {
		changed = true
	}
	if !changed {
		return nil
	}
	if drop == nil {
		drop = []string{}
	}
	return drop
}

// mark records the attachments of a doc's leaf bodies.
func (c *compactor) mark(txn *badger.Txn, info *pb.FullDocInfo, marked map[string]bool) error {
	for _, l := range revtree.Leaves(info) {
		if !info.Nodes[l.Index].HasBody {
			continue
		}
		b, err := c.st.body(txn, info.Id, l.Rev.String())
		if err != nil {
			return err
		}
		if b == nil {
			continue
		}
		for _, a := range b.Atts {
			marked[a.Digest] = true
		}
	}
	return nil
}

// attDigests lists the digests of the shard's stored attachments (keys
// only).
func (s *store) attDigests() (map[string]bool, error) {
	out := map[string]bool{}
	prefix := s.k.attPrefix()
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			out[string(it.Item().Key()[len(prefix):])] = true
		}
		return nil
	})
	return out, err
}

// lastSeq is the highest seq in the by-seq index.
func (s *store) lastSeq() uint64 {
	var last uint64
	_ = s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Reverse = true
		opts.Prefix = s.k.seqPrefix()
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Seek(append(s.k.seqPrefix(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if it.Valid() {
			last = beUint64(it.Item().Key()[5:])
		}
		return nil
	})
	return last
}

func loadStats(db *badger.DB, k keys) (*pb.ShardStats, error) {
	st := &pb.ShardStats{}
	err := db.View(func(txn *badger.Txn) error {
		_, err := getProto(txn, k.stats(), st)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shard: load stats: %w", err)
	}
	return st, nil
}

// startCompaction answers a CompactShard: a compactor starts unless one
// runs already (then the answer says so and nothing else happens).
func (a *Actor) startCompaction(ctx actor.Context) {
	if a.compacting {
		ctx.Respond(&pb.CompactStarted{AlreadyRunning: true})
		return
	}
	if a.failed != nil {
		ctx.Respond(&pb.CompactStarted{Error: perr(ErrInternal.Code, a.failed.Error())})
		return
	}
	a.compacting = true
	a.keep = map[string]bool{}
	c := &compactor{
		st: a.st, self: ctx.Self(), root: ctx.ActorSystem().Root, name: a.cfg.Name,
		revsLimit: int(a.meta.RevsLimit), tasks: a.cfg.Tasks, disk: a.cfg.Disk, log: a.cfg.Logger,
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		err := c.run()
		root.Send(self, compactEnded{err: err})
	}()
	ctx.Respond(&pb.CompactStarted{})
}

// diskInfo answers GetDiskInfo off the actor's goroutine (measuring the
// data directory may stat its files).
func (a *Actor) diskInfo(ctx actor.Context) {
	est := a.stats.FileSize
	reply := &pb.DiskInfo{
		ActiveSize: a.meta.ActiveSize, ExternalSize: a.meta.ExternalSize,
		CompactRunning: a.compacting, PurgedInfosLimit: a.stats.PurgedInfosLimit,
	}
	if reply.PurgedInfosLimit == 0 {
		reply.PurgedInfosLimit = DefaultPurgedInfosLimit
	}
	disk := a.cfg.Disk
	a.async(ctx, func() proto.Message {
		reply.FileSize = est
		if disk != nil {
			reply.FileSize = disk.share(est)
		}
		return reply
	})
}
