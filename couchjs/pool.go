package couchjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config sizes a Pool. The zero value is usable; DESIGN.md says why the
// defaults are what they are.
type Config struct {
	// MaxWorkers bounds the worker processes, each running one call at a
	// time (CouchDB's [query_server_config] os_process_limit; default
	// 2*GOMAXPROCS, at least 2). Workers start on demand and are kept.
	MaxWorkers int
	// MaxWorkersPerDB bounds the workers the calls of one database hold
	// at once (default half of MaxWorkers, at least 1): a database whose
	// functions loop delays its own calls, not another database's. The
	// Pool's one-off methods count as one database.
	MaxWorkersPerDB int
	// MaxIdle bounds the runtimes each worker keeps between calls, one per
	// sandbox (default 32); past it the least recently used is dropped.
	// A sandbox whose runtime was dropped pays for a new one (its
	// prelude, about 0.3 ms) on its next call there.
	MaxIdle int
	// Timeout bounds one call (CouchDB's couchdb/os_process_timeout,
	// default 5s). For MapDocs it bounds each doc. A worker that has not
	// answered Timeout plus a second after its last sign of progress is
	// killed.
	Timeout time.Duration
	// WorkerMemory bounds each worker process (default 512 MiB; negative:
	// none): its address space above what it had at start
	// (RLIMIT_AS, not under the race detector), and its resident memory,
	// which the Pool watches and kills the worker past. A worker that
	// dies of it answers os_process_error and is replaced.
	WorkerMemory int64
	// MaxMemory bounds how far a worker's heap may grow during one call
	// before the call is interrupted (default WorkerMemory/2; negative:
	// no bound), a gentler stop than WorkerMemory's: the worker lives.
	MaxMemory int64
	// MaxOutput bounds one answer of a worker (default 64 MiB): a show's
	// body, a batch's emits.
	MaxOutput int
	// Logger receives log() output and the exceptions of map and reduce
	// functions that CouchDB logs and skips, and what a dying worker
	// printed (default slog.Default()).
	Logger *slog.Logger
}

// Defaults.
const (
	defaultMaxIdle      = 32
	defaultTimeout      = 5 * time.Second
	defaultWorkerMemory = 512 << 20
	defaultMaxOutput    = 64 << 20
	// killGrace is how long past Timeout the parent waits for a worker's
	// answer (the worker's own watchdog answers at Timeout) before it
	// kills it; also how long it waits after interrupting a call whose
	// caller gave up.
	killGrace = time.Second
	// startTimeout bounds a worker's start.
	startTimeout = 30 * time.Second
	// sharedBytes is the size of each worker's shared region: a view
	// batch (at most 1 MB of docs) fits; a bigger one goes through the
	// pipe.
	sharedBytes = 4 << 20
	// monitorEvery is how often the Pool reads its busy workers' resident
	// memory and deadlines.
	monitorEvery = 10 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = max(2, 2*runtime.GOMAXPROCS(0))
	}
	if c.MaxWorkersPerDB <= 0 {
		c.MaxWorkersPerDB = max(1, c.MaxWorkers/2)
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = defaultMaxIdle
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	if c.WorkerMemory == 0 {
		c.WorkerMemory = defaultWorkerMemory
	}
	if c.MaxMemory == 0 {
		if c.WorkerMemory > 0 {
			c.MaxMemory = c.WorkerMemory / 2
		} else {
			c.MaxMemory = 1 << 30
		}
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = defaultMaxOutput
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Error is an error answered by the query server, in CouchDB's terms: Code
// is the "error" member of the HTTP answer, Reason its "reason".
type Error struct{ Code, Reason string }

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

// ErrClosed is returned by calls on a closed Pool.
var ErrClosed = errors.New("couchjs: pool closed")

// errTimeout is what CouchDB answers when couchjs does not reply within
// os_process_timeout.
func errTimeout() *Error {
	return &Error{Code: "os_process_error", Reason: "OS process timed out."}
}

// errMemory is settee's answer for a call stopped by MaxMemory; CouchDB has
// none (its couchjs dies of its own JS heap limit and the call gets
// os_process_error too), so the code is the same.
func errMemory(limit int64) *Error {
	return &Error{Code: "os_process_error", Reason: fmt.Sprintf("JavaScript call exceeded the memory bound (%d bytes of heap growth)", limit)}
}

// errExit is CouchDB's answer when its couchjs process dies during a call
// (CouchDB 3.5.2, couchjs killed: {"error":"os_process_error",
// "reason":"{exit_status,137}"}).
func errExit(status int) *Error {
	return &Error{Code: "os_process_error", Reason: fmt.Sprintf("{exit_status,%d}", status)}
}

// Pool runs calls on worker processes (see doc.go): at most MaxWorkers,
// shared by databases in turn, each worker keeping runtimes bound to one
// sandbox (see DDoc). All methods are safe for concurrent use.
type Pool struct {
	cfg  Config
	log  *slog.Logger
	wc   workerConfig
	wcfg string        // the workers' environment
	seq  atomic.Uint64 // names the sandboxes of Pool.NewMapSet and map sets

	exeOnce sync.Once
	exe     string
	exeErr  error

	// mu guards the scheduler: which workers are free, how many each
	// database holds, who waits.
	mu     sync.Mutex
	closed bool
	total  int // workers alive or starting, counted against MaxWorkers
	live   map[*worker]struct{}
	free   []*worker
	busy   map[string]int       // workers held, by class
	queues map[string][]*waiter // waiting calls, by class, oldest first
	ring   []string             // classes with waiting calls, served in turn
	next   int                  // where in ring the next turn starts

	workers sync.WaitGroup // one per worker alive or starting; Done when reaped
	monOnce sync.Once
	monDone sync.WaitGroup
	stop    chan struct{}

	// counters, for tests and logs
	started, died atomic.Int64
	calls         atomic.Int64 // round trips to workers
}

// New returns a Pool; its workers start on first use.
func New(cfg Config) *Pool {
	cfg = cfg.withDefaults()
	wc := workerConfig{timeout: cfg.Timeout, maxMemory: cfg.MaxMemory, memory: cfg.WorkerMemory, maxOutput: cfg.MaxOutput}
	return &Pool{cfg: cfg, log: cfg.Logger, wc: wc, wcfg: wc.env(), live: map[*worker]struct{}{}, busy: map[string]int{},
		queues: map[string][]*waiter{}, stop: make(chan struct{})}
}

// Close stops the pool: later calls answer ErrClosed, waiting calls
// too; calls under way finish (a stuck one is killed at its deadline).
// Close returns once every worker process has exited and been waited
// for, and the pool's goroutines have ended.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.workers.Wait()
		return
	}
	p.closed = true
	for class, q := range p.queues {
		for _, wt := range q {
			wt.ch <- grant{err: ErrClosed}
		}
		delete(p.queues, class)
	}
	p.ring = nil
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, w := range free {
		w.stop()
	}
	p.workers.Wait()
	close(p.stop)
	p.monDone.Wait()
}

