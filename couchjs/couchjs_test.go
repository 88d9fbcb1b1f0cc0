package couchjs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := New(cfg)
	t.Cleanup(func() { closeAndCheck(t, p) })
	return p
}

// closeAndCheck closes p and checks that none of its worker processes is
// left: Close waits for each to exit, and reaps it.
func closeAndCheck(t testing.TB, p *Pool) {
	t.Helper()
	var pids []int
	p.mu.Lock()
	for w := range p.live {
		pids = append(pids, w.pid)
	}
	p.mu.Unlock()
	p.Close()
	p.mu.Lock()
	left := len(p.live)
	p.mu.Unlock()
	if left != 0 {
		t.Errorf("%d workers live after Close", left)
	}
	for _, pid := range pids {
		// reaped: no such process (a zombie would still answer)
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("worker %d still there after Close: %v", pid, err)
		}
	}
}

func emitsString(out [][]Emit) string {
	var b strings.Builder
	for i, es := range out {
		if i > 0 {
			b.WriteString(" | ")
		}
		if es == nil {
			b.WriteString("nil")
			continue
		}
		for j, e := range es {
			if j > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s=%s", e.Key, e.Value)
		}
	}
	return b.String()
}

func TestCompile(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	for _, tc := range []struct{ src, code, reason string }{
		{"function(doc) { emit(doc._id, null) }", "", ""},
		{"  function (doc)\n{ emit(1, 2); }\n", "", ""},
		{"(function(doc){emit(1,1)})", "", ""},
		{"var x = 1; function(doc){emit(x,1)}", "", ""},
		// The texts CouchDB 3.5.2 answers on PUT of such a ddoc (its
		// reason after "Compilation of the map function in the 'v' view failed: ").
		{"function(doc) { emit(doc._id, }", "compilation_error", `(new Error("Line 1: Unexpected token }", "./share/server/main.js", 1)) (function(doc) { emit(doc._id, })`},
		{"1+1", "compilation_error", "Expression does not eval to a function. (1+1)"},
		{"function f(doc){emit(1,1)}", "compilation_error", "Expression does not eval to a function. (function f(doc){emit(1,1)})"},
		{"function (doc) { emit(doc._id, 1); }; 1", "compilation_error", "Expression does not eval to a function. (function (doc) { emit(doc._id, 1); }; 1)"},
		{"", "not_found", "missing function"},
		{"function(doc){} function(x){}", "compilation_error", ""},
		{"throw new Error('x'); function(doc){}", "compilation_error", `(new Error("x", "<unknown>", 1)) (throw new Error('x'); function(doc){})`},
	} {
		err := p.Compile(tc.src)
		if tc.code == "" {
			if err != nil {
				t.Errorf("Compile(%q): %v", tc.src, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || (tc.reason != "" && e.Reason != tc.reason) {
			t.Errorf("Compile(%q) = %v, want %s: %s", tc.src, err, tc.code, tc.reason)
		}
	}
}

func TestMapDoc(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 2})
	doc := `{"_id":"d1","_rev":"1-abc","a":1,"n":{"x":[1,2]},"s":"h\u00e9\"llo","e":""}`
	for _, tc := range []struct{ name, fn, want string }{
		{"fields", `function(doc){ emit(doc._id, doc.a); emit(doc.n.x[1], doc.s) }`, `"d1"=1 2="hé\"llo"`},
		{"keys", `function(doc){ emit(Object.keys(doc), null) }`, `["_id","_rev","a","n","s","e"]=null`},
		{"stringify", `function(doc){ emit(null, JSON.stringify(doc.n)) }`, `null="{\"x\":[1,2]}"`},
		// What CouchDB 3.5.2 answers for these (TestMapCouchDB checks it live).
		{"undefined", `function(doc){ emit(undefined, undefined); emit([undefined], {a: undefined}) }`, `null=null [null]={}`},
		{"numbers", `function(doc){ emit(NaN, Infinity); emit(-0, 1e21); emit(0.1+0.2, 9007199254740993); emit(1.5e-7, 5e-324); emit(0.000001, 0.0001) }`,
			`null=null 0=1.0e21 0.30000000000000004=9007199254740992 1.5e-7=5.0e-324 1.0e-6=0.0001`},
		{"functions", `function(doc){ emit(function(){}, [function(){}]) }`, `null=[null]`},
		{"date and error", `function(doc){ emit(new Date(0), new TypeError('tt')) }`, `"1970-01-01T00:00:00.000Z"={"error":"TypeError","message":"tt"}`},
		{"frozen sloppy", `function(doc){ doc.a = 42; emit(doc.a, null) }`, `1=null`},
		{"frozen push throws", `function(doc){ doc.n.x.push(3); emit(1, 1) }`, `nil`},
		{"frozen strict throws", `function(doc){ "use strict"; doc.a = 42; emit(1, 1) }`, `nil`},
		{"throw error skips", `function(doc){ throw new Error('kaput') }`, `nil`},
		{"throw couch error skips", `function(doc){ throw ["error", "x", "y"] }`, `nil`},
		{"identity", `function(doc){ emit(doc.n === doc.n, Array.isArray(doc.n.x) && isArray(doc.n.x)) }`, `true=true`},
		{"in and hasOwnProperty", `function(doc){ emit("a" in doc, [doc.hasOwnProperty("zz"), "e" in doc, doc.e]) }`, `true=[false,true,""]`},
		{"sum", `function(doc){ emit(sum(doc.n.x), toJSON([1])) }`, `3="[1]"`},
		{"this and require", `function(doc){ emit(typeof this, typeof require) }`, `"object"="function"`},
		{"strings", `function(doc){ emit("\u2028\u00e9<>&", "") }`, "\"\u2028é<>&\"=\"\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := p.NewMapSet([]string{tc.fn}, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.MapDoc(context.Background(), []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := emitsString(out); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestMapDocErrors(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	for _, tc := range []struct{ name, fn, code, reason string }{
		{"fatal_error", `function(doc){ throw 'fatal_error' }`, "map_runtime_error", "function raised 'fatal_error'"},
		{"fatal", `function(doc){ throw ["fatal", "my_err", "my reason"] }`, "my_err", "my reason"},
		// CouchDB: {"error":"TypeError","reason":"{[]}"} for a cyclic emit.
		{"cycle", `function(doc){ var o = {}; o.o = o; emit(1, o) }`, "TypeError", "{[]}"},
		{"recursion", `function(doc){ (function f(){ f() })() }`, "InternalError", "too much recursion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := p.NewMapSet([]string{`function(doc){ emit(1, 1) }`, tc.fn}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.MapDoc(context.Background(), []byte(`{"_id":"x"}`))
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason {
				t.Fatalf("got %v, want %s: %s", err, tc.code, tc.reason)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	lib := map[string]any{
		"a":     "exports.name = 'a'; exports.b = require('./b').name; exports.up = require('../lib/c').v;",
		"b":     "exports.name = 'b'; exports.count = (exports.count || 0) + 1;",
		"c":     "module.exports = {v: 'c'};",
		"deep":  map[string]any{"d": "exports.x = require('../a').name + require('./e').y;", "e": "exports.y = 'e';"},
		"cycle": "exports.self = require('./cycle'); exports.ok = 1;",
		"bad":   "exports.x = ;",
	}
	for _, tc := range []struct{ name, fn, want string }{
		{"relative", `function(doc){ var a = require('views/lib/a'); emit(a.name, [a.b, a.up]) }`, `"a"=["b","c"]`},
		{"nested", `function(doc){ emit(require('views/lib/deep/d').x, null) }`, `"ae"=null`},
		{"cached", `function(doc){ emit(require('views/lib/b') === require('views/lib/b'), require('views/lib/b').count) }`, `true=1`},
		{"cycle", `function(doc){ emit(require('views/lib/cycle').ok, null) }`, `1=null`},
		{"missing skips", `function(doc){ emit(require('views/lib/nope'), null) }`, `nil`},
		{"syntax error skips", `function(doc){ emit(require('views/lib/bad'), null) }`, `nil`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := p.NewMapSet([]string{tc.fn}, lib)
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.MapDoc(context.Background(), []byte(`{"_id":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := emitsString(out); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, Timeout: 200 * time.Millisecond})
	m, err := p.NewMapSet([]string{`function(doc){ if (doc.loop) while(true){} emit(doc._id, null) }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = m.MapDoc(context.Background(), []byte(`{"_id":"x","loop":true}`))
	var e *Error
	if !errors.As(err, &e) || e.Code != "os_process_error" || e.Reason != "OS process timed out." {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	// The one runtime was replaced: the pool still answers.
	out, err := m.MapDoc(context.Background(), []byte(`{"_id":"y"}`))
	if err != nil || emitsString(out) != `"y"=null` {
		t.Fatalf("after timeout: %v %v", emitsString(out), err)
	}
	// ctx cancellation interrupts too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.MapDoc(ctx, []byte(`{"_id":"x","loop":true}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
}

func TestMemoryBound(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, Timeout: 20 * time.Second, MaxMemory: 256 << 20})
	m, err := p.NewMapSet([]string{`function(doc){ var a = []; while (1) a.push(new Array(1e5).fill(doc._id)); }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = m.MapDoc(context.Background(), []byte(`{"_id":"x"}`))
	var e *Error
	if !errors.As(err, &e) || e.Code != "os_process_error" || !strings.Contains(e.Reason, "memory") {
		t.Fatalf("got %v", err)
	}
	t.Logf("stopped after %v", time.Since(start))
	if _, err := m.MapDoc(context.Background(), []byte(`{"_id":"x"}`)); err == nil {
		t.Fatal("second run should hit the bound too")
	}
}

func TestConcurrentMaps(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 2})
	m, err := p.NewMapSet([]string{`function(doc){ emit(doc._id, doc.n * 2) }`, `function(doc){ if (doc.n % 3 == 0) throw 'x'; emit(doc.n, null) }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				n := g*1000 + i
				out, err := m.MapDoc(context.Background(), fmt.Appendf(nil, `{"_id":"d%d","n":%d}`, n, n))
				if err != nil {
					errs <- err
					return
				}
				want := fmt.Sprintf(`"d%d"=%d | %d=null`, n, 2*n, n)
				if n%3 == 0 {
					want = fmt.Sprintf(`"d%d"=%d | nil`, n, 2*n)
				}
				if got := emitsString(out); got != want {
					errs <- fmt.Errorf("got %s want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Timeout bounds each doc of a batch, not the batch: many docs that each
// take a while map, as CouchDB's per-command os_process_timeout allows.
func TestTimeoutPerDoc(t *testing.T) {
	p := newPool(t, Config{Timeout: 300 * time.Millisecond, MaxWorkers: 1})
	ms, err := p.NewMapSet([]string{`function (doc) { var t = Date.now(); while (Date.now() - t < 100) {} emit(doc._id, 1); }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := make([][]byte, 6) // 600 ms in all, 100 ms each
	for i := range docs {
		docs[i] = []byte(`{"_id":"d` + strconv.Itoa(i) + `"}`)
	}
	out, err := ms.MapDocs(context.Background(), docs)
	if err != nil {
		t.Fatalf("a batch of slow docs, each within the timeout: %v", err)
	}
	if len(out) != 6 || len(out[5][0]) != 1 {
		t.Fatalf("emits %v", out)
	}
}
