package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// TestRunPartitions runs the partitions workload against a real settee.
// Until settee has partitioned databases (issue 19) it is skipped: the
// probe, or the run itself, finds none. No timings are asserted: the run
// checks its answers itself (and the finds' plans with _explain), so a run
// that returns without an error measured a server that answered every
// query right.
func TestRunPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and indexes two real databases")
	}
	s := testserver.Start(t)
	skipWithoutPartitions(t, s)
	u := adminURL(t, s.URL)
	runPartitionsSmall(t, u.String())
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

// TestRunPartitionsCouchDB runs the workload against Apache CouchDB 3.5.2,
// the reference: $PARTITIONS_COUCHDB_URL (http://user:pw@host:port), else
// one testcouch starts (skipped when there is none).
func TestRunPartitionsCouchDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no live CouchDB")
	}
	base := couchURL(t, "PARTITIONS_COUCHDB_URL")
	runPartitionsSmall(t, base)
}

// runPartitionsSmall runs 600 small docs in 12 partitions (50 each) and
// checks that every phase ran and reported what it saw, then --json.
func runPartitionsSmall(t *testing.T, base string) {
	t.Helper()
	cfg := Config{URL: base, Docs: 600, Partitions: 12, DocSize: DocSmall, BatchSize: 200, Lookups: 30, Workload: WorkloadPartitions}
	var out strings.Builder
	res, err := RunPartitions(context.Background(), cfg, &out, io.Discard)
	if errors.Is(err, ErrNoPartitions) {
		t.Skipf("no partitioned databases on this server: %v", err)
	}
	if err != nil {
		t.Fatalf("RunPartitions: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if res.Q != PartitionsQ || res.Partitions != 12 || res.Docs != 600 || res.Lookups != 30 || res.WallSec <= 0 ||
		!strings.HasPrefix(res.DB, DBPrefix+"partitioned-") || !strings.HasPrefix(res.GlobalDB, DBPrefix+"global-") {
		t.Errorf("parameters: %+v", res)
	}
	if res.LoadHz <= 0 || res.GlobalLoadHz <= 0 {
		t.Errorf("loads: %+v", res)
	}
	for name, b := range map[string]PartitionsBuild{"view": res.ViewBuild, "global view": res.GlobalViewBuild,
		"mango": res.MangoBuild, "global mango": res.GlobalMangoBuild} {
		if b.Hz <= 0 || b.Timeouts != 0 || b.Queries < 1 || (strings.HasPrefix(name, "global") && b.Queries != 1) {
			t.Errorf("%s build: %+v", name, b)
		}
	}
	// 12 partitions over 8 ranges: more than one range, no more than 8;
	// all 12 partitions when the server has no _shards/{docid}
	if q := res.ViewBuild.Queries; (q < 2 || q > PartitionsQ) && q != 12 || res.MangoBuild.Queries != q {
		t.Errorf("first queries of the partitioned builds: %+v, %+v", res.ViewBuild, res.MangoBuild)
	}
	for name, q := range map[string]PartitionsQuery{"view": res.View, "_all_docs": res.AllDocs, "_find": res.Find} {
		for _, s := range []PartitionsSide{q.Partitioned, q.Global} {
			if s.Hz <= 0 || s.P50Ms <= 0 || s.P99Ms < s.P50Ms {
				t.Errorf("%s: %+v", name, q)
			}
		}
		if q.Ratio <= 0 || q.Partitioned.Rows != q.Global.Rows {
			t.Errorf("%s: ratio %v, rows %d and %d", name, q.Ratio, q.Partitioned.Rows, q.Global.Rows)
		}
	}
	// every partition holds 50 docs
	if res.AllDocs.Partitioned.Rows != 30*50 || res.View.Partitioned.Rows != res.Find.Partitioned.Rows || res.View.Partitioned.Rows == 0 {
		t.Errorf("rows: view %d, _all_docs %d, _find %d", res.View.Partitioned.Rows, res.AllDocs.Partitioned.Rows, res.Find.Partitioned.Rows)
	}

	// --json prints the one object
	cfg.JSON, cfg.Docs, cfg.Lookups = true, 40, 4
	out.Reset()
	if _, err := RunPartitions(context.Background(), cfg, &out, io.Discard); err != nil {
		t.Fatalf("RunPartitions --json: %v", err)
	}
	var j PartitionsResult
	if err := json.Unmarshal([]byte(out.String()), &j); err != nil || j.Docs != 40 || j.View.Global.Hz <= 0 || j.Find.Ratio <= 0 {
		t.Errorf("--json: %+v, %v\n%s", j, err, out.String())
	}
}

// skipWithoutPartitions skips the test when the server has no partitioned
// databases yet: its welcome does not list the feature, it refuses
// ?partitioned=true, it creates a database that is not partitioned, or it
// does not answer the partition queries the workload sends (settee gets
// them a part at a time: the test runs once they are all there).
func skipWithoutPartitions(t *testing.T, s *testserver.Server) {
	t.Helper()
	resp := s.Do(t, "GET", "/", nil)
	var welcome struct {
		Features []string `json:"features"`
	}
	err := json.NewDecoder(resp.Body).Decode(&welcome)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(welcome.Features, "partitioned") {
		t.Skipf("no partitioned databases in this build: the welcome's features are %v", welcome.Features)
	}
	do := func(method, path, body string) (int, []byte) {
		var b any
		if body != "" {
			b = body
		}
		resp := s.Do(t, method, path, b)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	st, b := do("PUT", "/partprobe?partitioned=true", "")
	defer func() { do("DELETE", "/partprobe", "") }()
	if st == http.StatusBadRequest {
		t.Skipf("no partitioned databases in this build: PUT ?partitioned=true: %d %s", st, b)
	}
	if _, b = do("GET", "/partprobe", ""); !bytes.Contains(b, []byte(`"partitioned":true`)) {
		t.Skipf("no partitioned databases in this build: GET /partprobe: %s", b)
	}
	do("PUT", "/partprobe/x:a", `{"g":1}`)
	do("PUT", "/partprobe/_design/d", `{"options":{"partitioned":true},"views":{"v":{"map":"function(doc){ emit(doc.g, null); }"}}}`)
	do("POST", "/partprobe/_index", `{"index":{"fields":["g"]},"partitioned":true}`)
	var missing []string
	for _, q := range []struct{ method, path, body string }{
		{"GET", "/partprobe/_partition/x", ""},
		{"GET", "/partprobe/_partition/x/_all_docs", ""},
		{"GET", "/partprobe/_partition/x/_design/d/_view/v", ""},
		{"POST", "/partprobe/_partition/x/_find", `{"selector":{"g":1}}`},
		{"POST", "/partprobe/_partition/x/_explain", `{"selector":{"g":1}}`},
	} {
		if st, b := do(q.method, q.path, q.body); st != http.StatusOK {
			missing = append(missing, fmt.Sprintf("%s %s: %d %.100s", q.method, q.path, st, bytes.TrimSpace(b)))
		}
	}
	if len(missing) > 0 {
		t.Skipf("partition queries not in this build yet: %s", strings.Join(missing, "; "))
	}
}

// A server that takes ?partitioned=true but creates a global database, as
// settee did before issue 19, is reported as ErrNoPartitions, and both
// databases are deleted.
func TestPartitionsNotPartitioned(t *testing.T) {
	f := newFakeCouch(t, "")
	cfg := Config{URL: f.url("", ""), Docs: 10, Partitions: 2, DocSize: DocSmall}
	_, err := RunPartitions(context.Background(), cfg, io.Discard, io.Discard)
	if !errors.Is(err, ErrNoPartitions) {
		t.Fatalf("RunPartitions against a server without partitions: %v", err)
	}
	if len(f.dbs) != 0 || len(f.deleted) != 2 {
		t.Errorf("databases left %v, deleted %d", f.dbs, len(f.deleted))
	}
	if f.createQuery.Get("q") != "8" {
		t.Errorf("created with %v, want q=8", f.createQuery)
	}

	// a 400 to ?partitioned=true too, and the global db is not created
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partitioned") == "true" {
			couchErr(w, http.StatusBadRequest, "bad_request", "Invalid `partitioned` parameter")
			return
		}
		couchErr(w, http.StatusNotFound, "not_found", "missing")
	}))
	defer refuse.Close()
	cfg.URL = refuse.URL
	if _, err := RunPartitions(context.Background(), cfg, io.Discard, io.Discard); !errors.Is(err, ErrNoPartitions) || !errors.Is(err, ErrStatus) {
		t.Errorf("RunPartitions against a 400: %v", err)
	}
}

