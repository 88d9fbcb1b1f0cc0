package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settee/settee/docjson"
)

// The mango workload, over the public HTTP API only (POST /db/_index,
// /db/_find, /db/_explain), so that the same run measures settee and a real
// CouchDB:
//
//  1. load Docs docs (fabric_bench's shapes plus an integer g in 0..99, a
//     unique integer v and r = the doc's index mod 1000) with _bulk_docs;
//  2. POST _index: a json index on ["g", "v"];
//  3. the first _find that uses it: the index build, docs/s;
//  4. Finds equality finds {"g": G, "v": V} with fields _id, g and v,
//     Concurrency clients; each answer must be the one doc;
//  5. Ranges finds {"g": G, "v": {"$gt": X}} sorted by g, v with limit
//     25, Concurrency clients; each answer must be the right docs, in order;
//  6. one find on r, which no index has: a scan of the whole database,
//     checked to find exactly the docs whose r matches.
//
// Before the timed finds, _explain checks that the server plans the indexed
// queries on the index and the last one on _all_docs, so that a figure is
// never one of another plan than the one it is named after.

// WorkloadMango names the mango workload (--workload).
const WorkloadMango = "mango"

// MangoDocs is the mango workload's --docs when not given: the issue's
// 20,000.
const MangoDocs = 20000

// Defaults of the mango workload's own counts: Config.Lookups equality
// finds, a quarter as many range finds (each returns 25 whole docs).
const (
	defaultMangoFinds = 2000
	mangoRangeShare   = 4
)

// The index, the range finds' limit and the value of r the unindexed find
// selects.
const (
	mangoDDoc      = "bench-mango"
	mangoIndexName = "bench-g-v"
	mangoLimit     = 25
	mangoRare      = 7
	mangoRMod      = 1000
)

// MangoResult is what the mango workload measures. Rates are per second,
// latencies in milliseconds.
type MangoResult struct {
	URL           string `json:"url"` // without credentials
	DB            string `json:"db"`
	Docs          int    `json:"docs"`
	DocSize       string `json:"doc_size"`
	DocBytes      int    `json:"doc_bytes"`
	Finds         int    `json:"finds"`  // equality finds
	Ranges        int    `json:"ranges"` // range + sort + limit finds
	Concurrency   int    `json:"concurrency"`
	ServerVersion string `json:"server_version"`
	ServerVendor  string `json:"server_vendor"`
	Client        string `json:"client"`

	LoadSec float64 `json:"load_sec"`
	LoadHz  float64 `json:"load_hz"` // docs/s

	// POST _index alone; then BuildSec from before it until the first
	// _find on the index answered 200, 500 timeouts included (the find is
	// then sent again), as the views workload times its first query
	IndexMs              float64 `json:"index_ms"`
	BuildSec             float64 `json:"build_sec"`
	BuildHz              float64 `json:"build_hz"` // Docs / BuildSec
	BuildTimeouts        int     `json:"build_timeouts"`
	BuildFirstTimeoutSec float64 `json:"build_first_timeout_sec"` // 0: none

	EqHz    float64 `json:"eq_hz"` // finds/s, all clients together
	EqP50Ms float64 `json:"eq_p50_ms"`
	EqP99Ms float64 `json:"eq_p99_ms"`
	EqSec   float64 `json:"eq_sec"`

	RangeHz    float64 `json:"range_hz"`
	RangeP50Ms float64 `json:"range_p50_ms"`
	RangeP99Ms float64 `json:"range_p99_ms"`
	RangeSec   float64 `json:"range_sec"`
	RangeDocs  int64   `json:"range_docs"` // docs returned by all range finds
	// the range finds' ceiling (mangoceiling.go): the first range find's
	// answer served by a bare net/http server to the same client, checked
	// as the server's were; RangeCeilingRatio is RangeHz over it
	RangeCeilingHz     float64 `json:"range_ceiling_hz"`
	RangeCeilingP99Ms  float64 `json:"range_ceiling_p99_ms"`
	RangeCeilingBytes  int     `json:"range_ceiling_body_bytes"`
	RangeCeilingServer string  `json:"range_ceiling_server"`
	RangeCeilingRatio  float64 `json:"range_ceiling_ratio"`

	// the find on r: its time, the docs it found, what the server says it
	// examined (execution_stats; 0: not reported) and its warning
	UnindexedMs       float64   `json:"unindexed_ms"`      // the median of UnindexedRunsMs
	UnindexedRunsMs   []float64 `json:"unindexed_runs_ms"` // each run, in order
	UnindexedDocs     int       `json:"unindexed_docs"`
	UnindexedExamined int64     `json:"unindexed_examined"`
	UnindexedWarning  string    `json:"unindexed_warning"`

	WallSec float64 `json:"wall_sec"`
}

