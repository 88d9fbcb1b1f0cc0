package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/storage"
	"github.com/settee/settee/tasks"
)

// Config names one shard copy and its storage.
type Config struct {
	DB     *badger.DB
	Handle uint32
	Name   string // for logs: "shards/00000000-7fffffff/db"
	Logger *slog.Logger
	// Disk is the node's disk accounting and space reclamation (nil:
	// sizes.file is the shard's own estimate and compaction reclaims
	// nothing in badger).
	Disk *storage.Disk
	// Tasks receives a database_compaction task while the shard compacts.
	Tasks *tasks.Registry
	// Observer hears of commits and reads (the node's metrics); nil: none.
	Observer Observer
	// Reads runs the shard's reads (nil: a goroutine each).
	Reads *ReadPool
	// IndexBytes measures the copy's secondary indexes, which live under
	// its handle but are not the shard's to know (nil: none).
	IndexBytes func() int64
	// Partitioned: the copy belongs to a partitioned database and keeps
	// each partition's counts and sizes (PartitionStats).
	Partitioned bool
	// MaxPartitionSize is couchdb/max_partition_size (nil or <= 0: no
	// limit); read at each write to a partition.
	MaxPartitionSize func() int64
}

// Props returns the props of a shard actor. Its Reader is registered when
// the actor starts; Spawn registers it before the actor can be addressed.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{cfg: cfg, st: newStore(cfg)}
	})
}

// Spawn starts a shard copy's actor under name, with its Reader already
// registered (ReaderID(name)): a read that arrives as soon as the copy
// exists finds it, instead of a dead letter.
func Spawn(root *actor.RootContext, cfg Config, name string) (*actor.PID, error) {
	sys := root.ActorSystem()
	st := newStore(cfg)
	// a Reader left under this name (its actor gone) is replaced; if the
	// actor is still there, the spawn fails below and it is put back
	old, had := sys.ProcessRegistry.GetLocal(ReaderID(name))
	readerPID := actor.NewPID(sys.Address(), ReaderID(name))
	if had {
		sys.ProcessRegistry.Remove(readerPID)
	}
	reader, _ := sys.ProcessRegistry.Add(newReader(cfg, st, sys), ReaderID(name))
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &Actor{cfg: cfg, st: st, reader: reader}
	}), name)
	if err != nil {
		sys.ProcessRegistry.Remove(reader)
		if had {
			sys.ProcessRegistry.Add(old, ReaderID(name))
		}
		return nil, fmt.Errorf("shard: spawn %s: %w", name, err)
	}
	return pid, nil
}

// item is one queued write: a batch of docs, a meta change or a flush.
type item struct {
	batch      *pb.UpdateDocs
	setMeta    *pb.SetMeta
	flush      bool
	compact    *compactBatch
	purge      *pb.PurgeDocs
	purgeLimit uint64
	sender     *actor.PID
}

type waiter struct {
	since    uint64
	pid      *actor.PID
	deadline time.Time
}

// commitDone is sent by the committer goroutine back to its actor; it never
// leaves the process.
type commitDone struct {
	items []item
	res   applyResult
}

// Actor owns one shard copy. Writes queue while a commit is in flight and
// the next commit takes all of them (couch_db_updater's group commit);
// reads run beside it on badger snapshots and never wait for a commit.
type Actor struct {
	cfg      Config
	st       *store
	meta     *pb.ShardMeta
	pending  []item
	inflight bool
	waiters  []waiter
	failed   error

	stats *pb.ShardStats
	// compacting is set while a compactor runs; keep collects the
	// attachment keys (attKey) written meanwhile (never swept by it).
	compacting bool
	keep       map[string]bool
	// compactQ is the compactor's batch waiting to commit (it has one
	// at a time), since compactSince. It joins the next group of user
	// writes, or commits on its own (maybeCommit); lastWrite is when this
	// shard last started committing user writes; compactWake is set while
	// a timer will look again.
	compactQ     *item
	compactSince time.Time
	lastWrite    time.Time
	compactWake  bool
	// reader is the process of the copy's point reads (reader.go).
	reader *actor.PID
	// sweep is armed while waiters wait: it sends the actor a
	// sweepTick. protoactor's own SetReceiveTimeout is not used: its
	// timer goroutine writes the context's fields unsynchronised with
	// the mailbox goroutine (a data race the race detector found when a
	// shard stops).
	sweep *time.Timer
	// stopped is closed when the actor stops; the compactor watches it.
	stopped chan struct{}
}

// sweepTick asks the actor to drop waiters whose deadline passed.
type sweepTick struct{}

// sweepEvery is how often waiters past their deadline are dropped.
const sweepEvery = 5 * time.Second

