package couchjs

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// Config sizes a Pool. The zero value is usable.
type Config struct {
	// MaxVMs bounds the calls running at once, each on a runtime of its
	// own (default 2*GOMAXPROCS).
	MaxVMs int
	// MaxIdle bounds the runtimes kept between calls, over all sandboxes
	// (default 64); past it the least recently used is dropped. A
	// runtime belongs to one sandbox for life, so a sandbox whose
	// runtimes were all dropped pays for a new one (its prelude, about
	// 0.3 ms) on its next call.
	MaxIdle int
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

// Pool is a bounded set of goja runtimes, each bound to one sandbox (see
// DDoc), and a cache of compiled sources. All methods are safe for
// concurrent use.
type Pool struct {
	cfg Config
	log *slog.Logger
	// running holds one token per call under way: MaxVMs bounds
	// concurrency, and so the runtimes checked out.
	running chan struct{}
	seq     atomic.Uint64 // names the sandboxes of Pool.NewMapSet

	mu     sync.Mutex
	closed bool
	idle   map[string][]*vm         // idle runtimes by sandbox key
	lru    list.List                // the same runtimes, least recently used first
	progs  map[string]*compiled     // by source, see compile.go
	mods   map[string]*goja.Program // CommonJS module sources

	prelude, lockdown *goja.Program
}

// New returns a Pool; its runtimes are created on first use.
func New(cfg Config) *Pool {
	if cfg.MaxVMs <= 0 {
		cfg.MaxVMs = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = 64
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
	return &Pool{cfg: cfg, log: lg, running: make(chan struct{}, cfg.MaxVMs), idle: map[string][]*vm{},
		progs: map[string]*compiled{}, mods: map[string]*goja.Program{},
		prelude:  goja.MustCompile("prelude.js", preludeSrc, false),
		lockdown: goja.MustCompile("lockdown.js", lockdownSrc, false)}
}

// Close drops the pool's idle runtimes. Calls under way finish (their
// runtimes are dropped after); later calls answer ErrClosed. The pool
// owns no goroutine between calls, so nothing is left running.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.progs = nil
	p.mods = nil
	p.idle = map[string][]*vm{}
	p.lru.Init()
	p.mu.Unlock()
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// get checks out a runtime of sandbox sb, waiting for a free slot: an
// idle one of the same sandbox, or a new one. A runtime never changes
// sandbox: what one design doc's code left in its built-ins and globals
// is not seen by another's.
func (p *Pool) get(ctx context.Context, sb *DDoc) (*vm, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	select {
	case p.running <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("couchjs: waiting for a runtime: %w", ctx.Err())
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.running
		return nil, ErrClosed
	}
	if !sb.once {
		if vs := p.idle[sb.key]; len(vs) > 0 {
			v := vs[len(vs)-1]
			p.unidle(v)
			p.mu.Unlock()
			return v, nil
		}
	}
	p.mu.Unlock()
	v, err := newVM(p, sb.key)
	if err != nil {
		<-p.running
		return nil, err
	}
	return v, nil
}

// unidle takes v out of the idle runtimes; p.mu is held.
func (p *Pool) unidle(v *vm) {
	vs := p.idle[v.key]
	for i, w := range vs {
		if w == v {
			vs = append(vs[:i], vs[i+1:]...)
			break
		}
	}
	if len(vs) == 0 {
		delete(p.idle, v.key)
	} else {
		p.idle[v.key] = vs
	}
	p.lru.Remove(v.elem)
	v.elem = nil
}

// put gives a runtime back. A broken one (interrupted, or its state
// unknown) or one of a one-off sandbox is dropped; past MaxIdle the least
// recently used idle runtime is.
func (p *Pool) put(v *vm, drop bool) {
	p.mu.Lock()
	if !drop && !p.closed {
		p.idle[v.key] = append(p.idle[v.key], v)
		v.elem = p.lru.PushBack(v)
		for p.lru.Len() > p.cfg.MaxIdle {
			p.unidle(p.lru.Front().Value.(*vm))
		}
	}
	p.mu.Unlock()
	<-p.running
}

// with runs fn on a checked-out runtime of sandbox sb under the
// watchdog: Timeout, ctx and MaxMemory interrupt it. The runtime goes
// back to the pool unless it was interrupted, fn panicked, or sb is a
// one-off.
func (p *Pool) with(ctx context.Context, sb *DDoc, fn func(v *vm) error) (err error) {
	v, err := p.get(ctx, sb)
	if err != nil {
		return err
	}
	broken := true
	defer func() { p.put(v, broken || sb.once) }()

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