// WriteText prints the result, one phase a line.
func (r *MangoResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "mango: %d docs, doc size %s (~%d bytes), server %s %s, %s\n", r.Docs, r.DocSize, r.DocBytes,
		orUnknown(r.ServerVendor), orUnknown(r.ServerVersion), r.URL)
	fmt.Fprintf(w, "load (_bulk_docs):           %.0f docs/s (%.2fs)\n", r.LoadHz, r.LoadSec)
	timeouts := ""
	if r.BuildTimeouts > 0 {
		timeouts = fmt.Sprintf(", %d x 500 timeout, the first after %.1fs", r.BuildTimeouts, r.BuildFirstTimeoutSec)
	}
	fmt.Fprintf(w, "index [g, v], first _find:   %.0f docs/s (%.2fs, POST _index %s%s)\n", r.BuildHz, r.BuildSec, fmtMs(r.IndexMs), timeouts)
	fmt.Fprintf(w, "equality finds, 3 fields:    %.0f q/s, p50 %s, p99 %s (%d finds, %d clients)\n",
		r.EqHz, fmtMs(r.EqP50Ms), fmtMs(r.EqP99Ms), r.Finds, r.Concurrency)
	fmt.Fprintf(w, "range + sort + limit %d:     %.0f q/s, p50 %s, p99 %s (%d finds, %d docs, %d clients)\n",
		mangoLimit, r.RangeHz, fmtMs(r.RangeP50Ms), fmtMs(r.RangeP99Ms), r.Ranges, r.RangeDocs, r.Concurrency)
	if r.RangeCeilingHz > 0 {
		fmt.Fprintf(w, "  its ceiling (bare server):  %.0f q/s, p99 %s (one answer of %d bytes, %s; range finds at %.0f%% of it)\n",
			r.RangeCeilingHz, fmtMs(r.RangeCeilingP99Ms), r.RangeCeilingBytes, r.RangeCeilingServer, 100*r.RangeCeilingRatio)
	}
	examined := "examined: not reported"
	if r.UnindexedExamined > 0 {
		examined = fmt.Sprintf("%d examined", r.UnindexedExamined)
	}
	runs := ""
	if len(r.UnindexedRunsMs) > 1 {
		each := make([]string, len(r.UnindexedRunsMs))
		for i, v := range r.UnindexedRunsMs {
			each[i] = fmtMs(v)
		}
		runs = fmt.Sprintf(", median of %s", strings.Join(each, " "))
	}
	fmt.Fprintf(w, "unindexed find (whole db):   %s (%d docs found, %s%s)\n", fmtMs(r.UnindexedMs), r.UnindexedDocs, examined, runs)
}

// mangoRun is the state of one mango run: what was loaded, to check answers.
type mangoRun struct {
	*runner
	res     *MangoResult
	g, v    []int   // per doc index
	byGroup [][]int // per g, the doc indexes in ascending v
	batch   int
}

