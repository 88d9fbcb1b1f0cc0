package replicator

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/tasks"
)

// maxBatchBytes caps one _bulk_docs request (seed 001: 4 MB).
const maxBatchBytes = 4 << 20

// JobEvent is what a job reports to its owner (the scheduler).
type JobEvent struct {
	Kind   string // "running", "progress", "completed", "failed"
	Stats  *pb.RepStats
	Seq    string // checkpointed source seq (raw JSON)
	Result map[string]any
	Err    error
}

// jobConfig is everything a job actor needs.
type jobConfig struct {
	rep            *Rep
	repID, baseID  string
	docID          string // _replicator doc id, "" for POST /_replicate
	source, target Endpoint
	// connTimeout is the job's connection_timeout (the replication's, or
	// the scheduler's default).
	connTimeout time.Duration
	tasks       *tasks.Registry
	log         *slog.Logger
	// report is called from the job actor's goroutine, in order.
	report func(JobEvent)
	// stopped is called once, last, when the job's actors have stopped
	// and nothing the job started runs any more.
	stopped func()
	ctx     context.Context
	cancel  context.CancelFunc
}

// Control messages below never leave the job's actor tree (timers and
// self-sends within one process), so they are plain Go types; everything
// that carries changes or docs between the job's actors is protobuf.
type (
	checkpointTick struct{}
	readNext       struct{}
)

// jobActor supervises a replication: it starts the endpoints' session,
// hands change batches to idle workers, checkpoints the seq below which
// every batch is written, and reports its state.
type jobActor struct {
	cfg *jobConfig

	reader  *actor.PID
	workers []*actor.PID
	idle    []*actor.PID

	queue      []*pb.RepChangeBatch // batches not yet given to a worker
	nextOrd    uint64               // next batch ordinal to assign
	doneOrd    map[uint64]bool      // finished batches above the committed one
	batchSeq   map[uint64]string    // the last seq of each uncommitted batch
	commitOrd  uint64               // every batch < commitOrd is written
	commitSeq  string               // the seq of the last committed batch
	inFlight   int
	readerWait bool // the reader waits for an ack
	readerDone bool
	pending    uint64

	stats     *pb.RepStats
	seed      *pb.RepStats // the counters the session started from
	session   string
	startSeq  string
	startTime time.Time
	history   []any
	lastCkpt  string
	ckptTimer *time.Timer
	// ticking counts the checkpoint timer while its func may run, so
	// that the stopped job waits for it
	ticking    sync.WaitGroup
	task       *tasks.Task
	finished   bool
	srcLastSeq string
}

func newJobProps(cfg *jobConfig) *actor.Props {
	// a crashed child stops (not restarted with its batch lost); the job
	// sees it terminate and fails as a whole, to be retried with backoff
	stop := actor.NewOneForOneStrategy(0, time.Second, func(any) actor.Directive { return actor.StopDirective })
	return actor.PropsFromProducer(func() actor.Actor {
		return &jobActor{cfg: cfg, stats: &pb.RepStats{}, doneOrd: map[uint64]bool{}, batchSeq: map[uint64]string{}}
	}, actor.WithSupervisor(stop))
}