func TestPartitionsConfig(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--workload", "partitions", "--partitions", "7", "--lookups", "9"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Workload != WorkloadPartitions || cfg.Partitions != 7 || cfg.Lookups != 9 {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range []Config{
		{URL: "http://127.0.0.1:1", Partitions: -1},
		{URL: "http://127.0.0.1:1", Lookups: -1},
		// 4000 docs a partition: more than a partition query answers
		{URL: "http://127.0.0.1:1", Docs: 20000, Partitions: 5},
	} {
		if _, err := RunPartitions(context.Background(), bad, nil, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("RunPartitions(%+v) = %v, want ErrConfig", bad, err)
		}
	}
}

// newPartitionsRun is the state RunPartitions sets up, without a server.
func newPartitionsRun(docs, parts, lookups int) *partitionsRun {
	cfg := Config{Docs: docs, Partitions: parts, Lookups: lookups}
	p := &partitionsRun{cfg: cfg, part: &runner{dbPath: "/pdb"}, global: &runner{dbPath: "/gdb"}}
	rng := newPCG(19)
	p.g, p.n = make([]int, docs), make([]int, docs)
	p.byPart = make([][]int, parts)
	for i := range docs {
		p.g[i], p.n[i] = rng.IntN(100), rng.IntN(1000)
		p.byPart[i%parts] = append(p.byPart[i%parts], i)
	}
	return p
}