// Receive is the actor's state machine.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		meta, err := loadMeta(a.cfg.DB, a.st.k)
		if err != nil {
			a.failed = err
			a.cfg.Logger.Error("shard start", "shard", a.cfg.Name, "err", err)
			meta = &pb.ShardMeta{RevsLimit: DefaultRevsLimit}
		}
		a.meta = meta
		stats, err := loadStats(a.cfg.DB, a.st.k)
		if err != nil && a.failed == nil {
			a.failed = err
		}
		if stats == nil {
			stats = &pb.ShardStats{}
		}
		a.stats = stats
		a.cfg.Disk.Add(stats.FileSize)
		if a.reader == nil {
			sys := ctx.ActorSystem()
			a.reader, _ = sys.ProcessRegistry.Add(newReader(a.cfg, a.st, sys), ReaderID(ctx.Self().Id))
		}
	case *actor.Stopping:
		if a.sweep != nil {
			a.sweep.Stop()
			a.sweep = nil
		}
		// a compaction batch still queued is refused: its compactor
		// waits for the answer, and the node's shutdown for the compactor
		if a.compactQ != nil {
			a.compactQ.compact.answer(errStopping)
			a.compactQ = nil
		}
		// and a batch still in the mailbox is dropped by protoactor
		// once the actor has stopped: the compactor stops waiting here
		if a.stopped != nil {
			close(a.stopped)
			a.stopped = nil
		}
		if a.reader != nil {
			ctx.ActorSystem().ProcessRegistry.Remove(a.reader)
		}
	case *actor.Stopped:
		if a.stats != nil {
			a.cfg.Disk.Add(-a.stats.FileSize)
			a.stats = &pb.ShardStats{}
		}
	case sweepTick:
		a.sweep = nil
		a.sweepWaiters(ctx, time.Now())
		a.armSweep(ctx)

	// writes: queued, committed in groups
	case *pb.UpdateDocs:
		a.pending = append(a.pending, item{batch: m, sender: replyTo(ctx, m.Reply)})
		a.maybeCommit(ctx)
	case *pb.SetMeta:
		a.pending = append(a.pending, item{setMeta: m, sender: ctx.Sender()})
		a.maybeCommit(ctx)
	case *pb.Flush:
		if !a.inflight && len(a.pending) == 0 {
			ctx.Respond(&pb.FlushReply{UpdateSeq: a.meta.UpdateSeq})
			return
		}
		a.pending = append(a.pending, item{flush: true, sender: ctx.Sender()})
		a.maybeCommit(ctx)
	case commitDone:
		a.finishCommit(ctx, m)

	// compaction and purge (compact.go, purge.go)
	case *pb.CompactShard:
		a.startCompaction(ctx)
	case *compactBatch:
		if a.compactQ != nil {
			m.answer(errors.New("shard: a compaction batch is queued already"))
			return
		}
		a.compactQ = &item{compact: m}
		a.compactSince = time.Now()
		a.maybeCommit(ctx)
	case compactWake:
		a.compactWake = false
		a.maybeCommit(ctx)
	case compactEnded:
		a.compacting = false
		a.keep = nil
		if m.err != nil {
			a.cfg.Logger.Error("shard compaction failed", "shard", a.cfg.Name, "err", m.err)
		}
	case *pb.GetDiskInfo:
		a.diskInfo(ctx)
	case *pb.GetPurgedInfos:
		a.async(ctx, func() proto.Message {
			infos, _, err := a.st.readPurges(0, math.MaxInt)
			if err != nil {
				return &pb.PurgedInfos{Error: perr("internal", err.Error())}
			}
			return &pb.PurgedInfos{Infos: infos}
		})
	case *pb.PurgeDocs:
		a.pending = append(a.pending, item{purge: m, sender: ctx.Sender()})
		a.maybeCommit(ctx)
	case *pb.SetPurgedInfosLimit:
		if m.Limit == 0 {
			ctx.Respond(&pb.PurgedInfosLimitReply{Error: perr("bad_request", "purged_infos_limit must be positive")})
			return
		}
		a.pending = append(a.pending, item{purgeLimit: m.Limit, sender: ctx.Sender()})
		a.maybeCommit(ctx)

	// reads: off the actor's goroutine, on a badger snapshot
	case *pb.GetDoc:
		a.async(ctx, func() proto.Message { r, _ := a.st.readDoc(m, nil); return r })
	case *pb.GetDocs:
		a.async(ctx, func() proto.Message { return a.st.readDocs(m.Docs) })
	case *pb.GetDocInfos:
		a.async(ctx, func() proto.Message { return a.st.readDocInfos(m.Ids) })
	case *pb.GetAtt:
		a.async(ctx, func() proto.Message { return a.st.readAtt(m) })
	case *pb.ReadRange:
		a.async(ctx, func() proto.Message { return a.st.readRange(m) })
	case *pb.ReadChanges:
		upd := a.meta.UpdateSeq
		a.async(ctx, func() proto.Message {
			r := a.st.readChanges(m)
			r.UpdateSeq = upd
			return r
		})
	case *pb.CountRange:
		if !m.HasLo && !m.HasHi {
			// every live doc: the header's count (which the group
			// commit keeps), not a walk of the keys (_all_docs'
			// total_rows on every query)
			ctx.Respond(&pb.Count{N: a.meta.DocCount})
			return
		}
		a.async(ctx, func() proto.Message { return a.st.countRange(m) })
	case *pb.GetPartitionInfo:
		a.async(ctx, func() proto.Message { return a.st.readPartition(m) })
	case *pb.CountChanges:
		a.async(ctx, func() proto.Message { return a.st.countChanges(m.Since) })
	case *pb.GetLocal:
		a.async(ctx, func() proto.Message { return a.st.getLocal(m.Id) })
	case *pb.PutLocal:
		a.async(ctx, func() proto.Message { return a.st.putLocal(m) })
	case *pb.GetShardInfo:
		ctx.Respond(&pb.ShardInfo{Meta: proto.Clone(a.meta).(*pb.ShardMeta)})
	case *pb.WaitChange:
		if a.meta.UpdateSeq > m.Since {
			ctx.Respond(&pb.ChangeNotice{UpdateSeq: a.meta.UpdateSeq})
			return
		}
		d := time.Duration(m.TimeoutMs) * time.Millisecond
		if d <= 0 {
			d = time.Minute
		}
		if len(a.waiters) > 256 {
			a.sweepWaiters(ctx, time.Now())
		}
		a.waiters = append(a.waiters, waiter{since: m.Since, pid: ctx.Sender(), deadline: time.Now().Add(d)})
		a.armSweep(ctx)
	}
}

