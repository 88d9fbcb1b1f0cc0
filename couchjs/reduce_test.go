package couchjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// reduceGroups is n groups of 1 to 4 rows: keys [["g<i>", j], "d<i>-<j>"],
// values numbers and a string now and then.
func reduceGroups(n int) []ReduceGroup {
	groups := make([]ReduceGroup, n)
	for i := range groups {
		for j := range i%4 + 1 {
			groups[i].Keys = append(groups[i].Keys, fmt.Appendf(nil, `[["g%d",%d],"d%d-%d"]`, i, j, i, j))
			v := fmt.Appendf(nil, "%d.5", i*10+j)
			if (i+j)%7 == 0 {
				v = fmt.Appendf(nil, `"s%d"`, i)
			}
			groups[i].Values = append(groups[i].Values, v)
		}
	}
	return groups
}

// TestReduceBatch: each group of a batch answers what a call of its own
// answers, reduce and rereduce, a group that throws included (null, the
// others go on), in one call to the worker.
func TestReduceBatch(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	ctx := context.Background()
	sb := p.Sandbox("db", "views", "sig")
	groups := reduceGroups(50)
	for _, tc := range []struct {
		name, src string
		rereduce  bool
	}{
		{"sum", `function(k, v, re) { return sum(v.filter(function(x) { return typeof x == "number"; })); }`, false},
		{"keys", `function(k, v, re) { return [k.length, k[0][1], v.length, re]; }`, false},
		{"throws", `function(k, v, re) { if (typeof v[0] == "string") throw new Error("no " + v[0]); return {n: v.length, big: 1e21}; }`, false},
		{"undefined", `function(k, v) { if (v.length == 2) return; return v[0]; }`, false},
		{"rereduce", `function(k, v, re) { return [k, re, v.length, v[v.length-1]]; }`, true},
		{"rereduce throws", `function(k, v, re) { if (v.length == 3) throw "three"; return v; }`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := p.calls.Load()
			got, err := sb.ReduceBatch(ctx, tc.src, groups, tc.rereduce)
			if err != nil {
				t.Fatal(err)
			}
			if n := p.calls.Load() - start; n != 1 {
				t.Errorf("%d calls to workers for one batch", n)
			}
			if len(got) != len(groups) {
				t.Fatalf("%d answers for %d groups", len(got), len(groups))
			}
			nulls := 0
			for i, g := range groups {
				want, err := sb.Reduce(ctx, tc.src, g.Keys, g.Values, tc.rereduce)
				if err != nil {
					t.Fatal(err)
				}
				if string(got[i]) != string(want) {
					t.Errorf("group %d: batch %s, one by one %s", i, got[i], want)
				}
				if string(want) == "null" {
					nulls++
				}
			}
			if strings.Contains(tc.name, "throws") && nulls == 0 {
				t.Error("no group threw")
			}
		})
	}
	if out, err := sb.ReduceBatch(ctx, `function(k, v) { return 1; }`, nil, false); err != nil || out != nil {
		t.Errorf("no groups: %q %v", out, err)
	}
	// the Pool's one-off sandbox
	out, err := p.ReduceBatch(ctx, `function(k, v, re) { return sum(v); }`, []ReduceGroup{{Values: [][]byte{[]byte("1"), []byte("2")}}, {Values: [][]byte{[]byte("3")}}}, true)
	if err != nil || len(out) != 2 || string(out[0]) != "3" || string(out[1]) != "3" {
		t.Errorf("one-off: %q %v", out, err)
	}
}

// TestReduceBatchFatal: a fatal error in one group fails the batch, as
// it fails CouchDB's query; the sandbox answers the next call.
func TestReduceBatchFatal(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	ctx := context.Background()
	sb := p.Sandbox("db", "views", "sig")
	groups := reduceGroups(20)
	for _, tc := range []struct{ src, code, reason string }{
		{`function(k, v) { if (k[0][0][0] == "g7") throw ["fatal", "f", "r"]; return v.length; }`, "f", "r"},
		{`function(k, v) { if (k[0][0][0] == "g7") throw "fatal_error"; return v.length; }`, "map_runtime_error", "function raised 'fatal_error'"},
	} {
		_, err := sb.ReduceBatch(ctx, tc.src, groups, false)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason {
			t.Errorf("%s: got %v", tc.src, err)
		}
	}
	out, err := sb.ReduceBatch(ctx, `function(k, v) { return v.length; }`, groups[:3], false)
	if err != nil || len(out) != 3 || string(out[2]) != "3" {
		t.Errorf("after: %q %v", out, err)
	}
	if p.died.Load() != 0 {
		t.Errorf("%d workers died", p.died.Load())
	}
}

// TestReduceBatchTimeout: Timeout bounds each group, not the batch (as
// MapDocs each doc); one group that loops stops the batch at Timeout.
func TestReduceBatchTimeout(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	sb := p.Sandbox("db", "views", "sig")
	groups := reduceGroups(6) // 600 ms in all, 100 ms each
	out, err := sb.ReduceBatch(ctx, `function(k, v) { var t = Date.now(); while (Date.now() - t < 100) {} return v.length; }`, groups, false)
	if err != nil || len(out) != 6 {
		t.Fatalf("a batch of slow groups, each within the timeout: %q %v", out, err)
	}
	start := time.Now()
	_, err = sb.ReduceBatch(ctx, `function(k, v) { if (v.length == 3) while (true) {} return 1; }`, groups, false)
	var e *Error
	if !errors.As(err, &e) || e.Code != "os_process_error" || e.Reason != "OS process timed out." {
		t.Fatalf("a group that loops: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if out, err := sb.ReduceBatch(ctx, `function(k, v) { return v.length; }`, groups, false); err != nil || len(out) != 6 {
		t.Fatalf("after the timeout: %q %v", out, err)
	}
}

// TestReduceBatchOutput: the answers of a batch together are bounded by
// MaxOutput, though each group's is small; the worker lives.
func TestReduceBatchOutput(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1, MaxOutput: 1 << 20})
	ctx := context.Background()
	sb := p.Sandbox("db", "views", "sig")
	groups := reduceGroups(64)
	src := `function(k, v) { return "x".repeat(32 << 10); }` // 32 KiB a group, 2 MiB in all
	_, err := sb.ReduceBatch(ctx, src, groups, false)
	var e *Error
	if !errors.As(err, &e) || e.Code != "os_process_error" || !strings.Contains(e.Reason, "exceeds the bound") {
		t.Fatalf("got %v", err)
	}
	out, err := sb.ReduceBatch(ctx, src, groups[:16], false) // 512 KiB
	if err != nil || len(out) != 16 || len(out[15]) != 32<<10+2 {
		t.Fatalf("within the bound: %d answers, %v", len(out), err)
	}
	if p.died.Load() != 0 {
		t.Errorf("%d workers died", p.died.Load())
	}
}
