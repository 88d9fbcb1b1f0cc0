package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// TestRunViews runs the views workload against a real server and checks
// that every phase ran and answered what was loaded. No timings are
// asserted: the run checks its answers itself, so a run that returns
// without an error measured a server that indexed every doc.
func TestRunViews(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and indexes a real database")
	}
	s := testserver.Start(t)
	skipWithoutViews(t, s)
	u := adminURL(t, s.URL)
	cfg := Config{URL: u.String(), Docs: 200, DocSize: DocSmall, BatchSize: 50, Lookups: 20, NewDocs: 30, Workload: WorkloadViews}
	var out strings.Builder
	res, err := RunViews(context.Background(), cfg, &out, io.Discard)
	if err != nil {
		t.Fatalf("RunViews: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	checkViewsResult(t, res)
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
}

// checkViewsResult checks that every phase of a run of 200 docs (30 new
// ones) ran and reported what it saw.
func checkViewsResult(t *testing.T, res *ViewsResult) {
	t.Helper()
	if res.LoadHz <= 0 || res.BuildHz <= 0 || res.LookupHz <= 0 || res.LookupP99Ms <= 0 { // the seconds round to 0 on a fast server
		t.Errorf("load, build or lookups did not run: %+v", res)
	}
	if res.StreamRows != 200 || res.StreamHz <= 0 {
		t.Errorf("stream: %d rows at %v/s, want 200", res.StreamRows, res.StreamHz)
	}
	// 200 draws of g in 0..99 leave some out; of [g, n] pairs, few repeat
	if res.SumGroups < 50 || res.SumGroups > 100 || res.JSGroups != res.SumGroups || res.SumGroupMs <= 0 || res.JSGroupMs <= 0 {
		t.Errorf("group results: %d _sum groups in %vms, %d JS groups in %vms", res.SumGroups, res.SumGroupMs, res.JSGroups, res.JSGroupMs)
	}
	if res.JSExactGroups < 150 || res.JSExactGroups > 200 || res.JSExactTimedOut || res.JSExactMs <= 0 {
		t.Errorf("group=true on the JS reduce: %d groups in %vms (timed out: %v)", res.JSExactGroups, res.JSExactMs, res.JSExactTimedOut)
	}
	if res.NewDocsQueryMs <= 0 || res.WritesBefore == 0 || res.WritesDuring == 0 || res.Build2Sec <= 0 || res.Build2Docs < 230 {
		t.Errorf("new docs or writer phases did not run: %+v", res)
	}
	if res.BuildTimeouts != 0 {
		t.Errorf("a build of 200 docs answered %d timeouts", res.BuildTimeouts)
	}
}

// skipWithoutViews skips the test when the server cannot answer a view
// query yet (views answer 404 not_found or 500 until the view engine lands).
func skipWithoutViews(t *testing.T, s *testserver.Server) {
	t.Helper()
	put := func(path, body string) {
		resp := s.Do(t, "PUT", path, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
			t.Fatalf("PUT %s: %d %s", path, resp.StatusCode, b)
		}
	}
	put("/viewprobe", "")
	put("/viewprobe/_design/x", `{"views":{"v":{"map":"function(doc){ emit(doc._id, null); }"}}}`)
	resp := s.Do(t, "GET", "/viewprobe/_design/x/_view/v", nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	if (resp.StatusCode == http.StatusNotFound && e.Error == "not_found") || resp.StatusCode == http.StatusInternalServerError {
		t.Skip("views not in this build yet")
	}
	s.Do(t, "DELETE", "/viewprobe", nil).Body.Close()
}

func TestViewsConfigFlags(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if cfg.Lookups != 0 || cfg.NewDocs != 0 {
		t.Errorf("defaults: lookups %d, new docs %d, want 0 (the workload's own defaults)", cfg.Lookups, cfg.NewDocs)
	}
	if err := fs.Parse([]string{"--workload", "views", "--lookups", "20", "--new-docs", "30", "--concurrency", "8", "--doc-size", "small"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Workload != WorkloadViews || cfg.Lookups != 20 || cfg.NewDocs != 30 || cfg.Concurrency != 8 || cfg.DocSize != DocSmall {
		t.Errorf("parsed %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []Config{{Lookups: -1}, {NewDocs: -1}} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", bad, err)
		}
	}
	if _, err := RunViews(context.Background(), Config{URL: "http://127.0.0.1:1", Lookups: -1}, nil, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("RunViews with --lookups -1: %v", err)
	}
}

// The views docs are fabric_bench's, whole and in its order, after _id, k,
// g and n.
func TestViewsDocGen(t *testing.T) {
	for _, size := range []string{DocSmall, DocMedium, DocLarge} {
		gen, err := newDocGen(size, 1)
		if err != nil {
			t.Fatal(err)
		}
		plain := gen.appendDoc(nil, []byte("x"), "")
		doc := appendViewDoc(nil, gen, 42, 7, 999)
		var fields struct {
			ID string `json:"_id"`
			K  string `json:"k"`
			G  *int   `json:"g"`
			N  *int   `json:"n"`
		}
		if err := json.Unmarshal(doc, &fields); err != nil {
			t.Fatalf("%s: %v\n%.300s", size, err, doc)
		}
		if fields.ID != "doc00000042" || fields.K != "k00000042" || fields.G == nil || *fields.G != 7 || fields.N == nil || *fields.N != 999 {
			t.Errorf("%s: fields %+v", size, fields)
		}
		want := append([]string{"_id", "k", "g", "n"}, topKeys(t, plain)[1:]...)
		if got := topKeys(t, doc); !slices.Equal(got, want) {
			t.Errorf("%s: keys %v\nwant %v", size, got, want)
		}
		// doc 0 and the largest index keep the 8-digit padding's order
		if a, b := appendPad8(nil, 9), appendPad8(nil, 10); bytes.Compare(a, b) >= 0 || len(a) != 8 {
			t.Errorf("padding: %s, %s", a, b)
		}
	}
}

func TestViewsDDoc(t *testing.T) {
	var dd struct {
		Language string `json:"language"`
		Views    map[string]struct {
			Map    string `json:"map"`
			Reduce string `json:"reduce"`
		} `json:"views"`
	}
	if err := json.Unmarshal(viewsDDoc("2"), &dd); err != nil {
		t.Fatal(err)
	}
	if dd.Language != "javascript" || len(dd.Views) != 3 || dd.Views["by_group2"].Reduce != "_sum" ||
		!strings.Contains(dd.Views["by_n2"].Reduce, "rereduce") || dd.Views["by_k2"].Reduce != "" || dd.Views["by_k2"].Map == "" {
		t.Errorf("design doc: %+v", dd)
	}
	if bytes.Equal(viewsDDoc(""), viewsDDoc("2")) {
		t.Error("the second design doc must differ from the first (another signature)")
	}
}

// The checks that make a run's figures trustworthy refuse wrong answers.
func TestViewsChecks(t *testing.T) {
	const doc = `{"_id":"doc1","_rev":"1-a","k":"k1"}`
	for body, ok := range map[string]bool{
		`{"total_rows":3,"offset":1,"rows":[{"id":"doc1","key":"k1","value":null,"doc":` + doc + `}]}`:         true,
		`{"total_rows":3,"offset":1,"rows":[{"id":"doc1","key":"k1","value":null,"doc": ` + doc + `}]}`:        true,
		`{"total_rows":3,"offset":1,"rows":[{"id":"doc1","key":"k1","value":null}]}`:                           false,
		`{"total_rows":3,"offset":1,"rows":[{"id":"doc1","key":"k1","value":null,"doc":null}]}`:                false,
		`{"total_rows":3,"offset":1,"rows":[]}`:                                                                false,
		`{"total_rows":3,"offset":1,"rows":[{"id":"doc1","doc":` + doc + `},{"id":"doc1","doc":` + doc + `}]}`: false,
		`{"total_rows":3,"offset":1,"rows":[{"id":"doc1","doc":` + doc:                                         false,
	} {
		if err := checkLookup([]byte(body)); (err == nil) != ok {
			t.Errorf("checkLookup(%s) = %v", body, err)
		}
	}

	sums := map[int]float64{0: 10, 5: 3}
	if n, err := checkSumGroups([]byte(`{"rows":[{"key":0,"value":10},{"key":5,"value":3}]}`), sums); err != nil || n != 2 {
		t.Errorf("good _sum groups: %d, %v", n, err)
	}
	for _, bad := range []string{`{"rows":[{"key":0,"value":10}]}`, `{"rows":[{"key":0,"value":10},{"key":5,"value":4}]}`,
		`{"rows":[{"key":0,"value":10},{"key":6,"value":3}]}`, `{"error":"x"`} {
		if _, err := checkSumGroups([]byte(bad), sums); err == nil {
			t.Errorf("checkSumGroups(%s) = nil", bad)
		}
	}

	aggs := map[string]jsAgg{"[1 2]": {2, 2}, "[3 4]": {1, 4}}
	if n, err := checkJSGroups([]byte(`{"rows":[{"key":[1,2],"value":{"count":2,"max":2}},{"key":[3,4],"value":{"count":1,"max":4}}]}`), "group=true", aggs); err != nil || n != 2 {
		t.Errorf("good JS groups: %d, %v", n, err)
	}
	if n, err := checkJSGroups([]byte(`{"rows":[{"key":[1],"value":{"count":3,"max":20}}]}`), "group_level=1", map[string]jsAgg{"[1]": {3, 20}}); err != nil || n != 1 {
		t.Errorf("good group_level=1 groups: %d, %v", n, err)
	}
	for _, bad := range []string{
		`{"rows":[{"key":[1,2],"value":{"count":1,"max":2}},{"key":[3,4],"value":{"count":1,"max":4}}]}`, // count
		`{"rows":[{"key":[1,2],"value":{"count":2,"max":1}},{"key":[3,4],"value":{"count":1,"max":4}}]}`, // max
		`{"rows":[{"key":[1,2],"value":{"count":2,"max":2}}]}`,                                           // a group missing
		`{"rows":[{"key":[1],"value":{"count":2,"max":2}},{"key":[3,4],"value":{"count":1,"max":4}}]}`,   // wrong level
		`{"rows":[{"key":[1,2],"value":2},{"key":[3,4],"value":1}]}`,                                     // not the reduce's shape
	} {
		if _, err := checkJSGroups([]byte(bad), "group=true", aggs); err == nil {
			t.Errorf("checkJSGroups(%s) = nil", bad)
		}
	}
}

// CouchDB answers a first query 500 timeout after 60 s while the build goes
// on; the build phase counts it and asks again instead of failing.
func TestViewsBuildTimeout(t *testing.T) {
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/db/_design/bench":
			writeJSON(w, http.StatusCreated, map[string]any{"ok": true})
		case r.Method == http.MethodGet && r.URL.Path == "/db/_design/bench/_view/by_k":
			if gets.Add(1) <= 2 {
				couchErr(w, http.StatusInternalServerError, "timeout", "The request could not be processed in a reasonable amount of time.")
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"total_rows": 1, "offset": 0, "rows": []any{}})
		case r.URL.Path == "/db/_design/other/_view/by_k":
			couchErr(w, http.StatusInternalServerError, "unknown_error", "function_clause")
		default:
			couchErr(w, http.StatusNotFound, "not_found", "missing")
		}
	}))
	defer srv.Close()
	c, err := newClient(srv.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	v := &viewsRun{runner: &runner{c: c, prog: &progress{w: io.Discard}}}
	b, err := v.build(context.Background(), "/db/_design/bench", "")
	if err != nil || b.timeouts != 2 || b.firstTimeout <= 0 || b.elapsed < b.firstTimeout {
		t.Errorf("build: %+v, %v", b, err)
	}
	// any other 500 is an error
	if _, err := v.build(context.Background(), "/db/_design/other", ""); !errors.Is(err, ErrStatus) {
		t.Errorf("build with a 404 ddoc PUT: %v", err)
	}
}

