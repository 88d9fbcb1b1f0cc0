package couchjs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// The worker side: a process started by a Pool from the same binary (see
// doc.go), running one call at a time on goja runtimes it keeps per
// sandbox.

// Environment of a worker process.
const (
	envWorker = "SETTEE_COUCHJS_WORKER" // "1": run as a worker
	envConfig = "SETTEE_COUCHJS_CONFIG" // workerConfig, see workerConfig.env
)

// init makes every binary that links couchjs its own worker: a process
// started by a Pool with SETTEE_COUCHJS_WORKER=1 serves calls on its
// stdin and stdout and exits, before main (or a test binary's TestMain)
// runs. Without the variable it does nothing: one getenv.
func init() {
	if os.Getenv(envWorker) != "1" {
		return
	}
	os.Exit(workerMain())
}

// workerConfig is what a Pool tells its workers.
type workerConfig struct {
	timeout   time.Duration // per call (per doc for a batch)
	maxMemory int64         // heap growth per call before it is interrupted (<= 0: none)
	memory    int64         // the process's bound: RLIMIT_AS above the start size, and Go's memory limit
	maxOutput int           // largest answer frame
}

func (c workerConfig) env() string {
	return fmt.Sprintf("%d,%d,%d,%d", int64(c.timeout), c.maxMemory, c.memory, c.maxOutput)
}

func parseWorkerConfig(s string) (workerConfig, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return workerConfig{}, fmt.Errorf("couchjs: worker config %q", s)
	}
	var n [4]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return workerConfig{}, fmt.Errorf("couchjs: worker config %q: %w", s, err)
		}
		n[i] = v
	}
	return workerConfig{timeout: time.Duration(n[0]), maxMemory: n[1], memory: n[2], maxOutput: int(n[3])}, nil
}

type frame struct {
	typ  byte
	body []byte
}

