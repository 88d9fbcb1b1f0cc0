package couchjs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// selfResident is the test process's resident memory (/proc/self/statm).
func selfResident(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := bytes.Fields(b)
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// bombs are built-ins that make one allocation of a size the script
// chooses (or grow one without end): in process each took the whole node
// down with "fatal error: runtime: out of memory".
var bombs = []struct{ name, expr string }{
	{"repeat", `"x".repeat(Math.pow(2, 40)).length`},
	{"padStart", `"x".padStart(Math.pow(2, 40)).length`},
	{"padEnd", `"x".padEnd(Math.pow(2, 40), "ab").length`},
	{"join", `new Array(Math.pow(2, 27)).join("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx").length`},
	{"Array fill", `new Array(Math.pow(2, 31)).fill(1).length`},
	{"Array.from", `Array.from({length: Math.pow(2, 31)}).length`},
	{"ArrayBuffer", `new ArrayBuffer(Math.pow(2, 40)).byteLength`},
	{"typed array", `new Float64Array(Math.pow(2, 37)).length`},
	{"string doubling", `(function () { var s = "x"; while (true) s = s + s; })()`},
	{"JSON.stringify", `(function () { var s = "x".repeat(1 << 22), a = []; for (var i = 0; i < 4096; i++) a.push(s); return JSON.stringify(a).length; })()`},
}

// TestAllocationBombs: each bomb, in a show, a map, a reduce, one group
// of a batch of reduces and a validate_doc_update, answers an error (the
// function's own RangeError where SpiderMonkey has one, else
// os_process_error from a worker that hit its memory bound); the test
// process's memory stays small; calls of other sandboxes, and later
// ones, are served by the replacement workers.
func TestAllocationBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	p := newPool(t, Config{MaxWorkers: 2, Timeout: 3 * time.Second, WorkerMemory: 256 << 20})
	ctx := context.Background()
	other := p.DDoc("other", []byte(`{"_id":"_design/ok","_rev":"1-a"}`))
	kinds := map[string]func(expr string) (string, error){
		"show": func(expr string) (string, error) {
			r, err := p.DDoc("evil", []byte(`{"_id":"_design/evil","_rev":"1-a"}`)).Show(ctx, "function(doc, req) { return String("+expr+"); }", nil, []byte(`{}`))
			if err != nil {
				return "", err
			}
			return string(r.Body), nil
		},
		"map": func(expr string) (string, error) {
			m, err := p.Sandbox("evil", "views", "sig").NewMapSet([]string{"function(doc) { emit(doc._id, " + expr + "); }"}, nil)
			if err != nil {
				return "", err
			}
			out, err := m.MapDoc(ctx, []byte(`{"_id":"d"}`))
			if err != nil {
				return "", err
			}
			if out[0] == nil {
				return "", errors.New("the doc was skipped: the function threw")
			}
			return emitsString(out), nil
		},
		"reduce": func(expr string) (string, error) {
			r, err := p.Sandbox("evil", "views", "sig").Reduce(ctx, "function(k, v) { return "+expr+"; }", nil, [][]byte{[]byte("1")}, true)
			if err != nil {
				return "", err
			}
			if string(r) == "null" {
				return "", errors.New("null: the function threw")
			}
			return string(r), nil
		},
		// a bomb in one group of a batch beside groups that reduce
		"reduce batch": func(expr string) (string, error) {
			one := ReduceGroup{Keys: [][]byte{[]byte(`[1,"a"]`)}, Values: [][]byte{[]byte("1")}}
			bomb := ReduceGroup{Keys: [][]byte{[]byte(`[2,"b"]`)}, Values: [][]byte{[]byte("2")}}
			out, err := p.Sandbox("evil", "views", "sig").ReduceBatch(ctx, "function(k, v) { return v[0] == 2 ? "+expr+" : v[0]; }", []ReduceGroup{one, one, bomb, one}, false)
			if err != nil {
				return "", err
			}
			if string(out[2]) == "null" {
				return "", errors.New("null: the function threw")
			}
			return fmt.Sprintf("%q", out), nil
		},
		"validate": func(expr string) (string, error) {
			err := p.DDoc("evil", []byte(`{"_id":"_design/evil","_rev":"1-a"}`)).ValidateDocUpdate(ctx, "function(newDoc) { var x = "+expr+"; }", []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
			return "", err
		},
	}
	maxRSS := int64(0)
	for _, b := range bombs {
		for kind, run := range kinds {
			t.Run(b.name+"/"+kind, func(t *testing.T) {
				start := time.Now()
				got, err := run(b.expr)
				if err == nil {
					t.Fatalf("answered %q", got)
				}
				var e *Error
				if errors.As(err, &e) && e.Code == "os_process_error" || strings.Contains(err.Error(), "RangeError") || strings.Contains(err.Error(), "threw") {
					t.Logf("%v in %v", err, time.Since(start).Round(time.Millisecond))
				} else {
					t.Errorf("unexpected error %v", err)
				}
				// another database's call is served meanwhile
				r, err := other.Show(ctx, `function(doc, req) { return "fine"; }`, nil, []byte(`{}`))
				if err != nil || string(r.Body) != "fine" {
					t.Fatalf("other sandbox: %v %v", r, err)
				}
				rss := selfResident(t)
				maxRSS = max(maxRSS, rss)
				if rss > 300<<20 {
					t.Fatalf("test process resident memory %d MB", rss>>20)
				}
			})
		}
	}
	t.Logf("test process peak resident memory seen: %d MB; workers started %d, died %d", maxRSS>>20, p.started.Load(), p.died.Load())
	if p.died.Load() == 0 {
		t.Error("no worker died: the bombs did not reach the process bound")
	}
	// the SpiderMonkey mirror: couchjs's own RangeError, as a show's
	// render_error, the worker alive
	died := p.died.Load()
	_, err := p.DDoc("evil", []byte(`{"_id":"_design/evil","_rev":"1-a"}`)).Show(ctx, `function(doc, req) { return "x".repeat(Math.pow(2, 40)); }`, nil, []byte(`{}`))
	var e *Error
	if !errors.As(err, &e) || e.Code != "render_error" || !strings.Contains(e.Reason, "RangeError") || !strings.Contains(e.Reason, "maximum string size") {
		t.Errorf("repeat: %v", err)
	}
	if p.died.Load() != died {
		t.Error("a worker died of a RangeError")
	}
}

// TestStringLimitsKeepSemantics: the wrapped repeat, padStart and padEnd
// answer as the built-ins do below the limit.
func TestStringLimitsKeepSemantics(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	m, err := p.NewMapSet([]string{`function(doc) {
  emit("ab".repeat(3), "x".repeat(0) + "|" + "".repeat(1e12));
  emit("5".padStart(3, "0"), "5".padEnd(4, "xy"));
  emit("abc".padStart(2), "a".padStart(3) + "|" + "a".padEnd(2, ""));
  emit(String.prototype.repeat.name + String.prototype.repeat.length, String.prototype.padStart.name + String.prototype.padEnd.length);
  var e1, e2, e3;
  try { "x".repeat(-1); } catch (e) { e1 = e.name; }
  try { String.prototype.repeat.call(null, 2); } catch (e) { e2 = e.name; }
  try { "x".padEnd(Math.pow(2, 31)); } catch (e) { e3 = e.name + ": " + e.message; }
  emit([e1, e2], e3);
  emit(String.prototype.repeat.call(12, 2), Object.keys(String.prototype).length);
}`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.MapDoc(context.Background(), []byte(`{"_id":"d"}`))
	want := `"ababab"="|" "005"="5xyx" "abc"="  a|a" "repeat1"="padStart1" ["RangeError","TypeError"]="RangeError: repeat count must be less than infinity and not overflow maximum string size" "1212"=0`
	if err != nil || emitsString(out) != want {
		t.Errorf("got  %s %v\nwant %s", emitsString(out), err, want)
	}
}

// TestFairShare: a validate_doc_update that loops, under 12 concurrent
// writes to its database, holds at most its share of the workers; a
// write to another database gets a worker at once.
func TestFairShare(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 4, Timeout: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop := p.DDoc("dba", []byte(`{"_id":"_design/loop","_rev":"1-a"}`))
	ok := p.DDoc("dbb", []byte(`{"_id":"_design/ok","_rev":"1-a"}`))
	vdu := `function(newDoc) { if (newDoc.x) throw({forbidden: "x"}); }`
	// warm: the workers exist, as in a running node
	var warm sync.WaitGroup
	for range 4 {
		warm.Go(func() { _ = ok.ValidateDocUpdate(ctx, vdu, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`)) })
	}
	warm.Wait()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var aErrs []error
	for range 12 {
		wg.Go(func() {
			err := loop.ValidateDocUpdate(ctx, `function(newDoc) { while (true) {} }`, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
			mu.Lock()
			aErrs = append(aErrs, err)
			mu.Unlock()
		})
	}
	time.Sleep(200 * time.Millisecond) // db A's calls hold their share, the rest wait
	p.mu.Lock()
	busyA := p.busy["dba"]
	p.mu.Unlock()
	if busyA != 2 {
		t.Errorf("db A holds %d workers, want its share 2", busyA)
	}
	var worst time.Duration
	for i := range 20 {
		start := time.Now()
		err := ok.ValidateDocUpdate(ctx, vdu, []byte(`{"n":`+strconv.Itoa(i)+`}`), nil, []byte(`{}`), []byte(`{}`))
		d := time.Since(start)
		worst = max(worst, d)
		if err != nil {
			t.Fatalf("db B: %v", err)
		}
	}
	t.Logf("db B's slowest write of 20 while db A loops: %v", worst)
	if worst > 500*time.Millisecond {
		t.Errorf("db B waited %v", worst)
	}
	// db A's own calls time out in turn; cancelling ends the rest
	cancel()
	wg.Wait()
	var e *Error
	for _, err := range aErrs {
		if err == nil || !(errors.Is(err, context.Canceled) || errors.As(err, &e) && e.Code == "os_process_error") {
			t.Errorf("db A: %v", err)
		}
	}
}

// TestWorkerKilled: a worker killed mid-call (SIGKILL) answers
// os_process_error as CouchDB does when couchjs dies, and is replaced.
func TestWorkerKilled(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, Timeout: 20 * time.Second})
	ctx := context.Background()
	d := p.DDoc("db", []byte(`{"_id":"_design/d","_rev":"1-a"}`))
	if _, err := d.Show(ctx, `function(doc, req) { return "started"; }`, nil, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := d.Show(ctx, `function(doc, req) { while (true) {} }`, nil, []byte(`{}`))
		errc <- err
	}()
	pid := busyWorker(t, p)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var e *Error
	select {
	case err := <-errc:
		if !errors.As(err, &e) || e.Code != "os_process_error" || e.Reason != "{exit_status,137}" {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after the worker was killed")
	}
	r, err := d.Show(ctx, `function(doc, req) { return "again"; }`, nil, []byte(`{}`))
	if err != nil || string(r.Body) != "again" {
		t.Fatalf("after: %v %v", r, err)
	}
	if p.started.Load() != 2 || p.died.Load() != 1 {
		t.Errorf("started %d, died %d", p.started.Load(), p.died.Load())
	}
	// an idle worker killed from outside: the next call gets a new one
	pid = onlyWorker(t, p)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if r, err := d.Show(ctx, `function(doc, req) { return "once more"; }`, nil, []byte(`{}`)); err != nil || string(r.Body) != "once more" {
		t.Fatalf("after an idle worker died: %v %v", r, err)
	}
}

// busyWorker waits for a worker with a call under way and answers its
// pid.
func busyWorker(t *testing.T, p *Pool) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for w := range p.live {
			if w.deadline.Load() != 0 {
				p.mu.Unlock()
				time.Sleep(20 * time.Millisecond) // into the loop
				return w.pid
			}
		}
		p.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no busy worker")
	return 0
}

func onlyWorker(t *testing.T, p *Pool) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.live) != 1 {
		t.Fatalf("%d workers", len(p.live))
	}
	for w := range p.live {
		return w.pid
	}
	return 0
}

// TestCancelInterrupts: a caller that gives up interrupts its call; the
// worker lives and serves the next.
func TestCancelInterrupts(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, Timeout: 20 * time.Second})
	d := p.DDoc("db", []byte(`{"_id":"_design/d","_rev":"1-a"}`))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := d.ValidateDocUpdate(ctx, `function(newDoc) { while (true) {} }`, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v", took)
	}
	if err := d.ValidateDocUpdate(context.Background(), `function(newDoc) {}`, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if p.died.Load() != 0 || p.started.Load() != 1 {
		t.Errorf("started %d, died %d: the interrupt should not cost the worker", p.started.Load(), p.died.Load())
	}
	// a caller that gave up while waiting for a worker leaves nothing
	// held
	busy, cancelBusy := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.ValidateDocUpdate(busy, `function(newDoc) { while (true) {} }`, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
	}()
	busyWorker(t, p)
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := d.ValidateDocUpdate(short, `function(newDoc) {}`, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting: %v", err)
	}
	cancelBusy()
	<-done
	if err := d.ValidateDocUpdate(context.Background(), `function(newDoc) {}`, []byte(`{}`), nil, []byte(`{}`), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}

// TestParentDeadline: a worker stuck where its own watchdog cannot
// interrupt it is killed by the parent at Timeout plus the grace. A
// backtracking regular expression (a lookahead makes goja use regexp2)
// runs in Go without checking for interrupts: this one takes about 8 s
// at 26 a's and doubles with each more; in process it held a runtime
// (and a Pool slot) long past os_process_timeout.
func TestParentDeadline(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, Timeout: 300 * time.Millisecond})
	d := p.DDoc("db", []byte(`{"_id":"_design/d","_rev":"1-a"}`))
	start := time.Now()
	_, err := d.Show(context.Background(), `function(doc, req) { return String(/^(a+)+(?=b)c/.test("a".repeat(32))); }`, nil, []byte(`{}`))
	took := time.Since(start)
	var e *Error
	if !errors.As(err, &e) || e.Code != "os_process_error" || e.Reason != "OS process timed out." {
		t.Fatalf("got %v after %v", err, took)
	}
	if took > 3*time.Second {
		t.Errorf("took %v", took)
	}
	t.Logf("answered after %v; workers died %d", took, p.died.Load())
	if r, err := d.Show(context.Background(), `function(doc, req) { return "next"; }`, nil, []byte(`{}`)); err != nil || string(r.Body) != "next" {
		t.Fatalf("after: %v %v", r, err)
	}
}