// waiter is a call waiting for a worker.
type waiter struct {
	class, key string
	ch         chan grant // buffered: the grant never blocks the granter
}

// grant hands a waiter a worker, or the right to start one.
type grant struct {
	w     *worker
	start bool
	err   error
}

func (p *Pool) share() int { return p.cfg.MaxWorkersPerDB }

// acquire waits for a worker for a call of class (its database) in
// sandbox key, preferring one that holds the sandbox's runtime.
func (p *Pool) acquire(ctx context.Context, class, key string) (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	var g grant
	ok := false
	if len(p.queues[class]) == 0 && p.busy[class] < p.share() {
		g, ok = p.take(key)
	}
	if ok {
		p.busy[class]++
		p.mu.Unlock()
	} else {
		wt := &waiter{class: class, key: key, ch: make(chan grant, 1)}
		if len(p.queues[class]) == 0 {
			p.ring = append(p.ring, class)
		}
		p.queues[class] = append(p.queues[class], wt)
		p.mu.Unlock()
		select {
		case g = <-wt.ch:
		case <-ctx.Done():
			if !p.unqueue(wt) {
				// granted meanwhile: give it back
				if g = <-wt.ch; g.err == nil {
					p.giveBack(g, class)
				}
			}
			return nil, fmt.Errorf("couchjs: waiting for a worker: %w", ctx.Err())
		}
		if g.err != nil {
			return nil, g.err
		}
	}
	if !g.start {
		return g.w, nil
	}
	w, err := p.startWorker()
	if err != nil {
		// startWorker released its p.workers count
		p.mu.Lock()
		p.total--
		p.busy[class]--
		p.dispatch()
		p.mu.Unlock()
		return nil, err
	}
	return w, nil
}

// take finds a worker for sandbox key: a free one holding its runtime,
// else the free one freed last, else the right to start one; p.mu is
// held.
func (p *Pool) take(key string) (grant, bool) {
	if key != "" {
		for i := len(p.free) - 1; i >= 0; i-- {
			if w := p.free[i]; w.holds(key) {
				p.free = append(p.free[:i], p.free[i+1:]...)
				return grant{w: w}, true
			}
		}
	}
	if n := len(p.free); n > 0 {
		w := p.free[n-1]
		p.free = p.free[:n-1]
		return grant{w: w}, true
	}
	if p.total < p.cfg.MaxWorkers {
		p.total++
		p.workers.Add(1)
		return grant{start: true}, true
	}
	return grant{}, false
}