// The queries are the same on both dbs, and what each must answer is what
// brute force over the docs says.
func TestPartitionsQueries(t *testing.T) {
	p := newPartitionsRun(1000, 10, 200)
	qs := p.queries()
	for _, k := range []pqueries{qs.view, qs.allDocs, qs.find} {
		if len(k.part) != 200 || len(k.global) != 200 {
			t.Fatalf("%d and %d queries, want 200", len(k.part), len(k.global))
		}
	}
	seen := map[int]bool{}
	for i := range 200 {
		v, vg := qs.view.part[i], qs.view.global[i]
		k := v.part
		seen[k] = true
		part := "p" + strconv.Itoa(k)
		pq, _ := url.ParseQuery(v.query)
		gq, _ := url.ParseQuery(vg.query)
		lo, _ := strconv.Atoi(pq.Get("startkey"))
		hi, _ := strconv.Atoi(pq.Get("endkey"))
		if v.path != "/pdb/_partition/"+part+"/_design/bench/_view/by_g" || vg.path != "/gdb/_design/bench/_view/by_part_g" ||
			hi-lo != partitionWidth-1 || gq.Get("startkey") != `["`+part+`",`+strconv.Itoa(lo)+`]` || gq.Get("endkey") != `["`+part+`",`+strconv.Itoa(hi)+`]` {
			t.Fatalf("view queries %+v, %+v", v, vg)
		}
		// brute force: the partition's docs in range, by g then id
		var want []int
		for d := range p.cfg.Docs {
			if d%10 == k && p.g[d] >= lo && p.g[d] <= hi {
				want = append(want, d)
			}
		}
		slices.SortFunc(want, func(a, b int) int {
			if p.g[a] != p.g[b] {
				return p.g[a] - p.g[b]
			}
			return strings.Compare(p.docPartID(a), p.docPartID(b))
		})
		if !slices.Equal(v.want, want) || !slices.Equal(vg.want, want) {
			t.Fatalf("view %s?%s wants %v, brute force %v", v.path, v.query, v.want, want)
		}

		a, ag := qs.allDocs.part[i], qs.allDocs.global[i]
		aq, _ := url.ParseQuery(ag.query)
		if a.path != "/pdb/_partition/"+part+"/_all_docs" || a.query != "" || ag.path != "/gdb/_all_docs" ||
			aq.Get("startkey") != `"`+part+`:"` || aq.Get("endkey") != `"`+part+`;"` || len(a.want) != 100 || !slices.Equal(a.want, ag.want) {
			t.Fatalf("_all_docs queries %+v, %+v", a, ag)
		}
		// the global id range holds exactly the partition's ids (raw order)
		for d := range p.cfg.Docs {
			id := p.docPartID(d)
			if in := id >= part+":" && id <= part+";"; in != (d%10 == k) {
				t.Fatalf("id %s in the range of %s: %v", id, part, in)
			}
		}
		if !slices.IsSortedFunc(a.want, func(x, y int) int { return strings.Compare(p.docPartID(x), p.docPartID(y)) }) {
			t.Fatalf("_all_docs want not in id order: %v", a.want)
		}

		f, fg := qs.find.part[i], qs.find.global[i]
		var fb, fgb struct {
			Selector map[string]json.RawMessage `json:"selector"`
			Fields   []string                   `json:"fields"`
			Limit    int                        `json:"limit"`
		}
		if err := json.Unmarshal(f.body, &fb); err != nil || json.Unmarshal(fg.body, &fgb) != nil {
			t.Fatalf("find bodies %s, %s", f.body, fg.body)
		}
		rng := `{"$gte":` + strconv.Itoa(lo) + `,"$lte":` + strconv.Itoa(hi) + `}`
		if f.path != "/pdb/_partition/"+part+"/_find" || fg.path != "/gdb/_find" || len(fb.Selector) != 1 || string(fb.Selector["g"]) != rng ||
			len(fgb.Selector) != 2 || string(fgb.Selector["g"]) != rng || string(fgb.Selector["part"]) != `"`+part+`"` ||
			!slices.Equal(fb.Fields, []string{"_id", "g"}) || fb.Limit != 101 || fgb.Limit != 101 || !slices.Equal(f.want, want) || !slices.Equal(fg.want, want) {
			t.Fatalf("find queries %s, %s (%v)", f.body, fg.body, f.want)
		}
	}
	if len(seen) != 10 {
		t.Errorf("200 queries over %d of 10 partitions", len(seen))
	}

	// the builds' first queries: one per partition asked for
	first := qs.find.firstPart([]int{3, 7})
	if len(first) != 2 || first[0].part != 3 || first[1].part != 7 || !strings.HasPrefix(first[1].path, "/pdb/_partition/p7/") {
		t.Errorf("firstPart: %+v", first)
	}
	if got := replacePartition("/pdb/_partition/p3/_find", 3, 12); got != "/pdb/_partition/p12/_find" {
		t.Errorf("replacePartition: %s", got)
	}
	// partitions no query asked for get one like the others
	p = newPartitionsRun(100, 50, 1)
	qs = p.queries()
	first = qs.view.firstPart([]int{qs.view.part[0].part, (qs.view.part[0].part + 1) % 50})
	if len(first) != 2 || first[1].part != (first[0].part+1)%50 || first[1].query != first[0].query ||
		first[1].path != "/pdb/_partition/p"+strconv.Itoa(first[1].part)+"/_design/bench/_view/by_g" {
		t.Errorf("firstPart of an unasked partition: %+v", first)
	}
}