// workerMain is a worker's life: limit itself, say hello, serve calls
// until its stdin closes (the Pool closed it, or the parent died).
func workerMain() int {
	cfg, err := parseWorkerConfig(os.Getenv(envConfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.memory > 0 {
		if err := limitAddressSpace(cfg.memory); err != nil {
			fmt.Fprintln(os.Stderr, "couchjs worker:", err)
			return 2
		}
		// the collector works harder before the hard bound is near
		debug.SetMemoryLimit(cfg.memory * 3 / 4)
	}
	e := newEngine(cfg, os.Stdout)
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	frames := make(chan frame, 1)
	// The reader: calls and rows go to the main loop; an interrupt
	// reaches the call under way at once. EOF ends the process: the
	// parent closed the pipe or is gone.
	go func() {
		for {
			typ, body, err := readFrame(in, maxRequestFrame)
			if err != nil {
				os.Exit(0)
			}
			if typ == fInterrupt {
				d := dec{b: body}
				e.interrupt(d.u())
				continue
			}
			frames <- frame{typ, body}
		}
	}()
	hello := newEnc(nil, fHello)
	hello.u(protoVersion)
	if _, err := os.Stdout.Write(hello.frame()); err != nil {
		return 0
	}
	e.frames = frames
	for f := range frames {
		if f.typ != fCall {
			continue // a row for a list that ended
		}
		req, err := decodeRequest(f.body)
		var res *result
		if err != nil {
			res = &result{status: rFail, reason: err.Error()}
		} else {
			res = e.serve(req)
		}
		if !e.send(res.encode(e.buf[:0])) {
			return 0
		}
	}
	return 0
}

// engine is a worker's state: its runtimes (one per sandbox: calls run
// one at a time, so one is enough), compiled sources and modules.
type engine struct {
	cfg    workerConfig
	out    *os.File
	frames <-chan frame
	buf    []byte // answer frames
	lbuf   []byte // log, beat and chunk frames

	progs map[string]*compiled
	mods  map[string]*goja.Program
	rts   map[string]*vm

	prelude, lockdown *goja.Program

	// the call under way, and an interrupt that came before it started
	mu       sync.Mutex
	cur      uint64
	cutSeq   uint64
	intr     chan struct{}
	lastBeat time.Time
	broken   bool // a write to the parent failed
	memStop  bool // the last call was stopped by maxMemory (set by watch)
}

func newEngine(cfg workerConfig, out *os.File) *engine {
	return &engine{cfg: cfg, out: out, progs: map[string]*compiled{}, mods: map[string]*goja.Program{}, rts: map[string]*vm{},
		prelude:  goja.MustCompile("prelude.js", preludeSrc, false),
		lockdown: goja.MustCompile("lockdown.js", lockdownSrc, false)}
}

// send writes one frame to the parent.
func (e *engine) send(b []byte) bool {
	if e.broken {
		return false
	}
	if _, err := e.out.Write(b); err != nil {
		e.broken = true
		return false
	}
	return true
}

// maxLogLine bounds one log() line sent to the parent.
const maxLogLine = 16 << 10

func (e *engine) log(s string) {
	if len(s) > maxLogLine {
		s = s[:maxLogLine] + "…"
	}
	f := newEnc(e.lbuf, fLog)
	f.str(s)
	e.send(f.frame())
	e.lbuf = f.b[:0]
}

// beat tells the parent a batch moves on, at most every quarter timeout.
func (e *engine) beat() {
	if now := time.Now(); now.Sub(e.lastBeat) > e.cfg.timeout/4 {
		e.lastBeat = now
		f := newEnc(e.lbuf, fBeat)
		e.send(f.frame())
		e.lbuf = f.b[:0]
	}
}

// interrupt stops call seq, now or when it starts.
func (e *engine) interrupt(seq uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq == e.cur && e.intr != nil {
		select {
		case e.intr <- struct{}{}:
		default:
		}
		return
	}
	if seq > e.cur {
		e.cutSeq = seq
	}
}

func (e *engine) begin(seq uint64) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur = seq
	e.intr = make(chan struct{}, 1)
	if e.cutSeq == seq {
		e.intr <- struct{}{}
	}
	e.lastBeat = time.Now()
	return e.intr
}

func (e *engine) end() {
	e.mu.Lock()
	e.intr = nil
	e.mu.Unlock()
}

// module compiles a CommonJS module's source into a program evaluating to
// function(module, exports, require), as couchjs wraps it.
func (e *engine) module(src string) (*goja.Program, error) {
	if prog := e.mods[src]; prog != nil {
		return prog, nil
	}
	prog, err := goja.Compile("", "(function (module, exports, require) { "+src+"\n })", false)
	if err != nil {
		return nil, err
	}
	if len(e.mods) >= maxPrograms {
		clear(e.mods)
	}
	e.mods[src] = prog
	return prog, nil
}

// errNeedDDoc: a bound sandbox's runtime was made without its doc; the
// parent sends it.
var errNeedDDoc = errors.New("couchjs: sandbox without its design doc")

// errCut is the answer of a call its caller interrupted.
var errCut = errors.New("couchjs: call interrupted by its caller")

// serve runs one call on the runtime of its sandbox under the watchdog:
// Timeout, an interrupt and MaxMemory stop it. The runtime is kept
// unless the call was stopped, panicked, or its sandbox is a one-off.
func (e *engine) serve(req *request) (res *result) {
	for _, k := range req.evict {
		delete(e.rts, k)
	}
	res = &result{}
	var v *vm
	if !req.once {
		v = e.rts[req.key]
	}
	if v == nil {
		var err error
		if v, err = newVM(e, req.key); err != nil {
			return failed(res, err)
		}
		if !req.once {
			e.rts[req.key] = v
		}
	}
	intr := e.begin(req.seq)
	defer e.end()
	broken := true
	defer func() {
		if broken || req.once {
			delete(e.rts, req.key)
			res.dropped = true
		}
	}()

	done := make(chan struct{})
	e.memStop = false
	v.beat = make(chan struct{}, 1)
	var wg sync.WaitGroup
	var why error // set by the watchdog before it interrupts; read after wg.Wait
	wg.Add(1)
	go func() {
		defer wg.Done()
		why = e.watch(v.rt, done, v.beat, intr)
	}()
	var err error
	panicked := false
	func() {
		defer func() {
			if r := recover(); r != nil {
				panicked = true
				err = fmt.Errorf("couchjs: panic in a JavaScript call: %v", r)
			}
		}()
		err = e.exec(v, req, res)
	}()
	close(done)
	wg.Wait()
	if why != nil {
		// Whatever the call answered, it was cut short.
		res.out = nil
		if errors.Is(why, errCut) {
			res.status = rCut
			return res
		}
		if e.memStop {
			// the runtime is dropped: give its heap back before the
			// next call measures its own growth from here
			v = nil
			delete(e.rts, req.key)
			debug.FreeOSMemory()
		}
		return failed(res, why)
	}
	if errors.Is(err, errNeedDDoc) {
		res.status = rMissing
		broken = false
		return res
	}
	if !panicked && !isUncatchable(err) {
		broken = false
	}
	if err != nil {
		res.out = nil
		return failed(res, err)
	}
	if n := outputSize(res.out); e.cfg.maxOutput > 0 && n > e.cfg.maxOutput {
		res.out = nil
		return failed(res, &Error{Code: "os_process_error", Reason: fmt.Sprintf("the function's answer of %d bytes exceeds the bound of %d", n, e.cfg.maxOutput)})
	}
	return res
}

func outputSize(out [][]byte) int {
	n := 0
	for _, b := range out {
		n += len(b) + 10
	}
	return n
}

func failed(res *result, err error) *result {
	var je *Error
	if errors.As(err, &je) {
		res.status, res.code, res.reason = rError, je.Code, je.Reason
	} else {
		res.status, res.reason = rFail, err.Error()
	}
	return res
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

// watch interrupts rt when the call outlives the timeout (from its start
// or its last beat), the parent interrupts it, or the heap grows past
// maxMemory; it returns the reason, or nil once done closes.
func (e *engine) watch(rt *goja.Runtime, done, beat, intr <-chan struct{}) error {
	timer := time.NewTimer(e.cfg.timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	var sample []metrics.Sample
	var base int64
	if e.cfg.maxMemory > 0 {
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
			timer.Reset(e.cfg.timeout) // no stale fire after Reset (Go 1.23 timers)
		case <-timer.C:
			err := errTimeout()
			rt.Interrupt(err)
			return err
		case <-intr:
			rt.Interrupt(errCut)
			return errCut
		case <-tick:
			if heapBytes(sample)-base > e.cfg.maxMemory {
				e.memStop = true
				err := errMemory(e.cfg.maxMemory)
				rt.Interrupt(err)
				return err
			}
		}
	}
}