// unqueue takes wt out of its queue; false if it was granted already.
func (p *Pool) unqueue(wt *waiter) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queues[wt.class]
	for i, x := range q {
		if x == wt {
			q = append(q[:i], q[i+1:]...)
			if len(q) == 0 {
				delete(p.queues, wt.class)
				p.dropFromRing(wt.class)
			} else {
				p.queues[wt.class] = q
			}
			return true
		}
	}
	return false
}

func (p *Pool) dropFromRing(class string) {
	for i, c := range p.ring {
		if c == class {
			p.ring = append(p.ring[:i], p.ring[i+1:]...)
			if p.next > i {
				p.next--
			}
			return
		}
	}
}

// giveBack returns a grant its waiter no longer wants.
func (p *Pool) giveBack(g grant, class string) {
	p.mu.Lock()
	p.busy[class]--
	if g.start {
		p.total--
		p.workers.Done()
	} else {
		p.free = append(p.free, g.w)
	}
	p.dispatch()
	p.mu.Unlock()
}

// release gives a worker back after a call of class: a dead one makes
// room for a new one, one of a closed pool is stopped.
func (p *Pool) release(w *worker, class string) {
	p.mu.Lock()
	p.busy[class]--
	if p.busy[class] == 0 {
		delete(p.busy, class)
	}
	var stop bool
	switch {
	case w.isDead():
		p.total--
	case p.closed:
		stop = true
	default:
		p.free = append(p.free, w)
	}
	p.dispatch()
	p.mu.Unlock()
	if stop {
		w.stop()
	}
}

// dispatch grants free workers (or the right to start one) to waiting
// calls, one class at a time in turn, skipping classes that hold their
// share; p.mu is held.
func (p *Pool) dispatch() {
	for !p.closed && len(p.ring) > 0 {
		if len(p.free) == 0 && p.total >= p.cfg.MaxWorkers {
			return
		}
		granted := false
		n := len(p.ring)
		for i := range n {
			idx := (p.next + i) % n
			class := p.ring[idx]
			if p.busy[class] >= p.share() {
				continue
			}
			q := p.queues[class]
			wt := q[0]
			g, ok := p.take(wt.key)
			if !ok {
				return
			}
			p.busy[class]++
			if len(q) == 1 {
				delete(p.queues, class)
				p.ring = append(p.ring[:idx], p.ring[idx+1:]...)
				p.next = idx
			} else {
				p.queues[class] = q[1:]
				p.next = idx + 1
			}
			if len(p.ring) > 0 {
				p.next %= len(p.ring)
			} else {
				p.next = 0
			}
			wt.ch <- g
			granted = true
			break
		}
		if !granted {
			return
		}
	}
}

// call runs req in sandbox d on a worker. onFrame handles a list's row
// requests and chunks.
func (p *Pool) call(ctx context.Context, d *DDoc, req *request, onFrame func(*worker, byte, []byte) error) (*result, error) {
	if p == nil {
		return nil, ErrClosed
	}
	req.key, req.once, req.bound = d.key, d.once, d.bound
	for attempt := 0; ; attempt++ {
		w, err := p.acquire(ctx, d.class, d.key)
		if err != nil {
			return nil, err
		}
		res, err := p.callOn(ctx, w, d, req, onFrame)
		p.release(w, d.class)
		if errors.Is(err, errStale) && attempt == 0 {
			// the worker was gone before it got the call: another one
			continue
		}
		if errors.Is(err, errStale) {
			err = errExit(w.status)
		}
		return res, err
	}
}

func (p *Pool) callOn(ctx context.Context, w *worker, d *DDoc, req *request, onFrame func(*worker, byte, []byte) error) (*result, error) {
	req.evict = w.takeEvicted()
	req.ddoc = nil
	if d.bound && !w.holds(d.key) {
		req.ddoc = d.ddoc
	}
	res, err := w.call(ctx, req, onFrame)
	if err == nil && res.status == rMissing && req.ddoc == nil {
		req.ddoc, req.evict = d.ddoc, nil
		res, err = w.call(ctx, req, onFrame)
	}
	if err != nil {
		return nil, err
	}
	if !d.once {
		if res.dropped {
			w.forget(d.key)
		} else {
			w.touch(d.key)
		}
	}
	switch res.status {
	case rOK:
		return res, nil
	case rError:
		return nil, &Error{Code: res.code, Reason: res.reason}
	case rCut:
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("couchjs: %w", err)
		}
		return nil, errCut
	case rFail:
		return nil, errors.New(res.reason)
	}
	return nil, errBadAnswer
}
