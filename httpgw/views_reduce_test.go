package httpgw_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// reduce=true over a range reads whole buckets as their kept reductions:
// checked against the rows over random ranges (ascending and descending), for a builtin and a
// JavaScript reduce, after the reductions were kept and after edits,
// deletes and new docs changed some buckets (whose kept reductions must
// go).
func TestViewRangeReduce(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/rr?q=2", "", nil)
	c.do("PUT", "/rr/_design/d", `{"views":{
		"sum":{"map":"function (doc) { emit(doc.k, doc.v); }","reduce":"_sum"},
		"cnt":{"map":"function (doc) { emit(doc.k, 1); }","reduce":"_count"},
		"js":{"map":"function (doc) { emit(doc.k, doc.v); }","reduce":"function (k, v, re) { return sum(v); }"},
		"sum2":{"map":"function (doc) { emit(doc.k % 7, doc.v); }","reduce":"_sum"}}}`, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	revs := map[string]string{}
	model := map[string][2]int{} // id -> k, v
	write := func(n int) {
		var docs []string
		type change struct {
			k, v int
			del  bool
		}
		pending := map[string]change{}
		for len(pending) < n {
			id := fmt.Sprintf("d%04d", rng.IntN(3000))
			if _, dup := pending[id]; dup {
				continue
			}
			ch := change{k: rng.IntN(1000), v: rng.IntN(100)}
			doc := fmt.Sprintf(`{"_id":%q,"k":%d,"v":%d`, id, ch.k, ch.v)
			if r := revs[id]; r != "" {
				doc += fmt.Sprintf(`,"_rev":%q`, r)
				if ch.del = rng.IntN(5) == 0; ch.del {
					doc += `,"_deleted":true`
				}
			}
			pending[id] = ch
			docs = append(docs, doc+"}")
		}
		resp, b := c.do("POST", "/rr/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
		if resp.StatusCode != 201 {
			t.Fatalf("bulk: %d %s", resp.StatusCode, b)
		}
		var out []struct{ ID, Rev, Error string }
		_ = json.Unmarshal([]byte(b), &out)
		for _, o := range out {
			if o.Error != "" {
				t.Fatalf("write %s: %s", o.ID, o.Error)
			}
			ch := pending[o.ID]
			revs[o.ID] = o.Rev
			if ch.del {
				delete(model, o.ID)
				delete(revs, o.ID) // re-created without a rev
			} else {
				model[o.ID] = [2]int{ch.k, ch.v}
			}
		}
	}
	reduce := func(view, q string) int {
		_, b := c.do("GET", "/rr/_design/d/_view/"+view+q, "", nil)
		var r struct{ Rows []struct{ Value int } }
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("%s%s: %v %s", view, q, err, b)
		}
		if len(r.Rows) == 0 {
			return 0
		}
		return r.Rows[0].Value
	}
	check := func(round int) {
		for i := 0; i < 30; i++ {
			lo := rng.IntN(1000)
			hi := lo + rng.IntN(1000-lo+1)
			q := fmt.Sprintf("?startkey=%d&endkey=%d", lo, hi)
			if i%3 == 2 {
				// descending: the same rows, the bounds the other way
				q = fmt.Sprintf("?descending=true&startkey=%d&endkey=%d", hi, lo)
			}
			if i == 0 {
				q = ""
				lo, hi = 0, 1000
			}
			wantSum, wantCnt := 0, 0
			for _, kv := range model {
				if kv[0] >= lo && kv[0] <= hi {
					wantSum += kv[1]
					wantCnt++
				}
			}
			for _, tc := range []struct {
				view string
				want int
			}{{"sum", wantSum}, {"cnt", wantCnt}, {"js", wantSum}} {
				// twice: the second reads the reductions the first kept
				for pass := 0; pass < 2; pass++ {
					if got := reduce(tc.view, q); got != tc.want {
						t.Fatalf("round %d pass %d: %s%s = %d, the docs say %d", round, pass, tc.view, q, got, tc.want)
					}
				}
			}
		}
	}
	// group=true over few keys, many rows each: whole buckets per group
	checkGroups := func(round int) {
		_, b := c.do("GET", "/rr/_design/d/_view/sum2?group=true", "", nil)
		var r struct {
			Rows []struct{ Key, Value int }
		}
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("group: %v %s", err, b)
		}
		want := map[int]int{}
		for _, kv := range model {
			want[kv[0]%7] += kv[1]
		}
		if len(r.Rows) != len(want) {
			t.Fatalf("round %d: %d groups, want %d: %s", round, len(r.Rows), len(want), b)
		}
		for _, row := range r.Rows {
			if want[row.Key] != row.Value {
				t.Fatalf("round %d: group %d = %d, the docs say %d", round, row.Key, row.Value, want[row.Key])
			}
		}
	}
	write(2500)
	check(0)
	checkGroups(0)
	checkGroups(0)
	for round := 1; round < 4; round++ {
		write(400)
		check(round)
		checkGroups(round)
	}
}

// A JavaScript reduce answers a grouped query byte for byte as _sum does
// over the same rows, its groups reduced in batches (one worker call per
// batch on each copy, one per batch of the coordinator's rereduce of
// groups several ranges have): group=true over more groups than a batch
// and a page, group_level=1 over groups read in several chunks (more
// rows than a reduce call takes, on each copy), with limit, skip,
// descending and a range.
func TestViewGroupReduceJSBatched(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/gb?q=3", "", nil)
	const mapFn = `function (doc) { for (var j = 0; j < 3; j++) emit([doc.a, doc.i, j], doc.v); }`
	c.do("PUT", "/gb/_design/d", `{"views":{
		"sum":{"map":"`+mapFn+`","reduce":"_sum"},
		"js":{"map":"`+mapFn+`","reduce":"function (k, v, re) { return sum(v); }"}}}`, nil)
	var docs []string
	for i := range 4000 {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%04d","a":%d,"i":%d,"v":%d}`, i, i%3, i, i%17))
	}
	if resp, b := c.do("POST", "/gb/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("bulk: %d %s", resp.StatusCode, b)
	}
	for _, q := range []string{
		"group=true", "group_level=1", "group_level=2", "group_level=2&descending=true",
		"group=true&limit=5", "group_level=2&skip=300&limit=7", "group=true&skip=2500&limit=600",
		"group_level=2&startkey=[1,1000]&endkey=[2,2000]", "group=true&descending=true&limit=1100",
		"group_level=1&descending=true&limit=2", "group_level=2&limit=1",
	} {
		_, want := c.do("GET", "/gb/_design/d/_view/sum?"+q, "", nil)
		resp, got := c.do("GET", "/gb/_design/d/_view/js?"+q, "", nil)
		if resp.StatusCode != 200 || got != want {
			t.Errorf("%s: %d, JavaScript reduce\n%.300s\n_sum\n%.300s", q, resp.StatusCode, got, want)
		}
		if !strings.Contains(want, `"value"`) {
			t.Errorf("%s: no rows: %.300s", q, want)
		}
	}
}
