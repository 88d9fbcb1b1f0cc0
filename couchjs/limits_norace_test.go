//go:build !race

package couchjs

// TestAllocationBombs runs without the race detector only (scripts/norace.sh
// runs it in make test's second pass): under -race each worker is a
// race-built binary without its RLIMIT_AS and with a tripled bound, so the
// test measured a configuration no node runs, for three minutes of CI.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

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