// The docs carry their partition, twice, and fabric_bench's body after it;
// the design docs and indexes are what the queries need.
func TestPartitionsDocsAndIndexes(t *testing.T) {
	gen, err := newDocGen(DocMedium, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := appendPartitionDoc(nil, gen, "p42", 1042, 7, 999)
	var doc struct {
		ID   string `json:"_id"`
		Part string `json:"part"`
		G, N int
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.ID != "p42:doc00001042" || doc.Part != "p42" || doc.G != 7 || doc.N != 999 {
		t.Errorf("doc: %+v, %v", doc, err)
	}
	plain := gen.appendDoc(nil, []byte("x"), "")
	if got, want := topKeys(t, b), append([]string{"_id", "part", "g", "n"}, topKeys(t, plain)[1:]...); !slices.Equal(got, want) {
		t.Errorf("doc keys %v\nwant %v", got, want)
	}
	if p := newPartitionsRun(100, 8, 1); p.docPartID(42) != "p2:doc00000042" {
		t.Errorf("docPartID(42) = %s", p.docPartID(42))
	}

	var dd struct {
		Options *struct {
			Partitioned bool `json:"partitioned"`
		} `json:"options"`
		Views map[string]struct {
			Map string `json:"map"`
		} `json:"views"`
	}
	if err := json.Unmarshal(partDDocBody(), &dd); err != nil || dd.Options == nil || !dd.Options.Partitioned || dd.Views[partView].Map != mapPartitionedByG {
		t.Errorf("partitioned ddoc %s: %v", partDDocBody(), err)
	}
	dd.Options = nil
	if err := json.Unmarshal(globalDDocBody(), &dd); err != nil || dd.Options != nil || dd.Views[globalView].Map != mapGlobalByPartG {
		t.Errorf("global ddoc %s: %v", globalDDocBody(), err)
	}
	var ix struct {
		Index struct {
			Fields []string `json:"fields"`
		} `json:"index"`
		Name        string `json:"name"`
		Partitioned *bool  `json:"partitioned"`
	}
	if err := json.Unmarshal(partMangoIndexBody(), &ix); err != nil || !slices.Equal(ix.Index.Fields, []string{"g"}) || ix.Name != partMangoIndex || ix.Partitioned == nil || !*ix.Partitioned {
		t.Errorf("partitioned index %s: %v", partMangoIndexBody(), err)
	}
	ix.Partitioned = nil
	if err := json.Unmarshal(globalMangoIndexBody(), &ix); err != nil || !slices.Equal(ix.Index.Fields, []string{"part", "g"}) || ix.Name != globalMangoIndex || ix.Partitioned != nil {
		t.Errorf("global index %s: %v", globalMangoIndexBody(), err)
	}
}

// The checks that make a run's figures trustworthy refuse wrong answers.
func TestPartitionsChecks(t *testing.T) {
	p := newPartitionsRun(40, 4, 1)
	// partition 1's docs: 1, 5, 9, …
	q := pquery{want: []int{5, 1, 9}}
	row := func(i int) string {
		return `{"id":"` + p.docPartID(i) + `","key":` + strconv.Itoa(p.g[i]) + `,"value":` + strconv.Itoa(p.n[i]) + `}`
	}
	rows := func(r ...string) []byte {
		return []byte("{\"total_rows\":10,\"offset\":0,\"rows\":[\r\n" + strings.Join(r, ",\r\n") + "\r\n]}\n")
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{string(rows(row(5), row(1), row(9))), true},
		{string(rows(row(1), row(5), row(9))), false}, // order
		{string(rows(row(5), row(1))), false},         // one short
		{string(rows(row(5), row(1), row(9), row(13))), false},
		{string(rows(row(5), row(1), strings.Replace(row(9), `"value":`+strconv.Itoa(p.n[9]), `"value":-1`, 1))), false},
		{`{"error":"query_parse_error","reason":"x"}`, false},
		{string(rows(row(5), row(1), row(9)))[:30], false},
	} {
		if _, err := p.checkViewRows(q, []byte(c.body)); (err == nil) != c.ok {
			t.Errorf("checkViewRows(%s) = %v", c.body, err)
		}
	}
	q = pquery{want: p.byPart[1][:3]}
	adRow := func(i int) string {
		return `{"id":"` + p.docPartID(i) + `","key":"` + p.docPartID(i) + `","value":{"rev":"1-a"}}`
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{string(rows(adRow(1), adRow(5), adRow(9))), true},
		{string(rows(adRow(1), adRow(9), adRow(5))), false},
		{string(rows(adRow(1), adRow(5), adRow(2))), false}, // another partition
		{string(rows(adRow(1), adRow(5))), false},
		{`{"total_rows":0,"offset":0}`, false},
	} {
		if _, err := p.checkAllDocsRows(q, []byte(c.body)); (err == nil) != c.ok {
			t.Errorf("checkAllDocsRows(%s) = %v", c.body, err)
		}
	}
	q = pquery{want: []int{5, 1, 9}}
	fd := func(i int, extra string) string {
		return `{"_id":"` + p.docPartID(i) + `","g":` + strconv.Itoa(p.g[i]) + extra + `}`
	}
	docs := func(d ...string) []byte {
		return []byte("{\"docs\":[\r\n" + strings.Join(d, ",\r\n") + "\r\n],\r\n\"bookmark\": \"x\"}\n")
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{string(docs(fd(5, ""), fd(1, ""), fd(9, ""))), true},
		{string(docs(fd(9, ""), fd(1, ""), fd(5, ""))), true}, // any order
		{string(docs(fd(5, ""), fd(1, ""))), false},
		{string(docs(fd(5, ""), fd(1, ""), fd(1, ""))), false},             // one twice
		{string(docs(fd(5, ""), fd(1, ""), fd(13, ""))), false},            // another doc
		{string(docs(fd(5, ""), fd(1, ""), fd(9, `,"part":"p1"`))), false}, // fields not applied
		{string(docs(fd(5, ""), fd(1, ""), `{"_id":"`+p.docPartID(9)+`","g":-1}`)), false},
		{`{"error":"bad_request","reason":"x"}`, false},
	} {
		if _, err := p.checkFindAnswer(q, []byte(c.body)); (err == nil) != c.ok {
			t.Errorf("checkFindAnswer(%s) = %v", c.body, err)
		}
	}
	if !isTimeout(500, []byte(`{"error":"timeout","reason":"x"}`)) || isTimeout(500, []byte(`{"error":"unknown_error"}`)) || isTimeout(400, []byte(`{"error":"timeout"}`)) {
		t.Error("isTimeout")
	}
}

// A partitioned build waits for every first query it is given, sent
// together, and counts 500 timeouts as the views build does.
func TestPartitionsBuild(t *testing.T) {
	var log strings.Builder // the requests in order, under lock
	timeouts := map[string]int{"/db/_partition/p1/_find": 2}
	lock := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lock <- struct{}{}
		defer func() { <-lock }()
		log.WriteString(r.Method + " " + r.URL.Path + "\n")
		switch {
		case r.URL.Path == "/db/_index":
			writeJSON(w, http.StatusOK, map[string]string{"result": "created"})
		case timeouts[r.URL.Path] > 0:
			timeouts[r.URL.Path]--
			couchErr(w, http.StatusInternalServerError, "timeout", "The request could not be processed in a reasonable amount of time.")
		case strings.HasSuffix(r.URL.Path, "/_find") && r.URL.Path != "/db/_partition/p9/_find":
			writeJSON(w, http.StatusOK, map[string]any{"docs": []any{}})
		default:
			couchErr(w, http.StatusBadRequest, "bad_request", "nope")
		}
	}))
	defer srv.Close()
	c, err := newClient(srv.URL, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionsRun{cfg: Config{Docs: 100, Q: 8}, c: c, prog: &progress{w: io.Discard, every: time.Hour}}
	first := []pquery{{method: "POST", path: "/db/_partition/p0/_find", body: []byte("{}")}, {method: "POST", path: "/db/_partition/p1/_find", body: []byte("{}")}}
	b, err := p.build(context.Background(), http.MethodPost, "/db/_index", []byte("{}"), first)
	if err != nil || b.Queries != 2 || b.Timeouts != 2 || b.Sec < 0 || b.Hz <= 0 {
		t.Errorf("build: %+v, %v", b, err)
	}
	if got := log.String(); strings.Count(got, "p1/_find") != 3 || strings.Count(got, "p0/_find") != 1 || !strings.HasPrefix(got, "POST /db/_index\n") {
		t.Errorf("requests:\n%s", got)
	}
	// any other error fails the build
	first = append(first, pquery{method: "POST", path: "/db/_partition/p9/_find", body: []byte("{}")})
	if _, err := p.build(context.Background(), http.MethodPost, "/db/_index", []byte("{}"), first); !errors.Is(err, ErrStatus) {
		t.Errorf("build with a 400: %v", err)
	}
}

