package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// TestRunMango runs the mango workload against a real server and checks
// that every phase ran and reported what it saw. No timings are asserted:
// the run checks its answers itself (and the plans with _explain), so a
// run that returns without an error measured a server that answered every
// find right, on the index.
func TestRunMango(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and indexes a real database")
	}
	s := testserver.Start(t)
	skipWithoutMango(t, s)
	u := adminURL(t, s.URL)
	const docs = 2100 // r = 7 matches docs 7, 1007 and 2007
	cfg := Config{URL: u.String(), Docs: docs, DocSize: DocSmall, BatchSize: 300, Lookups: 40, Workload: WorkloadMango}
	var out strings.Builder
	res, err := RunMango(context.Background(), cfg, &out, io.Discard)
	if err != nil {
		t.Fatalf("RunMango: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if res.LoadHz <= 0 || res.BuildHz <= 0 || res.BuildSec < 0 || res.IndexMs <= 0 || res.BuildTimeouts != 0 {
		t.Errorf("load or build: %+v", res)
	}
	if res.Finds != 40 || res.Ranges != 10 || res.EqHz <= 0 || res.EqP50Ms <= 0 || res.EqP99Ms < res.EqP50Ms {
		t.Errorf("equality finds: %+v", res)
	}
	// 2100 docs in 100 groups: about 21 a group, so most ranges return
	// fewer than 25 docs, none more
	if res.RangeHz <= 0 || res.RangeP99Ms < res.RangeP50Ms || res.RangeDocs <= 0 || res.RangeDocs > int64(res.Ranges*mangoLimit) {
		t.Errorf("range finds: %+v", res)
	}
	// the ceiling: the first range find's answer from a bare server,
	// checked as the server's
	if res.RangeCeilingHz <= 0 || res.RangeCeilingBytes < 300 || res.RangeCeilingServer != CeilingChildProcess ||
		res.RangeCeilingRatio != math.Round(res.RangeHz/res.RangeCeilingHz*1000)/1000 {
		t.Errorf("range ceiling: %v q/s, %d bytes, server %q, ratio %v", res.RangeCeilingHz, res.RangeCeilingBytes,
			res.RangeCeilingServer, res.RangeCeilingRatio)
	}
	if res.UnindexedMs <= 0 || res.UnindexedDocs != 3 {
		t.Errorf("unindexed find: %v ms, %d docs, want 3", res.UnindexedMs, res.UnindexedDocs)
	}
	if res.DocBytes < 300 || res.Docs != docs || res.WallSec <= 0 || !strings.HasPrefix(res.DB, DBPrefix+"mango-") {
		t.Errorf("parameters: %+v", res)
	}
	resp := s.Do(t, "GET", "/_all_dbs", nil)
	defer resp.Body.Close()
	var dbs []string
	if err := json.NewDecoder(resp.Body).Decode(&dbs); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		if strings.HasPrefix(db, DBPrefix) {
			t.Errorf("database %s left behind", db)
		}
	}

	// --json prints the one object
	cfg.JSON, cfg.Docs, cfg.Lookups = true, 50, 4
	out.Reset()
	if _, err := RunMango(context.Background(), cfg, &out, io.Discard); err != nil {
		t.Fatalf("RunMango --json: %v", err)
	}
	var j MangoResult
	if err := json.Unmarshal([]byte(out.String()), &j); err != nil || j.Docs != 50 || j.EqHz <= 0 || j.UnindexedDocs != 1 {
		t.Errorf("--json: %+v, %v\n%s", j, err, out.String())
	}
}

