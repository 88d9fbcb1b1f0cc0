package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/storage"
	"github.com/settee/settee/tasks"
)

// Compaction of one shard copy, online.
//
// A compactor goroutine walks the by-seq index on badger snapshots, a page
// at a time. Each by-seq record names a doc and its leaves; the compactor
// reads the doc's rev tree from its by-id record (the one full copy, see
// seqRecord) and computes the compacted tree: non-leaf revisions lose their
// bodies (HasBody=false, so they read as missing and revs_info says
// "missing"), and the tree is stemmed to _revs_limit. It reads nothing
// else, except the leaf bodies' attachment lists when the shard holds
// attachments (mark and sweep of att/<key>, see attKey). Records in an older
// layout are rewritten: a by-seq record that is a copy of the whole tree
// in the short form, protobuf records in the compact one (infocodec.go).
//
// The compactor never writes. It sends each page's changes to the shard
// actor as a compactBatch, which the committer applies with the next group
// of user writes, or in a synced transaction of its own once the node has
// had no user write for compactIdle (or after compactMaxWait). Each change is
// conditional: it applies only if the doc's by-seq entry still exists, that
// is, if the doc has not changed since the compactor read it (every update
// or purge of a doc deletes its old seq key). A doc updated meanwhile keeps
// its new revision and is met again at its new seq. A page is bounded by
// the bytes it writes (compactPageBytes), so that the user writes it joins,
// or that arrive while it commits alone, wait for a small commit only; the
// compactor reads the next page while the last one commits, and has at
// most one batch at the actor.
//
// Every batch is a complete, atomic change: a crash leaves a consistent
// shard, and compaction can run again from the start (it is idempotent).
// When the walk is done, orphaned attachments are swept (in one more
// batch), the shard's file size estimate is reset, and the node's Disk
// makes badger give the space back (serialised node-wide).

// compactPage bounds one batch: by-seq entries read, and the records it
// writes or deletes and their bytes (estimated as the writer counts them).
// A batch's commit costs badger about 3.5µs of CPU per record (a deleted
// body costs as much as a written one: 1900 deletes commit in 6.9 ms, 19
// doc infos of 4.7 KB in 0.9 ms) plus the sync; 128 records commit in about
// 1 ms on our 2-core machine, and that is what a user write arriving
// meanwhile waits for, in this shard's queue or in badger's, which all
// shards share.
//
// When the node has had no user write for compactIdle as a page is read,
// the page may be compactIdleScale times larger: it will most likely commit
// alone, and a sync per 128 records is what bounded a compaction with
// nobody writing. A user write that arrives while such a batch commits
// waits for it once (about 4 ms); the pages read after it are small again.
// With no writer, seed 002's medium x 50 copied a shard in 0.13-0.15 s
// instead of 0.2-0.34 s, and compacted in 0.93 s instead of 1.13-1.24 s.
const (
	compactPageDocs    = 1000
	compactPageEntries = 128
	compactPageBytes   = 64 << 10
	compactIdleScale   = 8
)

// compactNice is the nice value of a compactor's walk (storage.LowPriority): the
// CPU it spends reading and computing pages goes to request handling first.
const compactNice = 10

// compactIdle is how long the shard and the node go without user writes
// before a compaction batch commits on its own rather than with the next
// of the shard's (Actor.maybeCommit); compactMaxWait bounds its wait when
// other shards keep writing and this one does not. A batch alone every
// compactMaxWait delays ~1% of the node's writes at 500 writes/s, and
// still compacts 640 records a second.
const (
	compactIdle    = 20 * time.Millisecond
	compactMaxWait = 200 * time.Millisecond
)

// compactWake tells the actor to look at its queued compaction batch
// again once the shard may have become idle.
type compactWake struct{}

// compactOp is the compaction of the doc found at seq: its compacted doc
// info (nil: unchanged) and the bodies that go, and its by-seq record when
// that is rewritten (nil: kept).
type compactOp struct {
	seq     uint64
	id      string
	info    []byte // marshalled FullDocInfo
	deleted bool
	oldLen  int
	drop    []string // revs whose bodies go
	rec     []byte   // marshalled seqRecord
	oldRec  int
}