// RunMango runs the mango workload against cfg.URL. The database is
// deleted before it returns; on failure the partial result comes with the
// error.
func RunMango(ctx context.Context, cfg Config, out, progressW io.Writer) (*MangoResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Lookups == 0 {
		cfg.Lookups = defaultMangoFinds
	}
	if out == nil {
		out = io.Discard
	}
	if progressW == nil {
		progressW = io.Discard
	}
	c, err := newClient(cfg.URL, cfg.Concurrency+2)
	if err != nil {
		return nil, err
	}
	defer c.close()
	gen, err := newDocGen(cfg.DocSize, 1)
	if err != nil {
		return nil, err
	}
	res := &MangoResult{URL: c.display, Docs: cfg.Docs, DocSize: cfg.DocSize, Finds: cfg.Lookups,
		Ranges: max(1, cfg.Lookups/mangoRangeShare), Concurrency: cfg.Concurrency,
		Client: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	res.DocBytes = len(appendMangoDoc(nil, gen, cfg.Docs, 99, cfg.Docs))
	res.DB = DBPrefix + "mango-" + strconv.FormatInt(time.Now().UnixMicro(), 10)
	r := &runner{cfg: cfg, c: c, gen: gen, prog: &progress{w: progressW, every: cfg.ProgressEvery}, res: &Result{DB: res.DB}}
	r.dbPath = "/" + res.DB
	m := &mangoRun{runner: r, res: res, batch: cfg.BatchSize}
	// g and v are drawn before anything is timed, from their own seed, so
	// that every run (and every server) indexes the same values; v is a
	// permutation, so unique, and not in _id order
	rng := newPCG(17)
	m.g, m.v = make([]int, cfg.Docs), rng.Perm(cfg.Docs)
	m.byGroup = make([][]int, 100)
	for i := range cfg.Docs {
		m.g[i] = rng.IntN(100)
		m.byGroup[m.g[i]] = append(m.byGroup[m.g[i]], i)
	}
	for _, docs := range m.byGroup {
		slices.SortFunc(docs, func(a, b int) int { return m.v[a] - m.v[b] })
	}

	start := time.Now()
	if err := r.createDB(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = r.cleanUp(ctx) }()
	r.environment(ctx)
	res.ServerVersion, res.ServerVendor = r.res.ServerVersion, r.res.ServerVendor
	err = m.run(ctx)
	res.WallSec = round2(time.Since(start).Seconds())
	if err != nil {
		return res, err
	}
	return res, writeResult(out, cfg.JSON, res)
}

func (m *mangoRun) run(ctx context.Context) error {
	cfg, res := m.cfg, m.res

	// 1. load
	t0 := time.Now()
	if err := m.load(ctx); err != nil {
		return err
	}
	res.LoadSec = round2(time.Since(t0).Seconds())
	res.LoadHz = round2(float64(cfg.Docs) / time.Since(t0).Seconds())

	// 2-3. the index, then the first find on it: the build
	m.prog.printf("  creating index %s on [g, v], then the first _find\n", mangoIndexName)
	if err := m.build(ctx); err != nil {
		return err
	}

	// every query of the run, built before the clocks
	rng := newPCG(1)
	eq := make([][]byte, res.Finds)
	eqDoc := make([]int, res.Finds)
	for i := range eq {
		d := rng.IntN(cfg.Docs)
		eq[i], eqDoc[i] = m.eqBody(d), d
	}
	rg := make([][]byte, res.Ranges)
	rgWant := make([][]int, res.Ranges)
	for i := range rg {
		d := rng.IntN(cfg.Docs)
		rg[i], rgWant[i] = m.rangeBody(d)
	}
	unBody, unWant := m.unindexedBody()

	// the plans: the index for the first two, _all_docs for the last
	if err := m.checkPlan(ctx, eq[0], mangoIndexName); err != nil {
		return err
	}
	if err := m.checkPlan(ctx, rg[0], mangoIndexName); err != nil {
		return err
	}
	if err := m.checkPlan(ctx, unBody, "_all_docs"); err != nil {
		return err
	}

	// 4. equality finds
	st, err := m.finds(ctx, "equality finds", eq, func(i int, b []byte) (int, error) {
		return checkFindDocs(b, []int{eqDoc[i]}, m.g, m.v, true)
	})
	if err != nil {
		return err
	}
	res.EqHz, res.EqP50Ms, res.EqP99Ms, res.EqSec = st.hz, st.p50, st.p99, round2(st.sec)

	// 5. range + sort + limit
	var docs atomic.Int64
	st, err = m.finds(ctx, "range finds", rg, func(i int, b []byte) (int, error) {
		n, err := checkFindDocs(b, rgWant[i], m.g, m.v, false)
		docs.Add(int64(n))
		return n, err
	})
	if err != nil {
		return err
	}
	res.RangeHz, res.RangeP50Ms, res.RangeP99Ms, res.RangeSec = st.hz, st.p50, st.p99, round2(st.sec)
	res.RangeDocs = docs.Load()
	if err := m.rangeCeiling(ctx, rg, rgWant[0]); err != nil {
		return err
	}

	// 6. the find no index serves
	return m.unindexed(ctx, unBody, unWant)
}

// appendMangoDoc appends doc i: fabric_bench's body for the size, after
// _id, g, v and r (the doc's index mod 1000).
func appendMangoDoc(dst []byte, gen *docGen, i, g, v int) []byte {
	dst = append(dst, `{"_id":"doc`...)
	dst = appendPad8(dst, i)
	dst = append(dst, `","g":`...)
	dst = strconv.AppendInt(dst, int64(g), 10)
	dst = append(dst, `,"v":`...)
	dst = strconv.AppendInt(dst, int64(v), 10)
	dst = append(dst, `,"r":`...)
	dst = strconv.AppendInt(dst, int64(i%mangoRMod), 10)
	return gen.appendBody(dst)
}

// load writes the docs with _bulk_docs (runner.loadDocs).
func (m *mangoRun) load(ctx context.Context) error {
	return m.loadDocs(ctx, 0, m.cfg.Docs, m.batch, m.res.DocBytes, "load", func(dst []byte, i int) []byte {
		return appendMangoDoc(dst, m.gen, i, m.g[i], m.v[i])
	})
}

// mangoIndexBody is the POST _index body.
func mangoIndexBody() []byte {
	return []byte(`{"index":{"fields":["g","v"]},"ddoc":"` + mangoDDoc + `","name":"` + mangoIndexName + `","type":"json"}`)
}

// eqBody is the equality find of doc d.
func (m *mangoRun) eqBody(d int) []byte {
	b := append([]byte(`{"selector":{"g":`), strconv.Itoa(m.g[d])...)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(m.v[d]), 10)
	return append(b, `},"fields":["_id","g","v"]}`...)
}

