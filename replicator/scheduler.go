package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/tasks"
)

// ReplicatorDB is the database whose docs describe replications.
const ReplicatorDB = "_replicator"

// Config wires a scheduler to its node.
type Config struct {
	System     *actor.ActorSystem
	Coord      *coordinator.Coordinator
	Create     CreateFunc
	ServerUUID string
	NodeName   string
	Tasks      *tasks.Registry
	Log        *slog.Logger
	// MaxJobs caps running jobs (CouchDB's max_jobs, 500); the rest wait
	// as pending and are rotated in every Interval (max_churn at a time).
	MaxJobs  int
	MaxChurn int
	Interval time.Duration
	// RetryBase is the first retry delay of a crashed job; each further
	// consecutive crash doubles it, up to RetryMax.
	RetryBase time.Duration
	RetryMax  time.Duration
	// HealthThreshold: a job that crashes after running this long is no
	// longer counted as crashing in a row (CouchDB's health_threshold_sec,
	// 120 s); one that crashes sooner keeps backing off.
	HealthThreshold time.Duration
	// ConnectionTimeout is connection_timeout for replications that do
	// not set one (0: DefaultConnectionTimeout, CouchDB's 30 s).
	ConnectionTimeout time.Duration
	// Owner names the node that runs a _replicator doc's job (nil: this
	// one). In a cluster every node sees every doc; each runs only those
	// it owns, and takes over the docs of a node that goes down.
	Owner func(docID string) string
	// Filters runs design-doc filters for this node's databases (nil: a
	// replication with one from a local source fails).
	Filters FilterFunc
	// Policy is what writes to local databases pass, as the user a job
	// runs as (nil: none, for tests that build a scheduler alone).
	Policy *policy.Policy
	// IsServerAdmin reports whether a _replicator doc's owner is a server
	// admin: only such a job may name local databases (nil: nobody is).
	IsServerAdmin func(name string) bool
	// FilterRecheck is how often a running _replicator doc's design-doc
	// filter is read again from its source, to find an edited function
	// (0: a minute, as CouchDB's filter_backoff).
	FilterRecheck time.Duration
}

// Scheduler runs replication jobs: those of _replicator docs, watched by
// its actor, and transient ones from POST /_replicate.
type Scheduler struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	pid    *actor.PID

	// started counts what the scheduler started and Close waits for
	// besides the watcher: each job until its actor tree has stopped
	// (a job stopped earlier may still be checkpointing), and each write
	// recording a completion.
	started sync.WaitGroup

	mu         sync.Mutex
	byID       map[string]*entry // by full replication id
	byDoc      map[string]*entry // _replicator docs, by doc id
	lastRotate time.Time
	closed     bool // set by Close: no job starts after it
}

// entry is one replication the scheduler knows.
type entry struct {
	repID, baseID string
	rep           *Rep
	docID         string // "" for a transient job
	docRev        string
	docBody       []byte
	state         string
	errMsg        string
	errCount      int
	nextStart     time.Time
	startTime     time.Time
	runSince      time.Time
	lastUpdated   time.Time
	stats         *pb.RepStats
	ckptSeq       string
	events        []map[string]any
	gen           int
	pid           *actor.PID
	stop          context.CancelFunc
	waiters       []chan JobEvent
	// filterChecked: when the doc's design-doc filter was last read
	filterChecked time.Time
	// who is the user the job runs as: its doc's owner, or the server
	// admin who started a transient job
	who *policy.Subject
}

// Start starts the scheduler and its _replicator watcher.
func Start(cfg Config) *Scheduler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = 500
	}
	if cfg.MaxChurn <= 0 {
		cfg.MaxChurn = 20
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 60 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 2 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Minute
	}
	if cfg.HealthThreshold <= 0 {
		cfg.HealthThreshold = 2 * time.Minute
	}
	if cfg.ConnectionTimeout <= 0 {
		cfg.ConnectionTimeout = DefaultConnectionTimeout
	}
	s := &Scheduler{cfg: cfg, byID: map[string]*entry{}, byDoc: map[string]*entry{}, lastRotate: time.Now()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.pid = cfg.System.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &watcher{s: s} }))
	return s
}

