package couchjs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// guardVDU is the victim of the attack: it lets through only allowed:"yes".
const guardVDU = `function(newDoc) { if (["yes"].indexOf(newDoc.allowed) < 0) throw({forbidden: "no"}); }`

// probeShow answers what a function sees of its built-ins and globals.
const probeShow = `function(doc, req) {
  var r = [];
  r.push(["yes"].indexOf("no"));
  r.push(typeof ({}).polluted);
  r.push(JSON.stringify({a: [1]}));
  r.push(JSON.parse("[2]")[0]);
  r.push(Math.max(1, 2));
  r.push("abc".toUpperCase());
  r.push(typeof leak, typeof globalThis.leak2);
  r.push(Object.isFrozen(Array.prototype), Object.isSealed(Object.prototype), Object.isExtensible(globalThis));
  r.push(sum([1, 2]), toJSON([3]), isArray([]), typeof emit, typeof log, typeof require, typeof send, typeof getRow, typeof start);
  r.push([3, 1, 2].map(function (x) { return x * 2; }).join("-"));
  r.push(typeof Array.prototype.has);
  return r.join(",");
}`

// attacks are what one design doc's code does to its runtime; none may
// be seen by another design doc.
var attacks = []struct{ name, code string }{
	{"Array.prototype.indexOf", `Array.prototype.indexOf = function () { return 0; };`},
	{"Array.prototype.map", `Array.prototype.map = function () { return ["pwned"]; }; Array.prototype.join = function () { return "pwned"; };`},
	{"Object.prototype", `Object.prototype.polluted = 1; Object.prototype.forbidden = undefined;`},
	{"JSON", `JSON.stringify = function () { return "x"; }; JSON.parse = function () { return [9]; };`},
	{"Math", `Math.max = function () { return -1; };`},
	{"String.prototype", `String.prototype.toUpperCase = function () { return "pwn"; };`},
	{"globals", `leak = 1; globalThis.leak2 = 2;`},
	{"sandbox names", `sum = function () { return 42; }; toJSON = function () { return "t"; }; isArray = function () { return false; };
		emit = 1; log = 1; require = 1; send = 1; getRow = 1; start = 1;`},
	{"freeze and seal", `Object.freeze(Array.prototype); Object.seal(Object.prototype); Object.preventExtensions(globalThis);`},
	{"own helper", `Array.prototype.has = function (x) { return true; };`},
	{"constructors", `Array = function () {}; Object = null; JSON = null; Math = null;`},
}