func TestPartitionsResultText(t *testing.T) {
	side := func(hz, p50, p99 float64) PartitionsSide { return PartitionsSide{Hz: hz, P50Ms: p50, P99Ms: p99} }
	r := &PartitionsResult{URL: "http://h:1", Docs: 20000, Partitions: 100, DocSize: DocMedium, DocBytes: 14680, Lookups: 1000, Concurrency: 4, Q: 8,
		ServerVendor: "The Apache Software Foundation", ServerVersion: "3.5.2",
		LoadHz: 5000, LoadSec: 4, GlobalLoadHz: 4000, GlobalLoadSec: 5,
		ViewBuild: PartitionsBuild{Sec: 10, Hz: 2000, Queries: 8}, GlobalViewBuild: PartitionsBuild{Sec: 12.5, Hz: 1600, Queries: 1, Timeouts: 1},
		MangoBuild: PartitionsBuild{Sec: 5, Hz: 4000, Queries: 8}, GlobalMangoBuild: PartitionsBuild{Sec: 4, Hz: 5000, Queries: 1},
		View:    PartitionsQuery{Partitioned: side(800, 4, 12), Global: side(400, 9, 20), Ratio: 2},
		AllDocs: PartitionsQuery{Partitioned: side(300, 12, 30), Global: side(250, 15, 40), Ratio: 1.2},
		Find:    PartitionsQuery{Partitioned: side(600, 6, 15), Global: side(300, 12, 30), Ratio: 2},
	}
	r.View.Partitioned.Rows, r.AllDocs.Partitioned.Rows, r.Find.Partitioned.Rows = 20000, 200000, 20000
	var b strings.Builder
	r.WriteText(&b)
	for _, want := range []string{
		"partitions: 20000 docs in each db, 100 partitions, q=8, doc size medium (~14680 bytes), server The Apache Software Foundation 3.5.2, http://h:1",
		"load (_bulk_docs):          5000 docs/s (4.00s)                4000 docs/s (5.00s)",
		"view build (first query):   2000 docs/s (10.00s, 8 ranges)     1600 docs/s (12.50s, 1 x 500 timeout)",
		"mango build (first _find):  4000 docs/s (5.00s, 8 ranges)      5000 docs/s (4.00s)",
		"view, g range:              800 q/s, p50 4.00ms, p99 12.0ms    400 q/s, p50 9.00ms, p99 20.0ms    2.00",
		"_all_docs of a partition:   300 q/s, p50 12.0ms, p99 30.0ms    250 q/s, p50 15.0ms, p99 40.0ms    1.20",
		"_find, g range:             600 q/s, p50 6.00ms, p99 15.0ms    300 q/s, p50 12.0ms, p99 30.0ms    2.00",
		"(1000 queries of each kind on each db, 4 clients; rows an answer: view 20.0, _all_docs 200.0, _find 20.0)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"global_db":`, `"partitions":100`, `"view_build":{"sec":10,"hz":2000,"queries":8,"timeouts":0}`,
		`"view":{"partitioned":{"hz":800,"p50_ms":4,"p99_ms":12,"sec":0,"rows":20000},"global":{"hz":400,`, `"ratio":1.2`} {
		if !bytes.Contains(j, []byte(key)) {
			t.Errorf("JSON lacks %s: %s", key, j)
		}
	}
}
