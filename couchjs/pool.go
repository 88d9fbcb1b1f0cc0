package couchjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// Config sizes a Pool. The zero value is usable.
type Config struct {
	// MaxVMs bounds the runtimes alive at once (default 2*GOMAXPROCS).
	MaxVMs int
	// Timeout bounds one call (CouchDB's couchdb/os_process_timeout,
	// default 5s). For MapDocs it bounds the whole batch.
	Timeout time.Duration
	// MaxMemory bounds how far the process heap may grow during one call
	// before the call is interrupted (default 1 GiB; negative: no bound).
	// Approximate: see the package comment.
	MaxMemory int64
	// Logger receives log() output and the exceptions of map and reduce
	// functions that CouchDB logs and skips (default slog.Default()).
	Logger *slog.Logger
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

// Pool is a bounded set of goja runtimes and a cache of compiled sources.
// All methods are safe for concurrent use.
type Pool struct {
	cfg Config
	log *slog.Logger
	// slots holds one entry per runtime that may exist: a ready *vm, or
	// nil for one not created yet (or discarded). Taking an entry is the
	// right to run; MaxVMs bounds both concurrency and memory.
	slots chan *vm

	mu     sync.Mutex
	closed bool
	progs  map[string]*compiled     // by source, see compile.go
	mods   map[string]*goja.Program // CommonJS module sources

	prelude *goja.Program
}

// New returns a Pool; its runtimes are created on first use.
func New(cfg Config) *Pool {
	if cfg.MaxVMs <= 0 {
		cfg.MaxVMs = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = 1 << 30
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	p := &Pool{cfg: cfg, log: lg, slots: make(chan *vm, cfg.MaxVMs), progs: map[string]*compiled{}, mods: map[string]*goja.Program{},
		prelude: goja.MustCompile("prelude.js", preludeSrc, false)}
	for range cfg.MaxVMs {
		p.slots <- nil
	}
	return p
}

// Close drops the pool's runtimes. Calls under way finish; later calls
// answer ErrClosed. The pool owns no goroutine between calls, so nothing is
// left running.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.progs = nil
	p.mods = nil
	p.mu.Unlock()
	for {
		select {
		case <-p.slots:
		default:
			return
		}
	}
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// get checks out a runtime, waiting for a free slot.
func (p *Pool) get(ctx context.Context) (*vm, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	select {
	case v := <-p.slots:
		if v == nil {
			var err error
			if v, err = newVM(p); err != nil {
				p.slots <- nil
				return nil, err
			}
		}
		return v, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("couchjs: waiting for a runtime: %w", ctx.Err())
	}
}

// put gives a runtime back; a broken one (interrupted, or its state
// unknown) is dropped and its slot freed for a new one.
func (p *Pool) put(v *vm, broken bool) {
	if broken || p.isClosed() {
		v = nil
	}
	select {
	case p.slots <- v:
	default:
		// Close drained the channel while v was out; its slot is gone.
	}
}

// with runs fn on a checked-out runtime under the watchdog: Timeout,
// ctx and MaxMemory interrupt it. The runtime goes back to the pool unless
// it was interrupted or fn panicked.
func (p *Pool) with(ctx context.Context, fn func(v *vm) error) (err error) {
	v, err := p.get(ctx)
	if err != nil {
		return err
	}
	broken := true
	defer func() { p.put(v, broken) }()

	done := make(chan struct{})
	v.beat = make(chan struct{}, 1)
	var wg sync.WaitGroup
	var why error // set by the watchdog before it interrupts; read after wg.Wait
	wg.Add(1)
	go func() {
		defer wg.Done()
		why = p.watch(ctx, v.rt, done, v.beat)
	}()
	panicked := false
	func() {
		defer func() {
			if r := recover(); r != nil {
				panicked = true
				err = fmt.Errorf("couchjs: panic in a JavaScript call: %v", r)
			}
		}()
		err = fn(v)
	}()
	close(done)
	wg.Wait()
	if why != nil {
		// Whatever fn answered, the call was cut short.
		return why
	}
	if panicked || isUncatchable(err) {
		return err
	}
	broken = false
	return err
}

// memSampleEvery is how often the watchdog samples the heap.
const memSampleEvery = 2 * time.Millisecond

var heapMetric = "/memory/classes/heap/objects:bytes"

func heapBytes(s []metrics.Sample) int64 {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// watch interrupts rt when the call outlives Timeout (from its start or
// its last beat), ctx ends, or the heap
// grows past MaxMemory; it returns the reason, or nil once done closes.
func (p *Pool) watch(ctx context.Context, rt *goja.Runtime, done, beat <-chan struct{}) error {
	timer := time.NewTimer(p.cfg.Timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	var sample []metrics.Sample
	var base int64
	if p.cfg.MaxMemory > 0 {
		sample = []metrics.Sample{{Name: heapMetric}}
		base = heapBytes(sample)
		t := time.NewTicker(memSampleEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-done:
			return nil
		case <-beat:
			timer.Reset(p.cfg.Timeout) // no stale fire after Reset (Go 1.23 timers)
		case <-timer.C:
			e := errTimeout()
			rt.Interrupt(e)
			return e
		case <-ctx.Done():
			e := fmt.Errorf("couchjs: %w", ctx.Err())
			rt.Interrupt(e)
			return e
		case <-tick:
			if heapBytes(sample)-base > p.cfg.MaxMemory {
				e := errMemory(p.cfg.MaxMemory)
				rt.Interrupt(e)
				return e
			}
		}
	}
}

// module compiles a CommonJS module's source into a program evaluating to
// function(module, exports, require), as couchjs wraps it.
func (p *Pool) module(src string) (*goja.Program, error) {
	p.mu.Lock()
	prog := p.mods[src]
	p.mu.Unlock()
	if prog != nil {
		return prog, nil
	}
	prog, err := goja.Compile("", "(function (module, exports, require) { "+src+"\n })", false)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.mods != nil {
		if len(p.mods) >= maxPrograms {
			p.mods = map[string]*goja.Program{}
		}
		p.mods[src] = prog
	}
	p.mu.Unlock()
	return prog, nil
}