// Close stops the watcher and every job, and returns once nothing the
// scheduler started runs: the watcher, every job's actors and its reader's
// feed goroutine (jobs stopped before Close included), and the writes
// recording completions.
func (s *Scheduler) Close() {
	s.mu.Lock()
	// every Add to s.started happens before this (or while a job it
	// counts still runs), so the Wait below cannot miss one
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	_ = s.cfg.System.Root.StopFuture(s.pid).Wait()
	s.mu.Lock()
	var pids []*actor.PID
	for _, e := range s.byID {
		if e.pid != nil {
			e.stop()
			pids = append(pids, e.pid)
			e.pid = nil
		}
	}
	s.mu.Unlock()
	// every job is told first, then waited for: each checkpoints as it
	// stops (up to stopCheckpointTimeout), all at once
	for _, p := range pids {
		s.cfg.System.Root.Stop(p)
	}
	s.started.Wait()
}

// watcher is the scheduler's actor: it follows _replicator's changes
// (coordinator Changes + Wait) and runs a scheduling pass each time round.
type watcher struct {
	s     *Scheduler
	since string
}

type watchNext struct{} // self-send, never leaves the actor

func (w *watcher) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		w.since = "0"
		ctx.Send(ctx.Self(), watchNext{})
	case watchNext:
		if w.s.ctx.Err() != nil {
			return
		}
		w.poll()
		w.s.refreshFilters()
		w.s.schedule()
		ctx.Send(ctx.Self(), watchNext{})
	}
}

func (w *watcher) poll() {
	s := w.s
	c := s.cfg.Coord
	last, err := c.Changes(s.ctx, ReplicatorDB, coordinator.ChangesQuery{Since: w.since, Limit: 1000, IncludeDocs: true},
		func(r *coordinator.ChangeRow) error {
			s.docChanged(r.Info.Id, r.Info.Winner, r.Info.Deleted, r.Json)
			return nil
		})
	if err != nil {
		if s.ctx.Err() == nil {
			s.cfg.Log.Warn("replicator: watching _replicator", "err", err)
			_ = sleep(s.ctx, time.Second)
		}
		return
	}
	if last != w.since {
		w.since = last
		return
	}
	_, _ = c.Wait(s.ctx, ReplicatorDB, w.since, time.Second)
}

func (e *entry) event(typ string, reason string) {
	ev := map[string]any{"type": typ, "timestamp": time.Now().UTC().Format(time.RFC3339)}
	if reason != "" {
		ev["reason"] = reason
	}
	e.events = append([]map[string]any{ev}, e.events...)
	if len(e.events) > 20 {
		e.events = e.events[:20]
	}
	e.lastUpdated = time.Now()
}

// docChanged handles one change of a _replicator doc.
func (s *Scheduler) docChanged(id, rev string, deleted bool, body []byte) {
	if len(id) > 0 && id[0] == '_' {
		return // design docs
	}
	// a job runs as its doc's owner; local databases are reached without
	// HTTP's checks, so only a server admin's job may name them (CouchDB
	// 3 refuses local endpoints for everyone: local_endpoints_not_supported)
	who := s.docSubject(body)
	if !deleted && !who.ServerAdmin {
		if rep, err := ParseRep(body); err == nil && (rep.Source.Local || rep.Target.Local) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if old := s.byDoc[id]; old != nil {
				s.remove(old)
			}
			e := &entry{docID: id, docRev: rev, state: "failed", startTime: time.Now(),
				errMsg: "local_endpoints_not_supported: the owner of a replication document with local databases must be a server admin; name them by URL, with credentials"}
			e.event("crashed", e.errMsg)
			s.byDoc[id] = e
			return
		}
	}
	// a design-doc filter's source is part of the id: read first, the
	// scheduler not locked
	code, fetchErr := s.docFilterCode(id, deleted, body)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.byDoc[id]
	if deleted {
		if old != nil {
			s.remove(old)
		}
		return
	}
	var st struct {
		State string `json:"_replication_state"`
	}
	_ = json.Unmarshal(body, &st)
	rep, err := ParseRep(body)
	if err == nil && rep.Cancel {
		err = errors.New("cancel is not allowed in _replicator docs")
	}
	if err != nil {
		if old != nil {
			s.remove(old)
		}
		e := &entry{docID: id, docRev: rev, state: "failed", errMsg: "bad replication document: " + err.Error(), startTime: time.Now()}
		e.event("crashed", e.errMsg)
		s.byDoc[id] = e
		return
	}
	rep.ID = id
	if rep.Filter != "" {
		if fetchErr != nil {
			s.filterFailed(old, id, rev, body, rep, fetchErr)
			return
		}
		rep.FilterCode = code
	}
	repID := rep.FullID(s.cfg.ServerUUID)
	if old != nil && old.repID == repID {
		old.docRev, old.docBody = rev, body
		old.filterChecked = time.Now()
		if st.State == "completed" && old.state != "completed" {
			s.stopJob(old)
			old.state = "completed"
		}
		return
	}
	if old != nil {
		s.remove(old)
	}
	if other := s.byID[repID]; other != nil {
		e := &entry{docID: id, docRev: rev, state: "failed", startTime: time.Now(),
			errMsg: fmt.Sprintf("Replication `%s` specified by document `%s` already started, triggered by document `%s`", repID, id, other.docID)}
		s.byDoc[id] = e
		return
	}
	e := &entry{repID: repID, baseID: rep.BaseID(s.cfg.ServerUUID), rep: rep, docID: id, docRev: rev, docBody: body,
		state: "pending", startTime: time.Now(), stats: &pb.RepStats{}, filterChecked: time.Now(), who: who}
	e.event("added", "")
	if st.State == "completed" {
		e.state = "completed"
	}
	s.byDoc[id] = e
	s.byID[repID] = e
}