// compactBatch is sent by the compactor to its shard actor (in-process
// only, like commitDone). The actor answers on done once it is
// committed. A channel, not a protoactor future: a message still in the
// mailbox when the actor stops is dropped without an answer, and the
// compactor must then stop waiting at once (it watches the actor's
// stopped channel) rather than at a future's timeout, which the node's
// shutdown would wait for.
type compactBatch struct {
	ops   []compactOp
	sweep []string // attachment keys (attKey) no leaf refers to
	final bool     // the walk is over: reset the file size estimate
	done  chan compactBatchDone
}

func newCompactBatch(ops []compactOp, sweep []string, final bool) *compactBatch {
	return &compactBatch{ops: ops, sweep: sweep, final: final, done: make(chan compactBatchDone, 1)}
}

// bytes is the size of the records the batch rewrites.
func (b *compactBatch) bytes() int64 {
	var n int64
	for _, op := range b.ops {
		n += int64(len(op.info) + len(op.rec))
	}
	return n
}

// answer is called once, by the actor.
func (b *compactBatch) answer(err error) { b.done <- compactBatchDone{err: err} }

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
		if op.info != nil {
			var um byte
			if op.deleted {
				um = metaDeleted
			}
			if err := w.setMeta(s.k.id(op.id), op.info, um); err != nil {
				return err
			}
			meta.ActiveSize += int64(len(op.info) - op.oldLen)
		}
		if op.rec != nil {
			if err := w.set(s.k.seq(op.seq), op.rec); err != nil {
				return err
			}
			meta.ActiveSize += int64(len(op.rec) - op.oldRec)
		}
		for _, r := range op.drop {
			if err := w.del(s.k.body(op.id, r)); err != nil {
				return err
			}
		}
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
	disk      *storage.Disk
	log       *slog.Logger
	stopped   <-chan struct{}
}

func (c *compactor) run() error {
	var task *tasks.Task
	if c.tasks != nil {
		task = c.tasks.Start("database_compaction", map[string]any{
			"database": c.name, "progress": 0, "changes_done": 0, "total_changes": 0,
			"phase": "document_copy", "retry": false,
		})
		defer task.Done()
	}
	// The walk runs at low priority (storage.LowPriority), the reclaim does not:
	// badger's value-log GC holds locks that writes need (and unmaps
	// files, which stops the process's page faults), and a thread that
	// the scheduler keeps waiting while it holds them makes writes wait.
	var ticket uint64
	walked := make(chan error, 1)
	go func() {
		storage.LowPriority(compactNice) // for good: this goroutine ends here
		var err error
		ticket, err = c.walk(task)
		walked <- err
	}()
	if err := <-walked; err != nil {
		return err
	}
	if task != nil {
		task.Update(map[string]any{"progress": 100, "phase": "reclaim"})
	}
	if c.disk != nil {
		if err := c.disk.ReclaimAfter(ticket); err != nil {
			return fmt.Errorf("reclaim: %w", err)
		}
	}
	return nil
}