// rangeBody is the range find from doc d: its g, the v after its own, and
// the docs it must return, in order.
func (m *mangoRun) rangeBody(d int) ([]byte, []int) {
	g, x := m.g[d], m.v[d]
	b := append([]byte(`{"selector":{"g":`), strconv.Itoa(g)...)
	b = append(b, `,"v":{"$gt":`...)
	b = strconv.AppendInt(b, int64(x), 10)
	b = append(b, `}},"sort":[{"g":"asc"},{"v":"asc"}],"limit":`...)
	b = strconv.AppendInt(b, mangoLimit, 10)
	b = append(b, '}')
	docs := m.byGroup[g]
	k, _ := slices.BinarySearchFunc(docs, x, func(e, t int) int { return m.v[e] - t })
	// docs[k] is d itself: the range starts after it
	want := docs[k+1:]
	return b, want[:min(len(want), mangoLimit)]
}

// unindexedBody is the find on r and the docs it must return. Its limit
// is above their count, so the server cannot stop before the end of the
// database.
func (m *mangoRun) unindexedBody() ([]byte, []int) {
	var want []int
	for i := mangoRare; i < m.cfg.Docs; i += mangoRMod {
		want = append(want, i)
	}
	b := fmt.Appendf(nil, `{"selector":{"r":%d},"fields":["_id","r"],"limit":%d,"execution_stats":true}`, mangoRare, len(want)+1)
	return b, want
}