// sandboxes are the places an attack runs from and the victims run in:
// two databases, and two design docs in one database.
func attackRunners(p *Pool) map[string]func(code string) {
	ctx := context.Background()
	evil := []byte(`{"_id":"_design/evil","_rev":"1-a"}`)
	return map[string]func(code string){
		"map": func(code string) {
			m, err := p.Sandbox("dba", "views", "sig-evil").NewMapSet([]string{"function(doc) { " + code + " emit(doc._id, null); }"}, nil)
			if err == nil {
				_, _ = m.MapDocs(ctx, [][]byte{[]byte(`{"_id":"a"}`), []byte(`{"_id":"b"}`)})
			}
		},
		"reduce": func(code string) {
			_, _ = p.Sandbox("dba", "views", "sig-evil").Reduce(ctx, "function(k, v) { "+code+" return 1; }", nil, [][]byte{[]byte("1")}, true)
		},
		"validate": func(code string) {
			_ = p.DDoc("dba", evil).ValidateDocUpdate(ctx, "function() { "+code+" }", []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
		},
		"show": func(code string) {
			_, _ = p.DDoc("dba", evil).Show(ctx, "function() { "+code+" return 'x'; }", nil, []byte(`{}`))
		},
		"filter": func(code string) {
			_, _ = p.DDoc("dba", evil).Filter(ctx, "function() { "+code+" return true; }", [][]byte{[]byte(`{}`)}, []byte(`{}`))
		},
		"update": func(code string) {
			_, _, _ = p.DDoc("dba", evil).Update(ctx, "function() { "+code+" return [null, 'x']; }", nil, []byte(`{"method":"POST"}`))
		},
		"list": func(code string) {
			_ = p.DDoc("dba", evil).ListStream(ctx, "function() { "+code+" return 'x'; }", []byte(`{}`), []byte(`{}`),
				func() ([]byte, bool) { return nil, false }, func(*Response) error { return nil }, func(string) error { return nil })
		},
		"require": func(code string) {
			ddoc := []byte(`{"_id":"_design/evil","_rev":"2-a","lib":{"m":` + jsString(code+" exports.x = 1;") + `}}`)
			_ = p.DDoc("dba", ddoc).ValidateDocUpdate(ctx, "function() { require('lib/m'); }", []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
		},
	}
}

// TestEvalRefused: runtime code evaluation is refused as CouchDB's couchjs
// refuses it (SpiderMonkey's CSP): EvalError, in every kind of function.
func TestEvalRefused(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var mu sync.Mutex
	p := newPool(t, Config{MaxWorkers: 1, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	ddoc := p.DDoc("db", []byte(`{"_id":"_design/d","lib":{"ok":"exports.v = 1;"}}`))
	exprs := []struct{ name, expr, what string }{
		{"eval", `eval("1 + 1")`, "eval()"},
		{"indirect eval", `(0, eval)("1 + 1")`, "eval()"},
		{"globalThis.eval", `globalThis.eval("1 + 1")`, "eval()"},
		{"Function", `Function("return this")()`, "Function()"},
		{"new Function", `new Function("return 1")()`, "Function()"},
		{"emit.constructor", `emit.constructor("return this")()`, "Function()"},
		{"function constructor", `(function () {}).constructor("return 1")()`, "Function()"},
		{"arrow constructor", `(() => 1).constructor("return 1")()`, "Function()"},
		{"class constructor", `(class {}).constructor("return 1")()`, "Function()"},
		{"bound constructor", `sum.bind(null).constructor("return 1")()`, "Function()"},
		{"native constructor", `[].push.constructor("return 1")()`, "Function()"},
		{"Function.prototype.constructor", `Object.getPrototypeOf(isArray).constructor("return 1")()`, "Function()"},
		{"generator constructor", `(function* () {}).constructor("yield 1")().next().value`, "Function()"},
		{"generator prototype", `Object.getPrototypeOf(function* () {}).constructor("yield 1")`, "Function()"},
		{"async constructor", `(async function () {}).constructor("return 1")()`, "Function()"},
		{"async arrow constructor", `(async () => 1).constructor("return 1")`, "Function()"},
		{"Reflect.construct", `Reflect.construct(Function, ["return 1"])()`, "Function()"},
		{"require's constructor", `require.constructor("return 1")()`, "Function()"},
	}
	for _, x := range exprs {
		t.Run(x.name, func(t *testing.T) {
			blocked := "call to " + x.what + " blocked by CSP"
			var e *Error

			// map: the doc is skipped for the view, the error logged
			mu.Lock()
			logs.Reset()
			mu.Unlock()
			m, err := p.Sandbox("db", "views", x.name).NewMapSet([]string{"function(doc) { emit('ran', String(" + x.expr + ")); }"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.MapDoc(ctx, []byte(`{"_id":"d"}`))
			mu.Lock()
			logged := logs.String()
			mu.Unlock()
			if err != nil || out[0] != nil || !strings.Contains(logged, "EvalError") || !strings.Contains(logged, blocked) {
				t.Errorf("map: %s %v; log %s", emitsString(out), err, logged)
			}

			// validate_doc_update: the thrown EvalError
			err = ddoc.ValidateDocUpdate(ctx, "function(newDoc) { "+x.expr+"; }", []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
			if !errors.As(err, &e) || e.Code != "EvalError" {
				t.Errorf("validate: %v", err)
			}

			// show: render_error with the error in its reason
			_, err = ddoc.Show(ctx, "function(doc, req) { return String("+x.expr+"); }", nil, []byte(`{}`))
			if !errors.As(err, &e) || e.Code != "render_error" || !strings.Contains(e.Reason, blocked) {
				t.Errorf("show: %v", err)
			}

			// filter
			_, err = ddoc.Filter(ctx, "function(doc, req) { return !!("+x.expr+"); }", [][]byte{[]byte(`{}`)}, []byte(`{}`))
			if !errors.As(err, &e) || e.Code != "EvalError" {
				t.Errorf("filter: %v", err)
			}

			// a module's code
			mod := []byte(`{"_id":"_design/m","lib":{"m":` + jsString("exports.v = "+x.expr+";") + `}}`)
			err = p.DDoc("db", mod).ValidateDocUpdate(ctx, "function() { require('lib/m'); }", []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
			if !errors.As(err, &e) || e.Code != "compilation_error" || !strings.Contains(e.Reason, "EvalError") {
				t.Errorf("module: %v", err)
			}
		})
	}
	// instanceof Function and typeof hold as before
	for _, tc := range []struct{ src, want string }{
		{`function(doc) { emit(emit instanceof Function, typeof Function); }`, `true="function"`},
		{`function(doc) { emit((function* () {}) instanceof Function, (async function () {}) instanceof Function); }`, `true=true`},
		{`function(doc) { emit(Function.prototype.constructor === Function, Function.name); }`, `true="Function"`},
		{`function(doc) { emit(Object.getPrototypeOf(function* () {}).constructor.name, Object.getPrototypeOf(async function () {}).constructor.name); }`, `"GeneratorFunction"="AsyncFunction"`},
	} {
		m, err := p.NewMapSet([]string{tc.src}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.MapDoc(ctx, []byte(`{"_id":"d"}`))
		if err != nil || emitsString(out) != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.src, emitsString(out), err, tc.want)
		}
	}
}

// TestRequireRunsOnlyTheDesignDoc: require evaluates the design doc's own
// module sources, never a string the code made: not one it wrote into
// `this`, a module's parent, or Object.prototype.
func TestRequireRunsOnlyTheDesignDoc(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, Config{MaxWorkers: 1})
	ddoc := p.DDoc("db", []byte(`{"_id":"_design/d","lib":{"ok":"exports.v = 1; exports.mod = module;","sub":{"a":"exports.p = module.parent;"}}}`))
	for _, tc := range []struct{ name, body, code string }{
		{"the doc's module", `if (require("lib/ok").v !== 1) throw({forbidden: "v"});`, ""},
		{"written into this", `this.lib.evil = "exports.v = 2;"; this.evil = "exports.v = 3;"; require("evil");`, "invalid_require_path"},
		{"written into this.lib", `this.lib.evil = "exports.v = 2;"; require("lib/evil");`, "invalid_require_path"},
		{"inherited", `Object.prototype.evil = "exports.v = 2;"; require("evil");`, "invalid_require_path"},
		{"module.parent", `var m = require("lib/ok").mod; try { m.parent.current.evil = "exports.v = 2;"; } catch (e) {} require("lib/evil");`, "invalid_require_path"},
		{"module.parent swapped", `var m = require("lib/ok").mod; m.parent = {current: {evil: "exports.v = 2;"}}; require("lib/evil");`, "invalid_require_path"},
	} {
		err := ddoc.ValidateDocUpdate(ctx, "function() { "+tc.body+" }", []byte(`{}`), nil, []byte(`{}`), []byte(`{}`))
		var e *Error
		if tc.code == "" && err != nil || tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.code)
		}
	}
}

// TestOwnSandboxPersists: a design doc's functions share its sandbox, and
// what they leave in it lasts between calls (CouchDB's couchjs keeps a
// design doc's functions for the life of its process); even code that
// freezes its own built-ins and global leaves the design doc working.
func TestOwnSandboxPersists(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, Config{MaxWorkers: 2})
	own := p.DDoc("db", []byte(`{"_id":"_design/own","_rev":"1-a"}`))
	other := p.DDoc("db", []byte(`{"_id":"_design/other","_rev":"1-a"}`))
	vdu := `function(newDoc) {
  if (!Array.prototype.has) Array.prototype.has = function (x) { return this.indexOf(x) >= 0; };
  globalThis.calls = (globalThis.calls || 0) + 1;
  if (!["yes"].has(newDoc.allowed)) throw({forbidden: "no"});
}`
	show := `function(doc, req) { return (typeof calls === "undefined" ? 0 : calls) + " " + typeof [].has; }`
	for i, allowed := range []string{"yes", "no", "yes", "no"} {
		err := own.ValidateDocUpdate(ctx, vdu, []byte(`{"allowed":"`+allowed+`"}`), nil, []byte(`{}`), []byte(`{}`))
		if (err == nil) != (allowed == "yes") {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// calls ran on one runtime or two (MaxWorkers 2): each counts its own,
	// and the function is there in the one a show gets
	for _, tc := range []struct {
		d    *DDoc
		want []string
	}{
		{own, []string{"4 function", "3 function", "2 function", "1 function"}},
		{other, []string{"0 undefined"}},
	} {
		resp, err := tc.d.Show(ctx, show, nil, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, w := range tc.want {
			found = found || string(resp.Body) == w
		}
		if !found {
			t.Errorf("show: %q, want one of %q", resp.Body, tc.want)
		}
	}

	// a map that adds to Array.prototype on the first doc uses it on the
	// later ones, in one batch and the next
	m, err := p.Sandbox("db", "views", "own").NewMapSet([]string{`function(doc) {
  if (!Array.prototype.last) Array.prototype.last = function () { return this[this.length - 1]; };
  emit(doc.xs.last(), null);
}`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		out, err := m.MapDocs(ctx, [][]byte{[]byte(`{"_id":"a","xs":[1,2]}`), []byte(`{"_id":"b","xs":[3]}`)})
		if err != nil || emitsString(out[0]) != "2=null" || emitsString(out[1]) != "3=null" {
			t.Fatalf("map: %v %v", out, err)
		}
	}

	// freezing its own world: the design doc still works
	frozen := p.DDoc("db", []byte(`{"_id":"_design/frozen","_rev":"1-a"}`))
	freezer := `function(newDoc) {
  Object.freeze(Array.prototype); Object.freeze(Object.prototype); Object.freeze(JSON); Object.freeze(globalThis);
  if (["yes"].indexOf(newDoc.allowed) < 0) throw({forbidden: "no"});
}`
	for i, allowed := range []string{"yes", "no", "yes", "no"} {
		err := frozen.ValidateDocUpdate(ctx, freezer, []byte(`{"allowed":"`+allowed+`"}`), nil, []byte(`{}`), []byte(`{}`))
		var e *Error
		if allowed == "yes" && err != nil || allowed == "no" && (!errors.As(err, &e) || e.Code != "forbidden") {
			t.Fatalf("frozen, call %d: %v", i, err)
		}
	}
	resp, err := frozen.Show(ctx, `function(doc, req) { return {json: {ok: Object.isFrozen(globalThis)}}; }`, nil, []byte(`{}`))
	if err != nil || string(resp.Body) != "{\"ok\":true}\n" {
		t.Errorf("frozen show: %v %v", resp, err)
	}
}

// TestSandboxRuntimes: runtimes are kept per sandbox, up to MaxIdle per
// worker (one here), least recently used dropped first; a one-off sandbox's runtime is
// never kept.
func TestSandboxRuntimes(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, Config{MaxWorkers: 1, MaxIdle: 2})
	count := `function() { globalThis.n = (globalThis.n || 0) + 1; return String(n); }`
	show := func(d *DDoc) string {
		t.Helper()
		r, err := d.Show(ctx, count, nil, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Body)
	}
	a, b, c := p.Sandbox("a"), p.Sandbox("b"), p.Sandbox("c")
	for i, step := range []struct {
		d    *DDoc
		want string
	}{{a, "1"}, {a, "2"}, {b, "1"}, {a, "3"}, {c, "1"}, {b, "1"}, {a, "1"}, {c, "1"}} {
		if got := show(step.d); got != step.want {
			t.Errorf("step %d: %s, want %s", i, got, step.want)
		}
	}
	for range 2 {
		if r, err := p.Show(ctx, count, nil, []byte(`{}`)); err != nil || string(r.Body) != "1" {
			t.Errorf("one-off: %v %v", r, err)
		}
	}
	p.mu.Lock()
	idle := 0
	for _, w := range p.free {
		idle += w.lru.Len()
	}
	p.mu.Unlock()
	if idle > 2 {
		t.Errorf("%d idle runtimes, MaxIdle 2", idle)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