func (s *Scheduler) remove(e *entry) {
	s.stopJob(e)
	if e.repID != "" && s.byID[e.repID] == e {
		delete(s.byID, e.repID)
	}
	if e.docID != "" && s.byDoc[e.docID] == e {
		delete(s.byDoc, e.docID)
	}
	for _, w := range e.waiters {
		w <- JobEvent{Kind: "failed", Err: errors.New("replication cancelled")}
	}
	e.waiters = nil
}

func (s *Scheduler) stopJob(e *entry) {
	if e.pid == nil {
		return
	}
	e.stop()
	s.cfg.System.Root.Stop(e.pid)
	e.pid = nil
	e.gen++
	e.event("stopped", "")
}

func (s *Scheduler) running() int {
	n := 0
	for _, e := range s.byID {
		if e.pid != nil {
			n++
		}
	}
	return n
}

// schedule starts pending jobs whose backoff is over while fewer than
// MaxJobs run, and every Interval rotates up to MaxChurn of the longest
// running continuous jobs out in favour of waiting ones.
func (s *Scheduler) schedule() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var ready []*entry
	for _, e := range s.byID {
		if !s.owned(e) {
			if e.pid != nil {
				// its owner is back (or new): hand the job over; the
				// checkpoints on both ends let the owner resume
				s.stopJob(e)
				e.state = "pending"
			}
			continue
		}
		if e.pid == nil && (e.state == "pending" || e.state == "crashing") && !now.Before(e.nextStart) {
			ready = append(ready, e)
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].lastUpdated.Before(ready[j].lastUpdated) })
	run := s.running()
	if len(ready) > 0 && run >= s.cfg.MaxJobs && now.Sub(s.lastRotate) >= s.cfg.Interval {
		s.lastRotate = now
		var cont []*entry
		for _, e := range s.byID {
			if e.pid != nil && e.rep.Continuous && e.docID != "" {
				cont = append(cont, e)
			}
		}
		sort.Slice(cont, func(i, j int) bool { return cont[i].runSince.Before(cont[j].runSince) })
		for i := 0; i < len(cont) && i < s.cfg.MaxChurn && i < len(ready); i++ {
			s.stopJob(cont[i])
			cont[i].state = "pending"
			run--
		}
	}
	for _, e := range ready {
		if run >= s.cfg.MaxJobs {
			break
		}
		s.startJob(e)
		run++
	}
}

// owned reports whether this node runs e: transient jobs always, docs
// when the cluster says so.
func (s *Scheduler) owned(e *entry) bool {
	return e.docID == "" || s.cfg.Owner == nil || s.cfg.Owner(e.docID) == s.cfg.NodeName
}

// docSubject is the user a _replicator doc's job runs as: its owner, a
// server admin or not.
func (s *Scheduler) docSubject(body []byte) *policy.Subject {
	owner := policy.Owner(body)
	if s.cfg.IsServerAdmin != nil && s.cfg.IsServerAdmin(owner) {
		return policy.Admin(owner)
	}
	return policy.NewSubject(owner, nil, false)
}

func (s *Scheduler) endpoint(sp *Spec, rep *Rep, who *policy.Subject, connTimeout time.Duration) Endpoint {
	if sp.Local {
		return NewLocalEndpoint(s.cfg.Coord, sp.URL, s.cfg.Create).WithFilters(s.cfg.Filters).As(s.cfg.Policy, who)
	}
	e := NewHTTPEndpoint(sp)
	e.Log = s.cfg.Log
	if rep.RetriesPerRequest >= 0 {
		e.Retries = rep.RetriesPerRequest
	}
	e.Timeout = connTimeout
	return e
}

