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
	shm       int           // size of the shared region (fd 4), 0: none
}

func (c workerConfig) env() string {
	return fmt.Sprintf("%d,%d,%d,%d,%d", int64(c.timeout), c.maxMemory, c.memory, c.maxOutput, c.shm)
}

func parseWorkerConfig(s string) (workerConfig, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 5 {
		return workerConfig{}, fmt.Errorf("couchjs: worker config %q", s)
	}
	var n [5]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return workerConfig{}, fmt.Errorf("couchjs: worker config %q: %w", s, err)
		}
		n[i] = v
	}
	return workerConfig{timeout: time.Duration(n[0]), maxMemory: n[1], memory: n[2], maxOutput: int(n[3]), shm: int(n[4])}, nil
}

// workerMain is a worker's life: limit itself, say hello, serve calls
// until its stdin closes (the Pool closed it, or the parent died).
//
// The main goroutine reads stdin and runs the calls: a call's frames
// (and a list's rows) are read where they are used, with no handoff
// between goroutines on the way (each costs a thread wake-up, tens of
// microseconds on a busy virtual machine). Interrupts come on a pipe of
// their own (fd 3), read by a goroutine that sleeps until one comes.
func workerMain() int {
	cfg, err := parseWorkerConfig(os.Getenv(envConfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var shm []byte
	if cfg.shm > 0 {
		if shm, err = mapSharedMemory(4, cfg.shm); err != nil {
			fmt.Fprintln(os.Stderr, "couchjs worker:", err)
			return 2
		}
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
	e.in = bufio.NewReaderSize(os.Stdin, 64<<10)
	intr := bufio.NewReader(os.NewFile(3, "couchjs-interrupts"))
	go func() {
		for {
			typ, body, err := readFrame(intr, 64)
			if err != nil {
				// the parent is gone, or closed the pool
				os.Exit(0)
			}
			if typ == fInterrupt {
				d := dec{b: body}
				e.interrupt(d.u())
			}
		}
	}()
	hello := newEnc(nil, fHello)
	hello.u(protoVersion)
	if !e.send(hello.frame()) {
		return 0
	}
	for {
		typ, body, err := readFrame(e.in, maxRequestFrame)
		if err != nil {
			return 0
		}
		if typ != fCall {
			continue // a row for a list that ended
		}
		req, err := decodeRequest(body, shm)
		var res *result
		if err != nil {
			res = &result{status: rFail, reason: err.Error()}
		} else {
			res = e.serve(req)
		}
		e.buf = res.encode(e.buf)
		if !e.send(e.buf) {
			return 0
		}
		if cap(e.buf) > 4<<20 {
			e.buf = nil
		}
	}
}

// engine is a worker's state: its runtimes (one per sandbox: calls run
// one at a time, so one is enough), compiled sources and modules.
type engine struct {
	cfg  workerConfig
	out  *os.File
	in   *bufio.Reader // stdin: calls, and a list's rows
	buf  []byte        // answer frames
	lbuf []byte        // log, beat and chunk frames

	progs map[string]*compiled
	mods  map[string]*goja.Program
	rts   map[string]*vm

	prelude, lockdown *goja.Program

	lastBeat time.Time
	broken   bool // a write to the parent failed

	// mu guards the call under way between the main goroutine, its
	// timers and the interrupt reader.
	mu      sync.Mutex
	cur     uint64 // the call under way (0: none)
	cutSeq  uint64 // an interrupt that came before its call started
	rt      *goja.Runtime
	why     error // why the call was stopped: timeout, memory, interrupt
	memStop bool  // why is the memory bound
	timer   *time.Timer
	memT    *time.Timer
	sample  []metrics.Sample
	memBase int64
}

func newEngine(cfg workerConfig, out *os.File) *engine {
	return &engine{cfg: cfg, out: out, progs: map[string]*compiled{}, mods: map[string]*goja.Program{}, rts: map[string]*vm{},
		prelude:  goja.MustCompile("prelude.js", preludeSrc, false),
		lockdown: goja.MustCompile("lockdown.js", lockdownSrc, false),
		sample:   []metrics.Sample{{Name: heapMetric}}}
}

// send writes one frame to the parent.
func (e *engine) send(b []byte) bool {
	if e.broken || e.out == nil {
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

// beat restarts the call's timeout (a batch's next doc: Timeout bounds
// each doc, as CouchDB's os_process_timeout bounds each map_doc
// command) and tells the parent, at most every quarter timeout.
func (e *engine) beat() {
	e.mu.Lock()
	if e.timer != nil && e.why == nil {
		e.timer.Reset(e.cfg.timeout)
	}
	e.mu.Unlock()
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
	if seq == e.cur {
		e.stopLocked(errCut)
	} else if seq > e.cur {
		e.cutSeq = seq
	}
}

// stopLocked interrupts the call under way for why (the first reason
// wins); e.mu is held.
func (e *engine) stopLocked(why error) {
	if e.cur == 0 || e.why != nil {
		return
	}
	e.why = why
	e.rt.Interrupt(why)
}

// begin starts the watch over call seq on rt: its timeout, and the heap
// sampled every memSampleEvery while it runs. Timers, not a goroutine:
// a call that ends within 2 ms wakes nothing.
func (e *engine) begin(seq uint64, rt *goja.Runtime) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur, e.rt, e.why, e.memStop = seq, rt, nil, false
	e.lastBeat = time.Now()
	if e.cutSeq == seq {
		e.stopLocked(errCut)
	}
	e.timer = time.AfterFunc(e.cfg.timeout, func() {
		e.mu.Lock()
		if e.cur == seq {
			e.stopLocked(errTimeout())
		}
		e.mu.Unlock()
	})
	if e.cfg.maxMemory > 0 {
		e.memBase = heapBytes(e.sample)
		check := func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.cur != seq || e.why != nil {
				return
			}
			if heapBytes(e.sample)-e.memBase > e.cfg.maxMemory {
				e.memStop = true
				e.stopLocked(errMemory(e.cfg.maxMemory))
				return
			}
			e.memT.Reset(memSampleEvery)
		}
		e.memT = time.AfterFunc(memSampleEvery, check)
	}
}

// end ends the watch and answers why the call was stopped (nil: it was
// not).
func (e *engine) end() (why error, memStop bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timer.Stop()
	if e.memT != nil {
		e.memT.Stop()
	}
	why, memStop = e.why, e.memStop
	e.cur, e.rt, e.why, e.timer, e.memT = 0, nil, nil, nil, nil
	return why, memStop
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

// serve runs one call on the runtime of its sandbox under the watch:
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
	broken := true
	defer func() {
		if broken || req.once {
			delete(e.rts, req.key)
			res.dropped = true
		}
	}()

	e.begin(req.seq, v.rt)
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
	why, memStop := e.end()
	if why != nil {
		// Whatever the call answered, it was cut short.
		res.out = nil
		if errors.Is(why, errCut) {
			res.status = rCut
			return res
		}
		if memStop {
			// the runtime is dropped: give its heap back before the
			// next call measures its own growth from there
			delete(e.rts, req.key)
			v = nil
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
		return failed(res, errOutput(n, e.cfg.maxOutput))
	}
	return res
}

// errOutput is the answer of a call whose answer of n bytes passed the
// bound max (MaxOutput).
func errOutput(n, max int) *Error {
	return &Error{Code: "os_process_error", Reason: fmt.Sprintf("the function's answer of %d bytes exceeds the bound of %d", n, max)}
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