// post POSTs body to /db/<endpoint> and returns the status and answer.
func (m *mangoRun) post(ctx context.Context, endpoint string, body []byte, buf *bytes.Buffer) (int, error) {
	return m.c.roundTrip(ctx, http.MethodPost, m.dbPath+"/"+endpoint, "", body, buf)
}

// build POSTs the index, then sends the first equality find until it
// answers 200, timing from before the POST (CouchDB's background indexer
// may start on the design doc's write). A 500 "timeout" is CouchDB giving
// up on the request while the build goes on: counted, and the find sent
// again, as the views workload's build does.
func (m *mangoRun) build(ctx context.Context) error {
	res := m.res
	ctx, cancel := context.WithTimeout(ctx, buildCap)
	defer cancel()
	var buf bytes.Buffer
	t0 := time.Now()
	st, err := m.post(ctx, "_index", mangoIndexBody(), &buf)
	if err != nil {
		return err
	}
	res.IndexMs = ms(time.Since(t0))
	if st != http.StatusOK && st != http.StatusCreated {
		return statusError(http.MethodPost, m.dbPath+"/_index", st, buf.Bytes())
	}
	var created struct {
		Result string `json:"result"`
		Name   string `json:"name"`
	}
	if err := json.Unmarshal(buf.Bytes(), &created); err != nil || created.Name != mangoIndexName || created.Result != "created" {
		return fmt.Errorf("%w: POST _index: %.300s", ErrResponse, buf.Bytes())
	}
	first := m.eqBody(0)
	for {
		st, err := m.post(ctx, "_find", first, &buf)
		if err != nil {
			return err
		}
		if st == http.StatusOK {
			elapsed := time.Since(t0)
			if _, err := checkFindDocs(buf.Bytes(), []int{0}, m.g, m.v, true); err != nil {
				return fmt.Errorf("the first _find: %w", err)
			}
			res.BuildSec, res.BuildHz = round2(elapsed.Seconds()), round2(float64(m.cfg.Docs)/elapsed.Seconds())
			return nil
		}
		var e struct {
			Error string `json:"error"`
		}
		if st != http.StatusInternalServerError || json.Unmarshal(buf.Bytes(), &e) != nil || e.Error != "timeout" {
			return statusError(http.MethodPost, m.dbPath+"/_find", st, buf.Bytes())
		}
		if res.BuildTimeouts == 0 {
			res.BuildFirstTimeoutSec = round2(time.Since(t0).Seconds())
		}
		res.BuildTimeouts++
		m.prog.printf("  _find: 500 timeout after %.1fs, asking again\n", time.Since(t0).Seconds())
	}
}

// checkPlan asks _explain which index the find would use: the named json
// index, or "_all_docs" for CouchDB's special index.
func (m *mangoRun) checkPlan(ctx context.Context, body []byte, want string) error {
	var buf bytes.Buffer
	st, err := m.post(ctx, "_explain", body, &buf)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return statusError(http.MethodPost, m.dbPath+"/_explain", st, buf.Bytes())
	}
	return checkExplain(buf.Bytes(), body, want)
}

func checkExplain(b, body []byte, want string) error {
	var ex struct {
		Index struct {
			DDoc *string `json:"ddoc"`
			Name string  `json:"name"`
			Type string  `json:"type"`
		} `json:"index"`
	}
	if err := json.Unmarshal(b, &ex); err != nil {
		return fmt.Errorf("%w: _explain %s: %w", ErrResponse, body, err)
	}
	got := ex.Index.Name
	ok := got == want && ex.Index.Type == "json"
	if want == "_all_docs" {
		ok = got == want && ex.Index.Type == "special"
	}
	if !ok {
		return fmt.Errorf("%w: _explain %s: the server would use index %q (%s), want %q", ErrResponse, body, got, ex.Index.Type, want)
	}
	return nil
}

