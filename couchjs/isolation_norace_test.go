//go:build !race

package couchjs

// TestIsolation makes a pool, and so a worker process, for each of its
// hundred-odd cases: under -race each is a race-built binary starting,
// 93 s of CI for 2 s of test. It runs in make test's second pass
// (scripts/norace.sh); the worker protocol's races are the race pass's
// (TestFairShare, TestConcurrentMaps, the render tests).

import (
	"context"
	"errors"
	"testing"
)

// TestIsolation: whatever one design doc's code does to its built-ins and
// globals, from any kind of function, a design doc of another database,
// or another of the same database, sees a runtime as new. One runtime in
// the pool: before sandboxes, every call shared it.
func TestIsolation(t *testing.T) {
	ctx := context.Background()
	fresh := newPool(t, Config{MaxWorkers: 1})
	want, err := fresh.DDoc("x", []byte(`{"_id":"_design/x"}`)).Show(ctx, probeShow, nil, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	victims := map[string]*DDoc{}
	for _, a := range attacks {
		for from := range attackRunners(fresh) {
			t.Run(a.name+"/"+from, func(t *testing.T) {
				p := newPool(t, Config{MaxWorkers: 1})
				victims["other db"] = p.DDoc("dbb", []byte(`{"_id":"_design/guard","_rev":"1-b"}`))
				victims["same db"] = p.DDoc("dba", []byte(`{"_id":"_design/guard","_rev":"1-b"}`))
				victims["same db, same id, other rev"] = p.DDoc("dba", []byte(`{"_id":"_design/evil","_rev":"3-c"}`))
				victims["other db, same doc"] = p.DDoc("dbb", []byte(`{"_id":"_design/evil","_rev":"1-a"}`))
				// the victims' runtimes exist before the attack, as in a
				// running server, and after it
				for _, v := range victims {
					if _, err := v.Show(ctx, probeShow, nil, []byte(`{}`)); err != nil {
						t.Fatal(err)
					}
				}
				attackRunners(p)[from](a.code)
				for name, v := range victims {
					got, err := v.Show(ctx, probeShow, nil, []byte(`{}`))
					if err != nil || string(got.Body) != string(want.Body) {
						t.Errorf("%s: got %s %v\nwant %s", name, got.Body, err, want.Body)
					}
					for _, allowed := range []string{"yes", "no", "maybe"} {
						err := v.ValidateDocUpdate(ctx, guardVDU, []byte(`{"allowed":"`+allowed+`"}`), nil, []byte(`{}`), []byte(`{}`))
						var e *Error
						if allowed == "yes" && err != nil || allowed != "yes" && (!errors.As(err, &e) || e.Code != "forbidden") {
							t.Errorf("%s: allowed %q: %v", name, allowed, err)
						}
					}
				}
				// a victim's map and reduce, in the views' sandbox of
				// another index
				m, err := p.Sandbox("dbb", "views", "sig-guard").NewMapSet([]string{`function(doc) { emit(["yes"].indexOf(doc.allowed), JSON.stringify(doc)); }`}, nil)
				if err != nil {
					t.Fatal(err)
				}
				out, err := m.MapDoc(ctx, []byte(`{"_id":"d","allowed":"no"}`))
				if err != nil || emitsString(out) != `-1="{\"_id\":\"d\",\"allowed\":\"no\"}"` {
					t.Errorf("victim's map: %s %v", emitsString(out), err)
				}
				red, err := p.Sandbox("dbb", "views", "sig-guard").Reduce(ctx, `function(k, v) { return [sum(v), Math.max(1, 2), ["a"].indexOf("b")]; }`, nil, [][]byte{[]byte("1"), []byte("2")}, true)
				if err != nil || string(red) != `[3,2,-1]` {
					t.Errorf("victim's reduce: %s %v", red, err)
				}
			})
		}
	}
}