// walk is the document copy: it walks the by-seq index and commits the
// compacted docs through the actor, holding the node's copy slot, and
// returns a reclaim ticket taken before it gave the slot up.
func (c *compactor) walk(task *tasks.Task) (uint64, error) {
	// one shard of the node copies at a time: their batches would share
	// badger's one write queue and double what a user write waits for
	if !c.disk.AcquireCopy() {
		return 0, storage.ErrClosed
	}
	defer c.disk.ReleaseCopy()
	start := time.Now()
	if !c.disk.Acquire() {
		return 0, storage.ErrClosed
	}
	total := c.st.countChanges(0).N
	candidates, err := c.st.attDigests()
	end := c.st.lastSeq()
	c.disk.Release()
	if err != nil {
		return 0, err
	}
	if task != nil {
		task.Update(map[string]any{"total_changes": total})
	}
	marked := map[string]bool{}
	var last, done uint64
	// One batch at the actor at a time; the next page is read while it
	// commits (pages cover disjoint seqs, so disjoint docs).
	var inflight *compactBatch
	wait := func() error {
		if inflight == nil {
			return nil
		}
		b := inflight
		inflight = nil
		return c.result(b)
	}
	// Walk to the seq the shard had when compaction started, then catch
	// up once with what was written meanwhile (docs updated during the
	// walk moved to new seqs); whatever comes later is compacted next time.
	for pass := 0; pass < 2; pass++ {
		for last < end {
			ops, next, n, err := c.page(last, end, candidates, marked)
			if err != nil {
				_ = wait()
				return 0, err
			}
			if err := wait(); err != nil {
				return 0, err
			}
			if n == 0 {
				break
			}
			if len(ops) > 0 {
				inflight = newCompactBatch(ops, nil, false)
				c.root.Send(c.self, inflight)
			}
			last = next
			done += uint64(n)
			if task != nil {
				task.Update(map[string]any{"changes_done": done, "total_changes": max(total, done),
					"progress": min(99, int(done*100/max(total, done, 1)))})
			}
		}
		if err := wait(); err != nil {
			return 0, err
		}
		if !c.disk.Acquire() {
			return 0, storage.ErrClosed
		}
		e := c.st.lastSeq()
		c.disk.Release()
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
	if err := c.send(newCompactBatch(nil, sweep, true)); err != nil {
		return 0, err
	}
	var ticket uint64
	if c.disk != nil {
		ticket = c.disk.ReclaimTicket()
	}
	c.log.Info("shard compacted", "shard", c.name, "docs", done, "took", time.Since(start).Round(time.Millisecond))
	return ticket, nil
}

// send hands a batch to the actor and waits for its commit.
func (c *compactor) send(b *compactBatch) error {
	c.root.Send(c.self, b)
	return c.result(b)
}

// result waits for the actor's answer to b, or for the actor to stop.
// A committed batch's records count as copied (the node's compaction
// rate: storage.Disk.CopiedBytes).
func (c *compactor) result(b *compactBatch) error {
	select {
	case d := <-b.done:
		if d.err == nil && c.disk != nil {
			c.disk.Copied(b.bytes())
		}
		return d.err
	case <-c.stopped:
		select {
		case d := <-b.done: // answered while stopping
			return d.err
		default:
			return errStopping
		}
	}
}

// page reads the by-seq entries after last (up to end) and computes their
// compaction. It returns the ops, the last seq read and how many entries it
// read.
func (c *compactor) page(last, end uint64, candidates, marked map[string]bool) ([]compactOp, uint64, int, error) {
	if !c.disk.Acquire() {
		return nil, last, 0, storage.ErrClosed
	}
	defer c.disk.Release()
	var ops []compactOp
	n, size, entries := 0, 0, 0
	next := last
	maxEntries, maxBytes := compactPageEntries, compactPageBytes
	if c.disk != nil && c.disk.SinceWrite() >= compactIdle {
		maxEntries, maxBytes = compactIdleScale*maxEntries, compactIdleScale*maxBytes
	}
	err := c.st.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = c.st.k.seqPrefix()
		opts.PrefetchValues = false // by-seq values sit in the LSM tree: no goroutine per item
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(c.st.k.seq(last + 1)); it.Valid(); it.Next() {
			seq := beUint64(it.Item().Key()[5:])
			if seq > end || n >= compactPageDocs || entries >= maxEntries || size >= maxBytes {
				return nil
			}
			rec := &pb.FullDocInfo{}
			var recLen int
			var recV1, infoV1 bool
			if err := it.Item().Value(func(v []byte) error {
				recLen, recV1 = len(v), len(v) > 0 && v[0] == infoCodecV1
				return decodeInfo(v, rec)
			}); err != nil {
				return err
			}
			n++
			next = seq
			var info *pb.FullDocInfo
			var oldLen int
			if item, err := txn.Get(c.st.k.id(rec.Id)); err == nil {
				info = &pb.FullDocInfo{}
				if err := item.Value(func(v []byte) error {
					oldLen, infoV1 = len(v), len(v) > 0 && v[0] == infoCodecV1
					return decodeInfo(v, info)
				}); err != nil {
					return err
				}
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			if info == nil || info.Seq != seq {
				continue // cannot happen in one snapshot; nothing to do
			}
			op := compactOp{seq: seq, id: info.Id, deleted: info.Deleted}
			if !recV1 || !shortRecord(rec) {
				op.rec, op.oldRec = encodeInfo(nil, seqRecord(info)), recLen
			}
			drop := compactInfo(info, c.revsLimit)
			if len(candidates) > 0 {
				if err := c.mark(txn, info, marked); err != nil {
					return err
				}
			}
			if drop != nil || !infoV1 {
				op.info, op.oldLen, op.drop = encodeInfo(nil, info), oldLen, drop
			}
			if op.info == nil && op.rec == nil {
				continue
			}
			ops = append(ops, op)
			size += len(op.info) + len(op.rec) + 2*entryOverhead
			entries += 2 + len(drop)
			for _, r := range drop {
				size += len(rec.Id) + len(r) + 16 + entryOverhead
			}
		}
		return nil
	})
	return ops, next, n, err
}