// connTimeout is a replication's connection_timeout.
func (s *Scheduler) connTimeout(rep *Rep) time.Duration {
	if rep.ConnectionTimeout > 0 {
		return rep.ConnectionTimeout
	}
	return s.cfg.ConnectionTimeout
}

func (s *Scheduler) startJob(e *entry) {
	if s.closed {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	e.gen++
	gen := e.gen
	ct := s.connTimeout(e.rep)
	cfg := &jobConfig{rep: e.rep, repID: e.repID, baseID: e.baseID, docID: e.docID,
		source: s.endpoint(e.rep.Source, e.rep, e.who, ct), target: s.endpoint(e.rep.Target, e.rep, e.who, ct), connTimeout: ct,
		tasks: s.cfg.Tasks, log: s.cfg.Log, ctx: ctx, cancel: cancel}
	cfg.report = func(ev JobEvent) { s.onEvent(e, gen, ev) }
	s.started.Add(1)
	cfg.stopped = s.started.Done
	e.stop = cancel
	e.state = "initializing"
	e.runSince = time.Now()
	e.event("started", "")
	e.pid = s.cfg.System.Root.Spawn(newJobProps(cfg))
}

func (s *Scheduler) onEvent(e *entry, gen int, ev JobEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.gen != gen {
		return
	}
	if ev.Stats != nil {
		e.stats = ev.Stats
	}
	if ev.Seq != "" {
		e.ckptSeq = ev.Seq
	}
	e.lastUpdated = time.Now()
	switch ev.Kind {
	case "running":
		// errCount stays: a job that starts and crashes again at once is
		// still crashing in a row, and its backoff keeps growing
		e.state = "running"
		e.errMsg = ""
	case "completed":
		e.pid = nil
		e.state = "completed"
		e.errCount = 0
		e.event("completed", "")
		for _, w := range e.waiters {
			w <- ev
		}
		e.waiters = nil
		if e.docID == "" {
			delete(s.byID, e.repID)
		} else {
			// the job reporting is still counted in s.started, so this
			// Add cannot race Close's Wait
			id, rev, body := e.docID, e.docRev, e.docBody // read under s.mu
			s.started.Go(func() { s.markCompleted(id, rev, body, ev.Stats) })
		}
	case "failed":
		e.pid = nil
		if time.Since(e.runSince) > s.cfg.HealthThreshold {
			e.errCount = 0 // it ran well before this crash
		}
		e.errCount++
		e.errMsg = ev.Err.Error()
		e.event("crashed", e.errMsg)
		if e.docID == "" {
			// a transient job reports its error to its caller instead
			for _, w := range e.waiters {
				w <- ev
			}
			e.waiters = nil
			delete(s.byID, e.repID)
			e.state = "failed"
			return
		}
		e.state = "crashing"
		d := s.cfg.RetryBase << min(e.errCount-1, 20)
		e.nextStart = time.Now().Add(min(d, s.cfg.RetryMax))
	}
}

// markCompleted records a finished one-shot replication in its doc, as
// CouchDB does, so a restart does not run it again.
func (s *Scheduler) markCompleted(id, rev string, body []byte, st *pb.RepStats) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return
	}
	m["_replication_state"], _ = json.Marshal("completed")
	m["_replication_state_time"], _ = json.Marshal(time.Now().UTC().Format(time.RFC3339))
	m["_replication_stats"], _ = json.Marshal(statsJSON(st, ""))
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	out, err := s.cfg.Coord.UpdateDocs(ctx, ReplicatorDB, []*pb.DocUpdate{{Id: id, Rev: rev, Body: b}}, true, 0)
	if err == nil && len(out) == 1 && out[0].Err != nil {
		err = out[0].Err
	}
	if err != nil && s.ctx.Err() == nil {
		s.cfg.Log.Warn("replicator: recording completion", "doc", id, "err", err)
	}
}

func statsJSON(st *pb.RepStats, seq string) map[string]any {
	if st == nil {
		st = &pb.RepStats{}
	}
	m := map[string]any{
		"revisions_checked": st.MissingChecked, "missing_revisions_found": st.MissingFound,
		"docs_read": st.DocsRead, "docs_written": st.DocsWritten, "doc_write_failures": st.DocWriteFailures,
		"bulk_get_docs": st.BulkGetDocs, "bulk_get_attempts": st.BulkGetAttempts,
		"changes_pending": nil,
	}
	if seq != "" {
		m["checkpointed_source_seq"] = rawToAny(seq)
	}
	return m
}