func TestViewsResultText(t *testing.T) {
	r := &ViewsResult{URL: "http://h:1", Docs: 20000, DocSize: DocMedium, DocBytes: 14650, Lookups: 2000, Concurrency: 4, NewDocs: 1000,
		ServerVendor: "The Apache Software Foundation", ServerVersion: "3.5.2",
		LoadHz: 5000, LoadSec: 4, BuildHz: 330, BuildSec: 60.6, BuildTimeouts: 1, BuildFirstTimeoutSec: 60,
		LookupHz: 215, LookupP50Ms: 4, LookupP99Ms: 13, StreamRows: 20000, StreamHz: 75000, StreamSec: 0.27,
		SumGroupMs: 26, SumGroups: 100, JSGroupMs: 1600, JSGroups: 100, JSExactMs: 60000, JSExactTimedOut: true, NewDocsQueryMs: 1600,
		WritesBefore: 900, BeforeP99Ms: 10, WritesDuring: 100, DuringP99Ms: 15, P99Ratio: 1.5, Build2Docs: 21900, Build2Hz: 330}
	var b strings.Builder
	r.WriteText(&b)
	for _, want := range []string{
		"views: 20000 docs, doc size medium (~14650 bytes), server The Apache Software Foundation 3.5.2",
		"first query (index build):  330 docs/s (60.60s, 1 x 500 timeout, the first after 60.0s)",
		"key lookups, include_docs:  215 q/s, p50 4.00ms, p99 13.0ms (2000 lookups, 4 clients)",
		"whole-view stream:          75000 rows/s (20000 rows",
		"group=true, _sum:           26.0ms (100 groups)",
		"group_level=1, JS reduce:   1600ms (100 groups of [g, n] keys)",
		"group=true, JS reduce:      500 timeout after 60000ms",
		"1000 new docs, then a query: 1600ms",
		"p99 during/before 1.50",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains((&ViewsResult{JSExactGroups: 7}).text(), "timeout") || !strings.Contains((&ViewsResult{JSExactGroups: 7}).text(), "(7 groups, one per") {
		t.Error("a run without timeouts mentions them")
	}
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"build_hz":330`, `"build_timeouts":1`, `"lookup_p99_ms":13`, `"stream_hz":75000`, `"js_group_ms":1600`, `"js_exact_timed_out":true`,
		`"new_docs_query_ms":1600`, `"write_p99_ratio":1.5`} {
		if !bytes.Contains(j, []byte(key)) {
			t.Errorf("JSON lacks %s: %s", key, j)
		}
	}
}

func (r *ViewsResult) text() string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}