// finds sends the bodies to _find from Concurrency clients and checks each
// answer with check (given the body's index).
func (m *mangoRun) finds(ctx context.Context, name string, bodies [][]byte, check func(i int, b []byte) (int, error)) (stats, error) {
	return m.findsWith(ctx, m.c, name, bodies, check)
}

// findsWith is finds through the client c.
func (m *mangoRun) findsWith(ctx context.Context, c *client, name string, bodies [][]byte, check func(i int, b []byte) (int, error)) (stats, error) {
	n := len(bodies)
	var (
		next     atomic.Int64
		done     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		lats     = make([][]time.Duration, m.cfg.Concurrency)
		path     = m.dbPath + "/_find"
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := m.prog.track(name, int64(n), &done)
	start := time.Now()
	for w := range m.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				st, err := c.roundTrip(ctx, http.MethodPost, path, "", bodies[i], &buf)
				lats[w] = append(lats[w], time.Since(t0))
				if err == nil && st != http.StatusOK {
					err = statusError(http.MethodPost, path, st, buf.Bytes())
				}
				if err == nil {
					_, err = check(i, buf.Bytes())
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("POST %s %s: %w", path, bodies[i], err); cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	if firstErr != nil {
		return stats{}, firstErr
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return summarize(int64(n), elapsed, all), nil
}

// unindexedRuns is how many times the unindexed find is timed: one
// scan of the whole db is short enough for a GC or a compaction to
// move it by a third, so the median is reported.
const unindexedRuns = 3

// unindexed times the find on r, unindexedRuns times, and checks the
// docs it found.
func (m *mangoRun) unindexed(ctx context.Context, body []byte, want []int) error {
	for range unindexedRuns {
		if err := m.unindexedOnce(ctx, body, want); err != nil {
			return err
		}
	}
	runs := slices.Clone(m.res.UnindexedRunsMs)
	slices.Sort(runs)
	m.res.UnindexedMs = runs[len(runs)/2]
	return nil
}

func (m *mangoRun) unindexedOnce(ctx context.Context, body []byte, want []int) error {
	res := m.res
	var buf bytes.Buffer
	m.prog.printf("  unindexed find over %d docs\n", m.cfg.Docs)
	t0 := time.Now()
	st, err := m.post(ctx, "_find", body, &buf)
	d := time.Since(t0)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return statusError(http.MethodPost, m.dbPath+"/_find", st, buf.Bytes())
	}
	res.UnindexedRunsMs = append(res.UnindexedRunsMs, ms(d))
	a, err := parseFind(buf.Bytes())
	if err != nil {
		return fmt.Errorf("unindexed find: %w", err)
	}
	res.UnindexedWarning, res.UnindexedExamined = a.warning, a.examined
	// _all_docs order is _id order, which is load order here
	if len(a.docs) != len(want) {
		return fmt.Errorf("%w: unindexed find %s: %d docs, want %d", ErrCount, body, len(a.docs), len(want))
	}
	for k, doc := range a.docs {
		if doc.id != docID(want[k]) || doc.r != mangoRare || doc.has != hasID|hasR || doc.fields != 2 {
			return fmt.Errorf("%w: unindexed find %s: doc %d is %+v, want %s with r %d and no other field", ErrResponse, body, k, doc, docID(want[k]), mangoRare)
		}
	}
	res.UnindexedDocs = len(a.docs)
	return nil
}

// findDoc is what the checks read of one doc of a _find answer.
type findDoc struct {
	id      string
	g, v, r int
	has     uint8 // hasID, ...: the fields seen
	fields  int   // top-level fields
}

const (
	hasID uint8 = 1 << iota
	hasG
	hasV
	hasR
)

type findAnswer struct {
	docs     []findDoc
	warning  string
	examined int64
}

// parseFind reads a _find answer, {"docs":[…],"bookmark":…,"warning":…,
// "execution_stats":…} (the bookmark is not used), with docjson's walker: only _id, g, v and r of
// each doc are read, the rest skipped, as at a thousand answers a second
// of 25 whole docs decoding them would be the client's CPU, not the
// server's.
func parseFind(b []byte) (findAnswer, error) {
	var a findAnswer
	var bad error
	sawDocs := false
	end := docjson.Object(b, 0, func(key []byte, vs int) int {
		switch string(key) {
		case `"docs"`:
			sawDocs = true
			return docjson.Array(b, vs, func(ds int) int {
				var d findDoc
				e := docjson.Object(b, ds, func(k []byte, fs int) int {
					fe := docjson.SkipValue(b, fs)
					if fe < 0 {
						return -1
					}
					d.fields++
					var err error
					switch string(k) {
					case `"_id"`:
						d.has |= hasID
						d.id, err = docjson.Unquote(b[fs:fe])
					case `"g"`:
						d.has |= hasG
						d.g, err = strconv.Atoi(string(b[fs:fe]))
					case `"v"`:
						d.has |= hasV
						d.v, err = strconv.Atoi(string(b[fs:fe]))
					case `"r"`:
						d.has |= hasR
						d.r, err = strconv.Atoi(string(b[fs:fe]))
					}
					if err != nil {
						bad = fmt.Errorf("doc %d: field %s: %w", len(a.docs), k, err)
						return -1
					}
					return fe
				})
				if e >= 0 {
					a.docs = append(a.docs, d)
				}
				return e
			})
		case `"warning"`:
			e := docjson.SkipValue(b, vs)
			if e > 0 && b[vs] == '"' {
				a.warning, _ = docjson.Unquote(b[vs:e])
			}
			return e
		case `"execution_stats"`:
			e := docjson.SkipValue(b, vs)
			var es struct {
				Examined int64 `json:"total_docs_examined"`
			}
			if e > 0 && json.Unmarshal(b[vs:e], &es) == nil {
				a.examined = es.Examined
			}
			return e
		}
		return docjson.SkipValue(b, vs)
	})
	if bad != nil {
		return a, fmt.Errorf("%w: %w", ErrResponse, bad)
	}
	if end < 0 || docjson.SkipWS(b, end) != len(b) || !sawDocs {
		return a, fmt.Errorf("%w: not a _find answer: %.200q", ErrResponse, b)
	}
	return a, nil
}

func docID(i int) string { return string(appendPad8([]byte("doc"), i)) }

// checkFindDocs checks an indexed find's answer: exactly the docs want, in
// that order, each with its _id, g and v (and, when only is set, nothing
// else: the equality finds ask for those three fields). It returns how
// many docs the answer has.
func checkFindDocs(b []byte, want, g, v []int, only bool) (int, error) {
	a, err := parseFind(b)
	if err != nil {
		return len(a.docs), err
	}
	if len(a.docs) != len(want) {
		return len(a.docs), fmt.Errorf("%w: %d docs, want %d", ErrCount, len(a.docs), len(want))
	}
	for k, d := range a.docs {
		w := want[k]
		if d.has&(hasID|hasG|hasV) != hasID|hasG|hasV || d.id != docID(w) || d.g != g[w] || d.v != v[w] {
			return len(a.docs), fmt.Errorf("%w: doc %d is %s g %d v %d, want %s g %d v %d", ErrResponse, k, d.id, d.g, d.v, docID(w), g[w], v[w])
		}
		if only && d.fields != 3 {
			return len(a.docs), fmt.Errorf("%w: doc %d has %d fields, want _id, g and v", ErrResponse, k, d.fields)
		}
	}
	return len(a.docs), nil
}
