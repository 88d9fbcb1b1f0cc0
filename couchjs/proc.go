package couchjs

import (
	"bufio"
	"container/list"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The parent side of a worker process.

// why the parent killed a worker
const (
	killNone int32 = iota
	killDeadline
	killMemory
	killProtocol
)

// errStale: the worker was gone before it read the call.
var errStale = errors.New("couchjs: worker gone before the call")

// worker is one worker process. Between acquire and release one call
// owns it (seq, buf, keys, evicted); the monitor reads deadline and pid,
// an interrupting goroutine writes under wmu.
type worker struct {
	p    *Pool
	cmd  *exec.Cmd
	pid  int
	in   *os.File // its stdin
	intr *os.File // its fd 3: interrupts
	rd   *os.File // its stdout
	out  *bufio.Reader
	shm  []byte // the shared region the worker reads a view batch from

	seq uint64 // the last call's
	buf []byte // the request frame

	// wmu orders writes to in, and the call's state between its owner
	// and an interrupting goroutine
	wmu sync.Mutex
	cur uint64 // the call under way (0: none)
	cut bool   // it was interrupted: its deadline no longer moves

	// the sandboxes it holds a runtime of, least recently used first; the
	// worker drops what the parent evicts (sent with the next call)
	keys    map[string]*list.Element
	lru     list.List
	evicted []string

	deadline atomic.Int64 // unix nanos; 0: no call under way (read by the monitor)
	killed   atomic.Int32 // why the parent killed it
	dead     atomic.Bool

	reapOnce sync.Once
	status   int // exit status, CouchDB's way (128+signal when killed)
	stderr   *tail
}

// executable is the binary workers run: this one (see doc.go).
func (p *Pool) executable() (string, error) {
	p.exeOnce.Do(func() {
		p.exe, p.exeErr = os.Executable()
		if p.exeErr != nil {
			p.exeErr = fmt.Errorf("couchjs: the worker binary: %w", p.exeErr)
		}
	})
	return p.exe, p.exeErr
}

// startWorker starts a worker process and waits for its hello. The
// caller holds a p.workers count for it, which reaping releases; when
// the start fails, startWorker releases it.
func (p *Pool) startWorker() (*worker, error) {
	w, err := p.start()
	if err != nil && w == nil {
		p.workers.Done() // no process to reap
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// start is startWorker; a failure after the process started answers the
// reaped worker too.
func (p *Pool) start() (*worker, error) {
	exe, err := p.executable()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("couchjs: worker pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("couchjs: worker pipe: %w", err)
	}
	intrR, intrW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("couchjs: worker pipe: %w", err)
	}
	extra := []*os.File{intrR}
	wcfg := p.wcfg
	shmFile, shm, err := newSharedMemory(sharedBytes)
	if err == nil {
		extra = append(extra, shmFile)
		wc := p.wc
		wc.shm = sharedBytes
		wcfg = wc.env()
	}
	cmd := &exec.Cmd{
		Path: exe,
		Args: []string{"settee-couchjs-worker"},
		// GOTRACEBACK=none: a worker that dies of a fatal error (out of
		// memory) prints the error, not every goroutine's stack
		Env:        append(os.Environ(), envWorker+"=1", envConfig+"="+wcfg, "GOTRACEBACK=none"),
		Stdin:      inR,
		Stdout:     outW,
		Stderr:     &tail{max: 4 << 10},
		ExtraFiles: extra,
	}
	start := time.Now()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	intrR.Close()
	if shmFile != nil {
		shmFile.Close() // the mapping stays
	}
	if err != nil {
		if shm != nil {
			unmapSharedMemory(shm)
		}
		inW.Close()
		outR.Close()
		intrW.Close()
		return nil, fmt.Errorf("couchjs: starting a worker: %w", err)
	}
	growPipe(inW)
	w := &worker{p: p, cmd: cmd, pid: cmd.Process.Pid, in: inW, intr: intrW, rd: outR, shm: shm, out: bufio.NewReaderSize(outR, 64<<10),
		keys: map[string]*list.Element{}, stderr: cmd.Stderr.(*tail)}
	p.mu.Lock()
	p.live[w] = struct{}{}
	p.mu.Unlock()
	p.started.Add(1)
	p.monOnce.Do(func() {
		p.monDone.Add(1)
		go p.monitor()
	})
	w.deadline.Store(time.Now().Add(startTimeout).UnixNano())
	typ, body, err := readFrame(w.out, 64)
	w.deadline.Store(0)
	if err == nil && typ == fHello {
		d := dec{b: body}
		if v := d.u(); d.err != nil || v != protoVersion {
			err = fmt.Errorf("couchjs: worker protocol %d, want %d", v, protoVersion)
		}
	} else if err == nil {
		err = fmt.Errorf("couchjs: worker said %d before hello", typ)
	}
	if err != nil {
		w.kill(killProtocol)
		w.reap()
		return w, fmt.Errorf("couchjs: starting a worker: %w (exit status %d: %s)", err, w.status, w.stderr.String())
	}
	p.log.Debug("couchjs: worker started", "pid", w.pid, "took", time.Since(start))
	return w, nil
}

// begin marks call seq under way, with its deadline.
func (w *worker) begin(seq uint64) {
	w.wmu.Lock()
	w.cur = seq
	w.wmu.Unlock()
	w.arm(w.p.cfg.Timeout + killGrace)
}

// arm sets the call's deadline d from now (never later once the call
// was interrupted).
func (w *worker) arm(d time.Duration) {
	at := time.Now().Add(d).UnixNano()
	w.wmu.Lock()
	if !w.cut {
		w.deadline.Store(at)
	}
	w.wmu.Unlock()
}

// disarm marks no call under way.
func (w *worker) disarm() {
	w.wmu.Lock()
	w.cur = 0
	w.cut = false
	w.deadline.Store(0)
	w.wmu.Unlock()
}

func (w *worker) write(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.in.Write(b)
	return err
}

// interrupt asks the worker to stop call seq, if it is still under way,
// and has it killed if it does not answer within killGrace.
func (w *worker) interrupt(seq uint64) {
	e := newEnc(nil, fInterrupt)
	e.u(seq)
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.cur != seq {
		return
	}
	_, _ = w.intr.Write(e.frame())
	w.cut = true
	if at := time.Now().Add(killGrace).UnixNano(); w.deadline.Load() > at {
		w.deadline.Store(at)
	}
}

// reply answers a list's row request.
func (w *worker) reply(status byte, row []byte) error {
	e := newEnc(nil, fRow)
	e.b = append(e.b, status)
	e.bytes(row)
	return w.write(e.frame())
}

// call sends req and reads frames until its result. A worker that dies,
// is killed or breaks the protocol answers an error and is dead after.
func (w *worker) call(ctx context.Context, req *request, onFrame func(*worker, byte, []byte) error) (*result, error) {
	w.seq++
	req.seq = w.seq
	w.p.calls.Add(1)
	w.buf = req.encode(w.buf, w.shm)
	w.begin(req.seq)
	defer w.disarm()
	seq := req.seq
	stop := context.AfterFunc(ctx, func() { w.interrupt(seq) })
	defer stop()
	err := w.write(w.buf)
	if cap(w.buf) > 4<<20 {
		w.buf = nil // keep no huge batch between calls
	}
	if err != nil {
		return nil, w.died(errStale)
	}
	for {
		typ, body, err := readFrame(w.out, w.p.cfg.MaxOutput+64<<10)
		if err != nil {
			var fe *frameSizeError
			if errors.As(err, &fe) {
				w.kill(killProtocol)
				w.died(err)
				return nil, &Error{Code: "os_process_error", Reason: fmt.Sprintf("the function's answer exceeds the bound of %d bytes", w.p.cfg.MaxOutput)}
			}
			return nil, w.died(err)
		}
		w.arm(w.p.cfg.Timeout + killGrace)
		switch typ {
		case fResult:
			res, err := decodeResult(body)
			if err != nil {
				w.kill(killProtocol)
				return nil, w.died(err)
			}
			return res, nil
		case fLog:
			d := dec{b: body}
			w.p.log.Info("couchjs log", "message", d.str())
		case fBeat:
		case fGetRow, fChunks:
			if onFrame == nil {
				w.kill(killProtocol)
				return nil, w.died(errBadAnswer)
			}
			if err := onFrame(w, typ, body); err != nil {
				w.kill(killProtocol)
				w.died(err)
				return nil, err
			}
		default:
			w.kill(killProtocol)
			return nil, w.died(fmt.Errorf("couchjs: unknown frame %d", typ))
		}
	}
}

// died reaps a worker whose pipe broke and answers the call's error: the
// parent's reason for killing it, else CouchDB's for a couchjs that
// exited.
func (w *worker) died(cause error) error {
	w.kill(killNone)
	w.reap()
	switch w.killed.Load() {
	case killDeadline:
		return errTimeout()
	case killMemory:
		return errExit(w.status)
	}
	if errors.Is(cause, errStale) {
		return errStale
	}
	return errExit(w.status)
}

// kill ends the process (SIGKILL); why is kept if it is the first
// reason.
func (w *worker) kill(why int32) {
	w.dead.Store(true)
	if why != killNone {
		w.killed.CompareAndSwap(killNone, why)
	}
	_ = w.cmd.Process.Kill()
}

func (w *worker) isDead() bool { return w.dead.Load() }

// reap waits for the process and logs how it ended when that was not the
// Pool's doing.
func (w *worker) reap() {
	w.reapOnce.Do(func() {
		w.dead.Store(true)
		w.wmu.Lock()
		_ = w.in.Close()
		_ = w.intr.Close()
		w.wmu.Unlock()
		err := w.cmd.Wait()
		_ = w.rd.Close()
		if w.shm != nil {
			unmapSharedMemory(w.shm)
			w.shm = nil
		}
		w.status = exitStatus(w.cmd.ProcessState, err)
		p := w.p
		p.mu.Lock()
		delete(p.live, w)
		p.mu.Unlock()
		p.died.Add(1)
		switch why := w.killed.Load(); {
		case why == killMemory:
			p.log.Warn("couchjs: worker killed: its resident memory passed the bound", "pid", w.pid, "bound", p.cfg.WorkerMemory)
		case why == killDeadline:
			p.log.Warn("couchjs: worker killed: no answer within the timeout", "pid", w.pid, "timeout", p.cfg.Timeout)
		case w.status != 0 && w.status != 137:
			p.log.Warn("couchjs: worker died", "pid", w.pid, "exit_status", w.status, "stderr", w.stderr.String())
		}
		p.workers.Done()
	})
}

// stop ends an idle worker: its stdin closes and it exits.
func (w *worker) stop() {
	w.wmu.Lock()
	_ = w.in.Close()
	_ = w.intr.Close()
	w.wmu.Unlock()
	t := time.AfterFunc(killGrace, func() { w.kill(killNone) })
	w.reap()
	t.Stop()
}

func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// holds reports whether the worker keeps a runtime of sandbox key.
func (w *worker) holds(key string) bool {
	_, ok := w.keys[key]
	return ok
}

// touch records that the worker keeps key's runtime; past MaxIdle the
// least recently used is evicted (the worker drops it with the next
// call).
func (w *worker) touch(key string) {
	if e, ok := w.keys[key]; ok {
		w.lru.MoveToBack(e)
		return
	}
	w.keys[key] = w.lru.PushBack(key)
	for w.lru.Len() > w.p.cfg.MaxIdle {
		old := w.lru.Remove(w.lru.Front()).(string)
		delete(w.keys, old)
		w.evicted = append(w.evicted, old)
	}
}

func (w *worker) forget(key string) {
	if e, ok := w.keys[key]; ok {
		w.lru.Remove(e)
		delete(w.keys, key)
	}
}

func (w *worker) takeEvicted() []string {
	ev := w.evicted
	w.evicted = nil
	return ev
}

// monitor kills busy workers past their deadline or their memory bound,
// until the pool is closed.
func (p *Pool) monitor() {
	defer p.monDone.Done()
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	var busy []*worker
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		busy = busy[:0]
		p.mu.Lock()
		for w := range p.live {
			if w.deadline.Load() != 0 {
				busy = append(busy, w)
			}
		}
		p.mu.Unlock()
		now := time.Now().UnixNano()
		for _, w := range busy {
			if d := w.deadline.Load(); d != 0 && now > d {
				w.kill(killDeadline)
				continue
			}
			if p.cfg.WorkerMemory > 0 {
				if rss, ok := residentBytes(w.pid); ok && rss > p.cfg.WorkerMemory*raceMemoryFactor {
					w.kill(killMemory)
				}
			}
		}
	}
}

// tail keeps the first max bytes written to it (a dying worker's last
// words).
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