// armSweep starts the sweep timer if waiters wait and none is armed.
func (a *Actor) armSweep(ctx actor.Context) {
	if a.sweep != nil || len(a.waiters) == 0 {
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	a.sweep = time.AfterFunc(sweepEvery, func() { root.Send(self, sweepTick{}) })
}

func replyTo(ctx actor.Context, reply bool) *actor.PID {
	if !reply {
		return nil
	}
	return ctx.Sender()
}

// async runs a read on its own goroutine and sends the answer to the
// requester, so that slow reads (a page of include_docs) never hold up the
// mailbox and the writes behind it.
func (a *Actor) async(ctx actor.Context, f func() proto.Message) {
	sender := ctx.Sender()
	if sender == nil {
		return
	}
	root := ctx.ActorSystem().Root
	a.cfg.Reads.Go(func() {
		r := f()
		a.read(r)
		root.Send(sender, r)
	})
}

// maybeCommit starts the next group commit unless one is in flight. The
// group takes every queued write. The compactor's batch rides along with
// user writes: it joins the next group that has any, and commits on its
// own only once neither this shard nor any other of the node has started
// committing user writes for compactIdle, or once it has waited
// compactMaxWait. A batch that committed on its own whenever the queue was
// empty cost a synced commit that the next user write, arriving a moment
// later, waited behind (in this shard's queue, or in badger's, which all
// shards share); joining costs that write only the batch's records, in a
// sync it waits for anyway.
func (a *Actor) maybeCommit(ctx actor.Context) {
	if a.inflight {
		return
	}
	items := a.pending
	if len(items) > 0 {
		a.lastWrite = time.Now()
		a.cfg.Disk.Wrote(a.lastWrite)
	}
	if a.compactQ != nil {
		idle := min(time.Since(a.lastWrite), a.cfg.Disk.SinceWrite())
		waited := time.Since(a.compactSince)
		switch {
		case len(items) > 0 || idle >= compactIdle || waited >= compactMaxWait:
			items = append(items, *a.compactQ)
			a.compactQ = nil
		case !a.compactWake:
			a.compactWake = true
			d := max(min(compactIdle-idle, compactMaxWait-waited), compactIdle/4)
			self, root := ctx.Self(), ctx.ActorSystem().Root
			time.AfterFunc(d, func() { root.Send(self, compactWake{}) })
		}
	}
	if len(items) == 0 {
		return
	}
	a.pending = nil
	a.inflight = true
	g := group{stats: a.stats, track: a.compacting, keep: a.keep}
	for _, it := range items {
		switch {
		case it.batch != nil:
			g.batches = append(g.batches, it.batch)
		case it.purge != nil:
			g.purges = append(g.purges, it.purge)
		case it.purgeLimit > 0:
			g.purgeLimit = it.purgeLimit
		case it.compact != nil:
			g.compact = it.compact
		}
	}
	meta := proto.Clone(a.meta).(*pb.ShardMeta)
	for _, it := range items {
		if m := it.setMeta; m != nil {
			// a stamped change older than what the copy has is stale (a
			// copy brought up to date by internal replication after a
			// later change)
			if m.Security != nil && (m.Stamp == 0 || m.Stamp > meta.SecurityStamp) {
				meta.Security = m.Security
				meta.SecurityStamp = max(meta.SecurityStamp, m.Stamp)
			}
			if m.RevsLimit > 0 && (m.Stamp == 0 || m.Stamp > meta.RevsLimitStamp) {
				meta.RevsLimit = m.RevsLimit
				meta.RevsLimitStamp = max(meta.RevsLimitStamp, m.Stamp)
			}
		}
	}
	self := ctx.Self()
	root := ctx.ActorSystem().Root
	st := a.st
	go func() {
		var res applyResult
		if a.failed != nil {
			res.err = a.failed
		} else {
			res = st.apply(g, meta)
		}
		// after the commits, before the acknowledgements (lastKeySeqCached)
		st.applied.Add(1)
		root.Send(self, commitDone{items: items, res: res})
	}()
}

func (a *Actor) finishCommit(ctx actor.Context, d commitDone) {
	a.inflight = false
	if d.res.err != nil {
		a.cfg.Logger.Error("shard commit failed", "shard", a.cfg.Name, "err", d.res.err)
		e := perr(ErrInternal.Code, d.res.err.Error())
		for _, it := range d.items {
			if it.compact != nil {
				it.compact.answer(d.res.err)
				continue
			}
			if it.sender == nil {
				continue
			}
			switch {
			case it.batch != nil:
				ctx.Send(it.sender, &pb.UpdateResult{Results: failAll(it.batch, e)})
			case it.flush:
				ctx.Send(it.sender, &pb.FlushReply{Error: e})
			case it.purge != nil:
				ctx.Send(it.sender, &pb.PurgeReply{Error: e})
			case it.purgeLimit > 0:
				ctx.Send(it.sender, &pb.PurgedInfosLimitReply{Error: e})
			default:
				ctx.Send(it.sender, &pb.MetaReply{Error: e})
			}
		}
	} else {
		a.committed(d)
		a.meta = d.res.meta
		a.cfg.Disk.Committed(d.res.stats.FileSize - a.stats.FileSize)
		a.stats = d.res.stats
		if a.compacting {
			for _, dg := range d.res.digests {
				a.keep[dg] = true
			}
		}
		bi, pi := 0, 0
		for _, it := range d.items {
			switch {
			case it.batch != nil:
				if it.sender != nil {
					ctx.Send(it.sender, &pb.UpdateResult{Results: d.res.results[bi], UpdateSeq: a.meta.UpdateSeq})
				}
				bi++
			case it.flush:
				ctx.Send(it.sender, &pb.FlushReply{UpdateSeq: a.meta.UpdateSeq})
			case it.compact != nil:
				it.compact.answer(nil)
			case it.purge != nil:
				ctx.Send(it.sender, d.res.purged[pi])
				pi++
			case it.purgeLimit > 0:
				ctx.Send(it.sender, &pb.PurgedInfosLimitReply{Limit: a.stats.PurgedInfosLimit})
			default:
				if it.sender != nil {
					ctx.Send(it.sender, &pb.MetaReply{Meta: proto.Clone(a.meta).(*pb.ShardMeta)})
				}
			}
		}
		a.notify(ctx)
	}
	a.maybeCommit(ctx)
}

func failAll(b *pb.UpdateDocs, e *pb.Error) []*pb.DocResult {
	out := make([]*pb.DocResult, len(b.Docs))
	for i, d := range b.Docs {
		out[i] = &pb.DocResult{Tag: d.Tag, Id: d.Id, Error: e}
	}
	return out
}

func (a *Actor) notify(ctx actor.Context) {
	if len(a.waiters) == 0 {
		return
	}
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if a.meta.UpdateSeq > w.since {
			ctx.Send(w.pid, &pb.ChangeNotice{UpdateSeq: a.meta.UpdateSeq})
		} else {
			kept = append(kept, w)
		}
	}
	a.waiters = kept
}

func (a *Actor) sweepWaiters(_ actor.Context, now time.Time) {
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if now.Before(w.deadline) {
			kept = append(kept, w)
		}
	}
	a.waiters = kept
}