// skipWithoutMango skips the test when the server has no _index yet.
func skipWithoutMango(t *testing.T, s *testserver.Server) {
	t.Helper()
	s.Do(t, "PUT", "/mangoprobe", nil).Body.Close()
	resp := s.Do(t, "POST", "/mangoprobe/_index", `{"index":{"fields":["a"]}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.Do(t, "DELETE", "/mangoprobe", nil).Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode >= 500 {
		t.Skipf("no _index in this build: %d %s", resp.StatusCode, b)
	}
}

// The queries are what the issue asks, and each range find's expected
// docs are the group's next ones by v.
func TestMangoQueries(t *testing.T) {
	const n = 500
	m := &mangoRun{runner: &runner{cfg: Config{Docs: n}}}
	rng := newPCG(17)
	m.g, m.v = make([]int, n), rng.Perm(n)
	m.byGroup = make([][]int, 100)
	for i := range n {
		m.g[i] = rng.IntN(3) // few groups, so some ranges hit the limit
		m.byGroup[m.g[i]] = append(m.byGroup[m.g[i]], i)
	}
	for _, docs := range m.byGroup {
		slices.SortFunc(docs, func(a, b int) int { return m.v[a] - m.v[b] })
	}
	var eq struct {
		Selector map[string]int `json:"selector"`
		Fields   []string       `json:"fields"`
	}
	if err := json.Unmarshal(m.eqBody(42), &eq); err != nil || eq.Selector["g"] != m.g[42] || eq.Selector["v"] != m.v[42] ||
		len(eq.Selector) != 2 || !slices.Equal(eq.Fields, []string{"_id", "g", "v"}) {
		t.Errorf("equality body %s: %+v, %v", m.eqBody(42), eq, err)
	}
	limited, short := 0, 0
	for d := range n {
		body, want := m.rangeBody(d)
		var rq struct {
			Selector struct {
				G int            `json:"g"`
				V map[string]int `json:"v"`
			} `json:"selector"`
			Sort  []map[string]string `json:"sort"`
			Limit int                 `json:"limit"`
		}
		if err := json.Unmarshal(body, &rq); err != nil || rq.Selector.G != m.g[d] || rq.Selector.V["$gt"] != m.v[d] || rq.Limit != 25 ||
			len(rq.Sort) != 2 || rq.Sort[0]["g"] != "asc" || rq.Sort[1]["v"] != "asc" {
			t.Fatalf("range body %s: %+v, %v", body, rq, err)
		}
		// brute force: the group's docs above v[d], by v, 25 at most
		var all []int
		for i := range n {
			if m.g[i] == m.g[d] && m.v[i] > m.v[d] {
				all = append(all, i)
			}
		}
		slices.SortFunc(all, func(a, b int) int { return m.v[a] - m.v[b] })
		if len(all) > 25 {
			all, limited = all[:25], limited+1
		} else {
			short++
		}
		if !slices.Equal(want, all) {
			t.Fatalf("range from doc %d: want %v, brute force %v", d, want, all)
		}
	}
	if limited == 0 || short == 0 {
		t.Errorf("ranges: %d limited, %d short; want both", limited, short)
	}
	body, want := m.unindexedBody()
	if !bytes.Contains(body, []byte(`{"selector":{"r":7},`)) || !slices.Equal(want, []int{7}) || !bytes.Contains(body, []byte(`"limit":2`)) {
		t.Errorf("unindexed: %s, %v", body, want)
	}
	var doc struct {
		ID      string `json:"_id"`
		G, V, R int
	}
	gen, err := newDocGen(DocMedium, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := appendMangoDoc(nil, gen, 1007, 5, 123)
	if err := json.Unmarshal(b, &doc); err != nil || doc.ID != "doc00001007" || doc.G != 5 || doc.V != 123 || doc.R != 7 {
		t.Errorf("doc: %+v, %v", doc, err)
	}
	if got := topKeys(t, b)[:5]; !slices.Equal(got, []string{"_id", "g", "v", "r", "random_val"}) {
		t.Errorf("doc keys %v", got)
	}
}

// The checks that make a run's figures trustworthy refuse wrong answers.
func TestMangoChecks(t *testing.T) {
	g := []int{1, 1, 2, 1}
	v := []int{30, 10, 20, 40}
	doc := func(i int, extra string) string {
		return `{"_id":"` + docID(i) + `","_rev":"1-a","g":` + strconv.Itoa(g[i]) + `,"v":` + strconv.Itoa(v[i]) + extra + `}`
	}
	ans := func(docs ...string) []byte {
		return []byte("{\"docs\":[\r\n" + strings.Join(docs, ",\r\n") + "\r\n],\r\n\"bookmark\": \"x\"}\n")
	}
	only := func(i int) string {
		return `{"_id":"` + docID(i) + `","g":` + strconv.Itoa(g[i]) + `,"v":` + strconv.Itoa(v[i]) + `}`
	}
	big := `,"tags":["a","b\"]"],"o":{"v":99,"g":[1,{"_id":"x"}]},"array_ints":[1,2,3]`
	for _, c := range []struct {
		body string
		want []int
		only bool
		ok   bool
	}{
		{string(ans(only(1))), []int{1}, true, true},
		{string(ans(only(1))), []int{0}, true, false},                                          // another doc
		{string(ans(doc(1, ""))), []int{1}, true, false},                                       // fields not applied
		{string(ans()), []int{1}, true, false},                                                 // none
		{string(ans(only(1), only(1))), []int{1}, true, false},                                 // two
		{string(ans(doc(1, big), doc(0, big), doc(3, "")[:20])), []int{1, 0, 3}, false, false}, // truncated
		{string(ans(doc(1, big), doc(0, big), doc(3, ""))), []int{1, 0, 3}, false, true},
		{string(ans(doc(0, big), doc(1, big), doc(3, ""))), []int{1, 0, 3}, false, false}, // order
		{string(ans(doc(1, big), doc(0, big))), []int{1, 0, 3}, false, false},             // one short
		{`{"docs":[{"_id":"doc00000001","g":1,"v":"10"}],"bookmark":"x"}`, []int{1}, false, false},
		{`{"docs":[{"_id":"doc00000001","g":1}],"bookmark":"x"}`, []int{1}, false, false},
		{`{"error":"not_found","reason":"x"}`, []int{}, false, false},
		{`{"docs":[],"bookmark":"nil"}`, []int{}, false, true},
		{`{"docs":[],"bookmark":"nil"} x`, []int{}, false, false},
	} {
		if _, err := checkFindDocs([]byte(c.body), c.want, g, v, c.only); (err == nil) != c.ok {
			t.Errorf("checkFindDocs(%s, %v) = %v", c.body, c.want, err)
		}
	}
	a, err := parseFind([]byte(`{"docs":[{"_id":"doc00000007","r":7}],"bookmark":"b","warning":"No matching index found, create an index to optimize query time.",` +
		`"execution_stats":{"total_keys_examined":0,"total_docs_examined":20000,"results_returned":1}}`))
	if err != nil || len(a.docs) != 1 || a.docs[0].r != 7 || a.docs[0].has != hasID|hasR || a.examined != 20000 || !strings.HasPrefix(a.warning, "No matching index") {
		t.Errorf("parseFind: %+v, %v", a, err)
	}

	body := []byte(`{}`)
	for _, c := range []struct {
		explain, want string
		ok            bool
	}{
		{`{"index":{"ddoc":"_design/bench-mango","name":"bench-g-v","type":"json","def":{"fields":[{"g":"asc"},{"v":"asc"}]}}}`, mangoIndexName, true},
		{`{"index":{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}}}`, mangoIndexName, false},
		{`{"index":{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}}}`, "_all_docs", true},
		{`{"index":{"ddoc":"_design/bench-mango","name":"bench-g-v","type":"json"}}`, "_all_docs", false},
		{`{"error":"x"`, "_all_docs", false},
	} {
		if err := checkExplain([]byte(c.explain), body, c.want); (err == nil) != c.ok {
			t.Errorf("checkExplain(%s, %s) = %v", c.explain, c.want, err)
		}
	}
}

func TestMangoResultText(t *testing.T) {
	r := &MangoResult{URL: "http://h:1", Docs: 20000, DocSize: DocMedium, DocBytes: 14650, Finds: 2000, Ranges: 500, Concurrency: 4,
		ServerVendor: "The Apache Software Foundation", ServerVersion: "3.5.2",
		LoadHz: 5000, LoadSec: 4, IndexMs: 12, BuildHz: 1100, BuildSec: 18.2, EqHz: 260, EqP50Ms: 10, EqP99Ms: 12,
		RangeHz: 50, RangeP50Ms: 70, RangeP99Ms: 120, RangeDocs: 12500, RangeCeilingHz: 1600, RangeCeilingP99Ms: 5, RangeCeilingBytes: 365000,
		RangeCeilingServer: CeilingChildProcess, RangeCeilingRatio: 0.031, UnindexedMs: 3100, UnindexedDocs: 20, UnindexedExamined: 20000}
	var b strings.Builder
	r.WriteText(&b)
	for _, want := range []string{
		"mango: 20000 docs, doc size medium (~14650 bytes), server The Apache Software Foundation 3.5.2, http://h:1",
		"load (_bulk_docs):           5000 docs/s (4.00s)",
		"index [g, v], first _find:   1100 docs/s (18.20s, POST _index 12.0ms)",
		"equality finds, 3 fields:    260 q/s, p50 10.0ms, p99 12.0ms (2000 finds, 4 clients)",
		"range + sort + limit 25:     50 q/s, p50 70.0ms, p99 120ms (500 finds, 12500 docs, 4 clients)",
		"  its ceiling (bare server):  1600 q/s, p99 5.00ms (one answer of 365000 bytes, child process; range finds at 3% of it)",
		"unindexed find (whole db):   3100ms (20 docs found, 20000 examined)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	r.BuildTimeouts, r.BuildFirstTimeoutSec, r.UnindexedExamined = 1, 60, 0
	b.Reset()
	r.WriteText(&b)
	if !strings.Contains(b.String(), "1 x 500 timeout, the first after 60.0s)") || !strings.Contains(b.String(), "examined: not reported") {
		t.Errorf("text with a timeout:\n%s", b.String())
	}
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"build_hz":1100`, `"eq_hz":260`, `"eq_p99_ms":12`, `"range_hz":50`, `"range_p99_ms":120`, `"unindexed_ms":3100`, `"unindexed_docs":20`} {
		if !bytes.Contains(j, []byte(key)) {
			t.Errorf("JSON lacks %s: %s", key, j)
		}
	}
}

func TestMangoConfig(t *testing.T) {
	if _, err := RunMango(context.Background(), Config{URL: "http://127.0.0.1:1", Lookups: -1}, nil, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("RunMango with --lookups -1: %v", err)
	}
}