func (j *jobActor) Receive(ctx actor.Context) {
	defer func() {
		// a job is not restarted in place (its children and session would
		// be half gone): a panic fails it, and the scheduler retries it
		if r := recover(); r != nil {
			j.cfg.log.Error("replicator: job panicked", "rep_id", j.cfg.repID, "panic", r, "stack", string(debug.Stack()))
			j.fail(ctx, fmt.Errorf("replicator: job crashed: %v", r))
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if err := j.start(ctx); err != nil {
			j.fail(ctx, err)
		}
	case *pb.RepChangesPage:
		j.onPage(ctx, m)
	case *pb.RepBatchDone:
		j.onBatchDone(ctx, m)
	case *pb.RepAck:
		// a worker can take another batch
		if j.finished {
			return
		}
		j.idle = append(j.idle, ctx.Sender())
		j.dispatch(ctx)
		j.maybeAck(ctx)
	case checkpointTick:
		if j.finished {
			return
		}
		if err := j.checkpoint(j.cfg.ctx, false); err != nil {
			j.fail(ctx, err)
			return
		}
		j.armTimer(ctx)
	case *actor.Terminated:
		if !j.finished {
			j.fail(ctx, fmt.Errorf("replicator: a job actor crashed (%s)", m.Who.Id))
		}
	case *actor.Stopping:
		// stopped from outside while it ran (not after it completed or
		// failed, which set finished, nor before it started)
		stopped := !j.finished && j.reader != nil
		j.finished = true
		j.cfg.cancel()
		if stopped {
			j.stopCheckpoint()
		}
	case *actor.Stopped:
		// the children have stopped by now (an actor stops after its
		// children), so this is the last the job does
		defer j.cfg.stopped()
		if j.ckptTimer != nil && j.ckptTimer.Stop() {
			j.ticking.Done() // its func will not run
		}
		j.ticking.Wait()
		if j.task != nil {
			j.task.Done()
		}
		j.cfg.source.Close()
		j.cfg.target.Close()
	}
}

func (j *jobActor) start(ctx actor.Context) error {
	c, rep := j.cfg.ctx, j.cfg.rep
	j.startTime = time.Now()
	j.session = newSessionID()
	if _, err := j.cfg.source.Info(c); err != nil {
		return openErr("source", j.cfg.source.Name(), err)
	}
	if _, err := j.cfg.target.Info(c); err != nil {
		if !rep.CreateTarget || !isNotFound(err) {
			return openErr("target", j.cfg.target.Name(), err)
		}
		if err := j.cfg.target.Create(c); err != nil {
			return fmt.Errorf("create target %s: %w", j.cfg.target.Name(), err)
		}
	}
	seq, hist, seed, err := findStartSeq(c, j.cfg.source, j.cfg.target, j.cfg.baseID)
	if err != nil {
		return err
	}
	j.stats, j.seed = seed, proto.Clone(seed).(*pb.RepStats)
	if rep.SinceSeq != "" {
		seq = rep.SinceSeq
	}
	j.startSeq, j.commitSeq, j.lastCkpt, j.history = seq, seq, seq, hist
	j.srcLastSeq = seq
	if j.cfg.tasks != nil {
		// as CouchDB's task: database and doc_id are null for a transient
		// (POST /_replicate) job
		db := any(nil)
		if j.cfg.docID != "" {
			db = ReplicatorDB
		}
		j.task = j.cfg.tasks.Start("replication", map[string]any{
			"replication_id": j.cfg.repID, "doc_id": nullable(j.cfg.docID),
			"database": db,
			"source":   j.cfg.source.Name(), "target": j.cfg.target.Name(),
			"continuous": rep.Continuous, "checkpoint_interval": rep.CheckpointMillis,
			"docs_read": seed.DocsRead, "docs_written": seed.DocsWritten, "doc_write_failures": seed.DocWriteFailures,
			"missing_revisions_found": seed.MissingFound, "revisions_checked": seed.MissingChecked, "changes_pending": nil,
			"bulk_get_docs": seed.BulkGetDocs, "bulk_get_attempts": seed.BulkGetAttempts,
			"checkpointed_source_seq": rawToAny(seq), "source_seq": rawToAny(seq), "through_seq": rawToAny(seq),
		})
	}
	n := rep.WorkerProcesses
	for range n {
		b := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &batcher{target: j.cfg.target, ctx: c, size: rep.WorkerBatchSize}
		}))
		w := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &worker{job: ctx.Self(), batcher: b, cfg: j.cfg}
		}))
		ctx.Watch(b)
		ctx.Watch(w)
		j.workers = append(j.workers, w)
		j.idle = append(j.idle, w)
	}
	page := rep.WorkerBatchSize * n
	j.reader = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &reader{job: ctx.Self(), cfg: j.cfg, since: seq, limit: page}
	}))
	ctx.Watch(j.reader)
	j.cfg.report(JobEvent{Kind: "running", Seq: seq, Stats: &pb.RepStats{}})
	j.armTimer(ctx)
	return nil
}

func (j *jobActor) armTimer(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	d := time.Duration(j.cfg.rep.CheckpointMillis) * time.Millisecond
	j.ticking.Add(1)
	j.ckptTimer = time.AfterFunc(d, func() {
		defer j.ticking.Done()
		root.Send(self, checkpointTick{})
	})
}

func (j *jobActor) onPage(ctx actor.Context, p *pb.RepChangesPage) {
	if p.Error != nil {
		j.fail(ctx, fmt.Errorf("source _changes: %s", p.Error.Reason))
		return
	}
	j.pending = p.Pending
	size := j.cfg.rep.WorkerBatchSize
	rows := p.Changes
	if len(rows) == 0 {
		// nothing to write, but the seq moves (filtered rows)
		j.doneOrd[j.nextOrd] = true
		j.batchSeq[j.nextOrd] = p.LastSeq
		j.nextOrd++
	}
	for len(rows) > 0 {
		n := min(size, len(rows))
		b := &pb.RepChangeBatch{Ordinal: j.nextOrd, Changes: rows[:n], LastSeq: rows[n-1].Seq}
		rows = rows[n:]
		switch {
		case len(rows) == 0 && hasSeq(p.LastSeq):
			b.LastSeq = p.LastSeq
		case !hasSeq(b.LastSeq):
			// its last row has no seq (seq_interval): the batch moves no
			// checkpoint; the next batch with a seq does, once every batch
			// before it is written
			b.LastSeq = ""
		}
		j.batchSeq[j.nextOrd] = b.LastSeq
		j.nextOrd++
		j.queue = append(j.queue, b)
	}
	if p.LastSeq != "" {
		j.srcLastSeq = p.LastSeq
	}
	j.readerDone = p.Done
	j.readerWait = !p.Done
	j.advance()
	j.dispatch(ctx)
	j.maybeAck(ctx)
	j.maybeFinish(ctx)
}