// shortRecord reports whether a by-seq record is in the short form that
// seqRecord writes (leaves only, each a root).
func shortRecord(rec *pb.FullDocInfo) bool {
	for _, nd := range rec.Nodes {
		if nd.Parent >= 0 {
			return false
		}
	}
	return true
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
			marked[attKey(a)] = true
		}
	}
	return nil
}

// attDigests lists the keys of the shard's stored attachment data (attKey:
// sha256-<base64>, or md5-<base64> for data an older settee stored), read
// from the keys only.
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
func (s *store) lastSeq() uint64 { return s.lastKeySeqCached(&s.lastSeqHint, s.k.seqPrefix()) }

// lastKeySeqCached is lastKeySeq, found again only after an apply: the
// count is read before the seek, and an apply increments it only once
// its commits are visible (and before its writes are acknowledged), so a
// hint of the current count holds every acknowledged write.
func (s *store) lastKeySeqCached(hint *atomic.Pointer[seqHint], prefix []byte) uint64 {
	gen := s.applied.Load()
	if h := hint.Load(); h != nil && h.gen == gen {
		return h.seq
	}
	seq := s.lastKeySeq(prefix)
	hint.Store(&seqHint{gen: gen, seq: seq})
	return seq
}

// lastKeySeq is the uint64 after the handle and kind byte of the last key
// under prefix (a by-seq or purge record), 0 when there is none.
func (s *store) lastKeySeq(prefix []byte) uint64 {
	var last uint64
	_ = s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Reverse = true
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Seek(append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
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
	if a.stopped == nil {
		a.stopped = make(chan struct{})
	}
	c := &compactor{
		stopped: a.stopped,
		st:      a.st, self: ctx.Self(), root: ctx.ActorSystem().Root, name: a.cfg.Name,
		revsLimit: int(a.meta.RevsLimit), tasks: a.cfg.Tasks, disk: a.cfg.Disk, log: a.cfg.Logger,
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	// the node's shutdown waits for the compactor (Disk.Close): its walk
	// and reclaim end with storage.ErrClosed, its batches are refused by
	// the stopping actor (Stopping)
	if !a.cfg.Disk.Go(func() {
		err := c.run()
		root.Send(self, compactEnded{err: err})
	}) {
		a.compacting, a.keep = false, nil
		ctx.Respond(&pb.CompactStarted{Error: perr(ErrInternal.Code, storage.ErrClosed.Error())})
		return
	}
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
	disk, indexes := a.cfg.Disk, a.cfg.IndexBytes
	a.async(ctx, func() proto.Message {
		if indexes != nil {
			reply.IndexSize = indexes()
		}
		reply.FileSize = est
		if disk != nil {
			reply.FileSize = disk.Share(est)
		}
		return reply
	})
}