func (j *jobActor) dispatch(ctx actor.Context) {
	for len(j.idle) > 0 && len(j.queue) > 0 {
		w := j.idle[len(j.idle)-1]
		j.idle = j.idle[:len(j.idle)-1]
		ctx.Send(w, j.queue[0])
		j.queue = j.queue[1:]
		j.inFlight++
	}
}

// maybeAck lets the reader read on while the queue is short.
func (j *jobActor) maybeAck(ctx actor.Context) {
	if j.readerWait && len(j.queue) < len(j.workers) {
		j.readerWait = false
		ctx.Send(j.reader, &pb.RepAck{})
	}
}

func (j *jobActor) onBatchDone(ctx actor.Context, m *pb.RepBatchDone) {
	if j.finished {
		return
	}
	if m.Error != nil {
		j.fail(ctx, fmt.Errorf("%s", m.Error.Reason))
		return
	}
	j.inFlight--
	if s := m.Stats; s != nil {
		j.stats.DocsRead += s.DocsRead
		j.stats.DocsWritten += s.DocsWritten
		j.stats.MissingChecked += s.MissingChecked
		j.stats.MissingFound += s.MissingFound
		j.stats.DocWriteFailures += s.DocWriteFailures
		j.stats.BulkGetDocs += s.BulkGetDocs
		j.stats.BulkGetAttempts += s.BulkGetAttempts
	}
	j.doneOrd[m.Ordinal] = true
	j.advance()
	j.dispatch(ctx)
	j.maybeAck(ctx)
	j.updateTask()
	j.cfg.report(JobEvent{Kind: "progress", Stats: j.statsCopy(), Seq: j.lastCkpt})
	j.maybeFinish(ctx)
}

// advance moves the committed seq over every finished batch that has no
// unfinished batch before it (batches finish out of order).
func (j *jobActor) advance() {
	for j.doneOrd[j.commitOrd] {
		seq := j.batchSeq[j.commitOrd]
		delete(j.doneOrd, j.commitOrd)
		delete(j.batchSeq, j.commitOrd)
		if seq != "" {
			j.commitSeq = seq
		}
		j.commitOrd++
	}
}

func (j *jobActor) maybeFinish(ctx actor.Context) {
	if !j.readerDone || j.inFlight > 0 || len(j.queue) > 0 || j.finished {
		return
	}
	if err := j.checkpoint(j.cfg.ctx, true); err != nil {
		j.fail(ctx, err)
		return
	}
	j.finished = true
	noChanges := j.stats.MissingChecked == j.seed.GetMissingChecked() && j.commitSeq == j.startSeq
	res := map[string]any{"ok": true, "session_id": j.session, "source_last_seq": rawToAny(j.commitSeq),
		"replication_id_version": RepIDVersion, "history": j.history}
	if noChanges {
		res["no_changes"] = true
	}
	j.cfg.report(JobEvent{Kind: "completed", Stats: j.statsCopy(), Seq: j.commitSeq, Result: res})
	ctx.Stop(ctx.Self())
}

func (j *jobActor) fail(ctx actor.Context, err error) {
	if j.finished {
		return
	}
	j.finished = true
	j.cfg.cancel()
	j.cfg.log.Warn("replication failed", "rep_id", j.cfg.repID, "err", err)
	j.cfg.report(JobEvent{Kind: "failed", Err: err, Stats: j.statsCopy(), Seq: j.lastCkpt})
	ctx.Stop(ctx.Self())
}

func (j *jobActor) statsCopy() *pb.RepStats {
	return proto.Clone(j.stats).(*pb.RepStats)
}

func (j *jobActor) updateTask() {
	if j.task == nil {
		return
	}
	j.task.Update(map[string]any{
		"docs_read": j.stats.DocsRead, "docs_written": j.stats.DocsWritten,
		"doc_write_failures": j.stats.DocWriteFailures, "missing_revisions_found": j.stats.MissingFound,
		"revisions_checked": j.stats.MissingChecked, "changes_pending": j.pending,
		"bulk_get_docs": j.stats.BulkGetDocs, "bulk_get_attempts": j.stats.BulkGetAttempts,
		"checkpointed_source_seq": rawToAny(j.lastCkpt), "source_seq": rawToAny(j.srcLastSeq),
		"through_seq": rawToAny(j.commitSeq),
	})
}

// dbError is a database that cannot be opened; a missing one reads as
// CouchDB's "db_not_found: could not open <url>".
type dbError struct {
	msg string
	err error
}

func (e *dbError) Error() string { return e.msg }
func (e *dbError) Unwrap() error { return e.err }

func openErr(role, name string, err error) error {
	if isNotFound(err) {
		return &dbError{msg: "db_not_found: could not open " + name, err: err}
	}
	msg := err.Error()
	if !strings.Contains(msg, strings.TrimSuffix(name, "/")) {
		msg = name + ": " + msg
	}
	return &dbError{msg: role + " " + msg, err: err}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
