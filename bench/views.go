package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The views workload (issue 16), over the public HTTP API only, so that the
// same run measures settee and a real CouchDB:
//
//  1. load Docs docs (fabric_bench's shapes plus a unique string k and small
//     integers g in 0..99 and n in 0..999) with _bulk_docs;
//  2. PUT _design/bench: by_k (plain map of k), by_group (g -> n, _sum) and
//     by_n ([g, n] -> n, a JavaScript reduce with a rereduce branch);
//  3. the first query: the index build, docs/s;
//  4. Lookups key lookups of by_k with include_docs, Concurrency clients;
//  5. the whole of by_k streamed, rows/s;
//  6. group=true on by_group (_sum); by_n (JavaScript) with group_level=1
//     (the same 100 groups) and with group=true (a group per [g, n]);
//  7. NewDocs new docs, then one query: the incremental update;
//  8. a writer before, then while a second design doc (the same views under
//     other names, so another signature and a build from scratch) builds.
//
// Every answer is checked against what was loaded (row counts, sums per
// group, counts and maxima of the JavaScript reduce), so a figure is never
// one of a server that answered something else.

// WorkloadViews names the views workload (--workload).
const WorkloadViews = "views"

// Defaults of the views workload's own counts (Config.Lookups, NewDocs).
const (
	defaultLookups = 2000
	defaultNewDocs = 1000
)

// viewsWriterBefore is how long the writer runs before the second build: long
// enough for a p99 of a few thousand PUTs on settee, a few hundred on CouchDB.
const viewsWriterBefore = 3 * time.Second

// buildCap bounds the wait for one index build, 500 timeouts and all, so a
// server that never finishes cannot hang the run.
const buildCap = 30 * time.Minute

// The design docs' views. by_n's reduce returns an object in both branches
// but computes it differently on rereduce, so a server that skips or botches
// rereduce gives wrong counts. Its output stays far under CouchDB's
// reduce_limit (200 bytes).
const (
	mapByK     = `function(doc){ if (doc.k !== undefined) emit(doc.k, null); }`
	mapByGroup = `function(doc){ if (doc.g !== undefined) emit(doc.g, doc.n); }`
	mapByN     = `function(doc){ if (doc.g !== undefined) emit([doc.g, doc.n], doc.n); }`
	reduceByN  = `function(keys, values, rereduce){ var c = 0, m = -1, i; ` +
		`if (rereduce) { for (i = 0; i < values.length; i++) { c += values[i].count; if (values[i].max > m) m = values[i].max; } } ` +
		`else { c = values.length; for (i = 0; i < values.length; i++) if (values[i] > m) m = values[i]; } ` +
		`return {count: c, max: m}; }`
)

// viewsDDoc is a design doc with the three views, their names suffixed.
func viewsDDoc(suffix string) []byte {
	type view struct {
		Map    string `json:"map"`
		Reduce string `json:"reduce,omitempty"`
	}
	b, err := json.Marshal(map[string]any{
		"language": "javascript",
		"views": map[string]view{
			"by_k" + suffix:     {Map: mapByK},
			"by_group" + suffix: {Map: mapByGroup, Reduce: "_sum"},
			"by_n" + suffix:     {Map: mapByN, Reduce: reduceByN},
		},
	})
	if err != nil {
		panic(err) // constant input
	}
	return b
}

// ViewsResult is what the views workload measures. Rates are per second,
// latencies in milliseconds.
type ViewsResult struct {
	URL           string `json:"url"` // without credentials
	DB            string `json:"db"`
	Docs          int    `json:"docs"`
	DocSize       string `json:"doc_size"`
	DocBytes      int    `json:"doc_bytes"`
	Lookups       int    `json:"lookups"`
	Concurrency   int    `json:"concurrency"`
	NewDocs       int    `json:"new_docs"`
	ServerVersion string `json:"server_version"`
	ServerVendor  string `json:"server_vendor"`
	Client        string `json:"client"`

	LoadSec float64 `json:"load_sec"`
	LoadHz  float64 `json:"load_hz"` // docs/s

	// the first query: BuildSec until it answered 200, including any 500
	// timeouts (CouchDB gives up on a request after 60 s and answers 500
	// while the build goes on; the query is then sent again)
	BuildSec             float64 `json:"build_sec"`
	BuildHz              float64 `json:"build_hz"` // Docs / BuildSec
	BuildTimeouts        int     `json:"build_timeouts"`
	BuildFirstTimeoutSec float64 `json:"build_first_timeout_sec"` // 0: none

	LookupHz    float64 `json:"lookup_hz"` // queries/s, all clients together
	LookupP50Ms float64 `json:"lookup_p50_ms"`
	LookupP99Ms float64 `json:"lookup_p99_ms"`
	LookupSec   float64 `json:"lookup_sec"`

	StreamRows       int64   `json:"stream_rows"`
	StreamHz         float64 `json:"stream_hz"` // rows/s
	StreamFirstRowMs float64 `json:"stream_first_row_ms"`
	StreamSec        float64 `json:"stream_sec"`

	SumGroupMs float64 `json:"sum_group_ms"` // group=true on by_group (_sum)
	SumGroups  int     `json:"sum_groups"`
	// by_n (JavaScript reduce) grouped by g, group_level=1: the _sum
	// query's 100 groups, the "JavaScript reduce group"
	JSGroupMs float64 `json:"js_group_ms"`
	JSGroups  int     `json:"js_groups"`
	// by_n with group=true: a group per [g, n], about as many as docs;
	// JSExactTimedOut: the server answered 500 timeout after JSExactMs
	JSExactMs       float64 `json:"js_exact_group_ms"`
	JSExactGroups   int     `json:"js_exact_groups"`
	JSExactTimedOut bool    `json:"js_exact_timed_out"`

	NewDocsWriteSec float64 `json:"new_docs_write_sec"`
	NewDocsQueryMs  float64 `json:"new_docs_query_ms"` // the one query after them

	// user writes (single doc PUTs, one at a time) before and during the
	// build of a second design doc
	WritesBefore  int     `json:"writes_before"`
	BeforeP50Ms   float64 `json:"write_p50_ms_before"`
	BeforeP99Ms   float64 `json:"write_p99_ms_before"`
	WritesDuring  int     `json:"writes_during"`
	DuringP50Ms   float64 `json:"write_p50_ms_during"`
	DuringP99Ms   float64 `json:"write_p99_ms_during"`
	P99Ratio      float64 `json:"write_p99_ratio"` // during / before
	Build2Docs    int     `json:"build2_docs"`
	Build2Sec     float64 `json:"build2_sec"`
	Build2Hz      float64 `json:"build2_hz"`
	Build2Timeout int     `json:"build2_timeouts"`

	WallSec float64 `json:"wall_sec"`
}

// WriteText prints the result, one phase a line.
func (r *ViewsResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "views: %d docs, doc size %s (~%d bytes), server %s %s, %s\n", r.Docs, r.DocSize, r.DocBytes,
		orUnknown(r.ServerVendor), orUnknown(r.ServerVersion), r.URL)
	fmt.Fprintf(w, "load (_bulk_docs):          %.0f docs/s (%.2fs)\n", r.LoadHz, r.LoadSec)
	timeouts := ""
	if r.BuildTimeouts > 0 {
		timeouts = fmt.Sprintf(", %d x 500 timeout, the first after %.1fs", r.BuildTimeouts, r.BuildFirstTimeoutSec)
	}
	fmt.Fprintf(w, "first query (index build):  %.0f docs/s (%.2fs%s)\n", r.BuildHz, r.BuildSec, timeouts)
	fmt.Fprintf(w, "key lookups, include_docs:  %.0f q/s, p50 %s, p99 %s (%d lookups, %d clients)\n",
		r.LookupHz, fmtMs(r.LookupP50Ms), fmtMs(r.LookupP99Ms), r.Lookups, r.Concurrency)
	fmt.Fprintf(w, "whole-view stream:          %.0f rows/s (%d rows in %.2fs, first row %s)\n",
		r.StreamHz, r.StreamRows, r.StreamSec, fmtMs(r.StreamFirstRowMs))
	fmt.Fprintf(w, "group=true, _sum:           %s (%d groups)\n", fmtMs(r.SumGroupMs), r.SumGroups)
	fmt.Fprintf(w, "group_level=1, JS reduce:   %s (%d groups of [g, n] keys)\n", fmtMs(r.JSGroupMs), r.JSGroups)
	if r.JSExactTimedOut {
		fmt.Fprintf(w, "group=true, JS reduce:      500 timeout after %s\n", fmtMs(r.JSExactMs))
	} else {
		fmt.Fprintf(w, "group=true, JS reduce:      %s (%d groups, one per [g, n])\n", fmtMs(r.JSExactMs), r.JSExactGroups)
	}
	fmt.Fprintf(w, "%d new docs, then a query: %s (written in %.2fs)\n", r.NewDocs, fmtMs(r.NewDocsQueryMs), r.NewDocsWriteSec)
	fmt.Fprintf(w, "writer before a build:      %d PUTs, p50 %s, p99 %s\n", r.WritesBefore, fmtMs(r.BeforeP50Ms), fmtMs(r.BeforeP99Ms))
	fmt.Fprintf(w, "writer during a build:      %d PUTs, p50 %s, p99 %s; p99 during/before %.2f (build of %d docs: %.0f docs/s, %.2fs)\n",
		r.WritesDuring, fmtMs(r.DuringP50Ms), fmtMs(r.DuringP99Ms), r.P99Ratio, r.Build2Docs, r.Build2Hz, r.Build2Sec)
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// viewsRun is the state of one views run: what was loaded, to check answers.
type viewsRun struct {
	*runner
	res   *ViewsResult
	ddoc  string // "/db/_design/bench"
	g, n  []int  // per doc index, loaded docs and new ones
	docs  int    // docs loaded so far (indexes 0..docs-1)
	batch int
}

// RunViews runs the views workload against cfg.URL. The database is
// deleted before it returns; on failure the partial result comes with the
// error.
func RunViews(ctx context.Context, cfg Config, out, progressW io.Writer) (*ViewsResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Lookups == 0 {
		cfg.Lookups = defaultLookups
	}
	if cfg.NewDocs == 0 {
		cfg.NewDocs = defaultNewDocs
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
	res := &ViewsResult{URL: c.display, Docs: cfg.Docs, DocSize: cfg.DocSize, Lookups: cfg.Lookups,
		Concurrency: cfg.Concurrency, NewDocs: cfg.NewDocs, Client: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	res.DocBytes = len(appendViewDoc(nil, gen, cfg.Docs, 99, 999))
	res.DB = DBPrefix + "views-" + strconv.FormatInt(time.Now().UnixMicro(), 10)
	r := &runner{cfg: cfg, c: c, gen: gen, prog: &progress{w: progressW, every: cfg.ProgressEvery}, res: &Result{DB: res.DB}}
	r.dbPath = "/" + res.DB
	v := &viewsRun{runner: r, res: res, ddoc: r.dbPath + "/_design/bench", batch: cfg.BatchSize}
	// g and n are drawn before anything is timed, from their own seed, so
	// that every run (and every server) indexes the same values
	rng := newPCG(16)
	total := cfg.Docs + cfg.NewDocs
	v.g, v.n = make([]int, total), make([]int, total)
	for i := range total {
		v.g[i], v.n[i] = rng.IntN(100), rng.IntN(1000)
	}

	start := time.Now()
	if err := r.createDB(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = r.cleanUp(ctx) }()
	r.environment(ctx)
	res.ServerVersion, res.ServerVendor = r.res.ServerVersion, r.res.ServerVendor
	err = v.run(ctx)
	res.WallSec = round2(time.Since(start).Seconds())
	if err != nil {
		return res, err
	}
	return res, writeResult(out, cfg.JSON, res)
}

func (v *viewsRun) run(ctx context.Context) error {
	cfg, res := v.cfg, v.res

	// 1. load
	t0 := time.Now()
	if err := v.load(ctx, cfg.Docs, "load"); err != nil {
		return err
	}
	res.LoadSec = round2(time.Since(t0).Seconds())
	res.LoadHz = round2(float64(cfg.Docs) / time.Since(t0).Seconds())

	// 2-3. the design doc, then the first query, which builds all three
	// views (one index per design doc, as in CouchDB)
	v.prog.printf("  building %s\n", v.ddoc)
	b, err := v.build(ctx, v.ddoc, "")
	if err != nil {
		return err
	}
	res.BuildSec, res.BuildTimeouts, res.BuildFirstTimeoutSec = round2(b.elapsed.Seconds()), b.timeouts, round2(b.firstTimeout.Seconds())
	res.BuildHz = round2(float64(cfg.Docs) / b.elapsed.Seconds())

	// 4. key lookups with include_docs
	st, err := v.lookups(ctx)
	if err != nil {
		return err
	}
	res.LookupHz, res.LookupP50Ms, res.LookupP99Ms, res.LookupSec = st.hz, st.p50, st.p99, round2(st.sec)

	// 5. the whole plain view, streamed and counted, never held
	var done atomic.Int64
	stop := v.prog.track("stream by_k", int64(v.docs), &done)
	rows, first, total, err := v.streamRows(ctx, v.ddoc+"/_view/by_k", "", "rows", &done)
	stop()
	if err != nil {
		return err
	}
	if rows != int64(v.docs) {
		return fmt.Errorf("%w: by_k streamed %d rows, want %d", ErrCount, rows, v.docs)
	}
	res.StreamRows, res.StreamFirstRowMs, res.StreamSec = rows, ms(first), round2(total.Seconds())
	res.StreamHz = round2(float64(rows) / total.Seconds())

	// 6. group=true, built-in and JavaScript reduce
	d, groups, err := v.sumGroup(ctx)
	if err != nil {
		return err
	}
	res.SumGroupMs, res.SumGroups = ms(d), groups
	d, groups, _, err = v.jsGroup(ctx, false)
	if err != nil {
		return err
	}
	res.JSGroupMs, res.JSGroups = ms(d), groups
	d, groups, res.JSExactTimedOut, err = v.jsGroup(ctx, true)
	if err != nil {
		return err
	}
	res.JSExactMs, res.JSExactGroups = ms(d), groups

	// 7. new docs, then one query: what the index update of NewDocs costs
	// the first reader after them. The _sum group is the cheapest answer
	// that still proves every new doc was indexed.
	t0 = time.Now()
	if err := v.load(ctx, cfg.NewDocs, "new docs"); err != nil {
		return err
	}
	res.NewDocsWriteSec = round2(time.Since(t0).Seconds())
	if d, _, err = v.sumGroup(ctx); err != nil {
		return err
	}
	res.NewDocsQueryMs = ms(d)

	// 8. user writes before and during a build from scratch
	return v.writesDuringBuild(ctx)
}

// appendViewDoc appends doc i: fabric_bench's body for the size, after
// _id, k, g and n. The view fields come first so a reader of the JSON sees
// them without scrolling past 14 KB; the other workloads' docs are not
// touched (they use appendDoc).
func appendViewDoc(dst []byte, gen *docGen, i, g, n int) []byte {
	dst = append(dst, `{"_id":"doc`...)
	dst = appendPad8(dst, i)
	dst = append(dst, `","k":"k`...)
	dst = appendPad8(dst, i)
	dst = append(dst, `","g":`...)
	dst = strconv.AppendInt(dst, int64(g), 10)
	dst = append(dst, `,"n":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return gen.appendBody(dst)
}

// appendPad8 appends i in decimal, zero-padded to 8 digits, so ids and keys
// sort (and collate) in load order.
func appendPad8(dst []byte, i int) []byte {
	s := strconv.Itoa(i)
	for range 8 - len(s) {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// load writes count new docs (indexes v.docs..) with _bulk_docs
// (runner.loadDocs).
func (v *viewsRun) load(ctx context.Context, count int, name string) error {
	lo, hi := v.docs, v.docs+count
	err := v.loadDocs(ctx, lo, hi, v.batch, v.res.DocBytes, name, func(dst []byte, i int) []byte {
		return appendViewDoc(dst, v.gen, i, v.g[i], v.n[i])
	})
	if err != nil {
		return err
	}
	v.docs = hi
	return nil
}

// loadDocs writes the docs lo..hi-1 (appendDoc renders one) with
// _bulk_docs in batches of batch, Concurrency batches in flight. Bodies
// are built by one producer (docGen is not safe for concurrent use) and at
// most PregenMB ahead of the senders; docBytes sizes their buffers.
func (r *runner) loadDocs(ctx context.Context, lo, hi, batchDocs, docBytes int, name string, appendDoc func(dst []byte, i int) []byte) error {
	cfg := r.cfg
	count := hi - lo
	batchBytes := batchDocs*(docBytes+1) + 16
	nb := (count + batchDocs - 1) / batchDocs
	ahead := max(1, min(nb, cfg.PregenMB<<20/batchBytes))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan batch, ahead)
	go func() {
		defer close(work)
		for b := lo; b < hi; b += batchDocs {
			// a fresh buffer per batch: the transport may still hold a sent body
			buf := make([]byte, 0, batchBytes)
			buf = append(buf, `{"docs":[`...)
			for i := b; i < min(b+batchDocs, hi); i++ {
				if i > b {
					buf = append(buf, ',')
				}
				buf = appendDoc(buf, i)
			}
			buf = append(buf, "]}"...)
			select {
			case work <- batch{docs: min(b+batchDocs, hi) - b, body: buf}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		done     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		path     = r.dbPath + "/_bulk_docs"
	)
	stop := r.prog.track(name, int64(count), &done)
	defer stop()
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for bt := range work {
				st, err := r.c.roundTrip(ctx, http.MethodPost, path, "", bt.body, &buf)
				if err == nil && st != http.StatusCreated && st != http.StatusAccepted {
					err = statusError(http.MethodPost, path, st, buf.Bytes())
				}
				if err == nil && bytes.Contains(buf.Bytes(), []byte(`"error"`)) {
					err = fmt.Errorf("%w: %s", ErrDocErrors, firstDocError(buf.Bytes()))
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(int64(bt.docs))
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func (v *viewsRun) putDDoc(ctx context.Context, path, suffix string) error {
	var buf bytes.Buffer
	st, err := v.c.roundTrip(ctx, http.MethodPut, path, "", viewsDDoc(suffix), &buf)
	if err != nil {
		return err
	}
	if st != http.StatusCreated && st != http.StatusAccepted {
		return statusError(http.MethodPut, path, st, buf.Bytes())
	}
	return nil
}

type buildTime struct {
	elapsed, firstTimeout time.Duration
	timeouts              int
}

// build PUTs the design doc, then sends by_k?limit=1 until it answers 200,
// and returns how long that took from before the PUT: CouchDB's background
// indexer (ken) starts building when the design doc is written. A 500 whose error is "timeout" is CouchDB giving up on the request
// while the build goes on (fabric's 60 s request timeout): it is counted and
// the query sent again, so the figure is still the whole build.
func (v *viewsRun) build(ctx context.Context, ddoc, suffix string) (buildTime, error) {
	var b buildTime
	ctx, cancel := context.WithTimeout(ctx, buildCap)
	defer cancel()
	var buf bytes.Buffer
	t0 := time.Now()
	if err := v.putDDoc(ctx, ddoc, suffix); err != nil {
		return b, err
	}
	view := ddoc + "/_view/by_k" + suffix
	for {
		st, err := v.c.roundTrip(ctx, http.MethodGet, view, "limit=1", nil, &buf)
		if err != nil {
			return b, err
		}
		if st == http.StatusOK {
			b.elapsed = time.Since(t0)
			return b, nil
		}
		var e struct {
			Error string `json:"error"`
		}
		if st != http.StatusInternalServerError || json.Unmarshal(buf.Bytes(), &e) != nil || e.Error != "timeout" {
			return b, statusError(http.MethodGet, view, st, buf.Bytes())
		}
		if b.timeouts == 0 {
			b.firstTimeout = time.Since(t0)
		}
		b.timeouts++
		v.prog.printf("  %s: 500 timeout after %.1fs, asking again\n", view, time.Since(t0).Seconds())
	}
}

// lookups makes Lookups key=…&include_docs=true queries of by_k over
// random loaded keys from Concurrency clients, each checked to return the
// one row with its doc.
func (v *viewsRun) lookups(ctx context.Context) (stats, error) {
	n := v.cfg.Lookups
	queries := make([]string, n) // built before the clock
	rng := newPCG(0)
	for i := range queries {
		key := appendPad8([]byte(`"k`), rng.IntN(v.docs))
		queries[i] = "include_docs=true&key=" + url.QueryEscape(string(key)+`"`)
	}
	path := v.ddoc + "/_view/by_k"
	var (
		next     atomic.Int64
		done     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		lats     = make([][]time.Duration, v.cfg.Concurrency)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := v.prog.track("lookups", int64(n), &done)
	start := time.Now()
	for w := range v.cfg.Concurrency {
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
				st, err := v.c.roundTrip(ctx, http.MethodGet, path, queries[i], nil, &buf)
				lats[w] = append(lats[w], time.Since(t0))
				if err == nil && st != http.StatusOK {
					err = statusError(http.MethodGet, path, st, buf.Bytes())
				}
				if err == nil {
					err = checkLookup(buf.Bytes())
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("GET %s?%s: %w", path, queries[i], err); cancel() })
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

// checkLookup checks a key lookup's answer: one row, with a doc. The row
// scanner does it without decoding the 14 KB doc, which at thousands of
// queries a second would be the client's CPU, not the server's.
func checkLookup(b []byte) error {
	sc := rowScanner{key: "rows"}
	if err := sc.scan(b); err != nil {
		return fmt.Errorf("%w: %w", ErrResponse, err)
	}
	if !sc.finished || !sc.found {
		return fmt.Errorf("%w: no rows in %.200q", ErrResponse, b)
	}
	if sc.rows != 1 {
		return fmt.Errorf("%w: %d rows, want 1", ErrCount, sc.rows)
	}
	i := bytes.Index(b, []byte(`"doc":`))
	if i < 0 || !bytes.HasPrefix(bytes.TrimLeft(b[i+len(`"doc":`):], " "), []byte("{")) {
		return fmt.Errorf("%w: row without its doc in %.200q", ErrResponse, b)
	}
	return nil
}

// getTimed GETs path?query, reads the whole answer and returns how long
// that took; decoding is left to the caller, outside the time.
func (v *viewsRun) getTimed(ctx context.Context, path, query string) ([]byte, time.Duration, error) {
	var buf bytes.Buffer
	t0 := time.Now()
	st, err := v.c.roundTrip(ctx, http.MethodGet, path, query, nil, &buf)
	d := time.Since(t0)
	if err != nil {
		return nil, d, err
	}
	if st != http.StatusOK {
		return nil, d, statusError(http.MethodGet, path, st, buf.Bytes())
	}
	return buf.Bytes(), d, nil
}

// sumGroup times group=true on by_group and checks every group's sum
// against the docs loaded so far.
func (v *viewsRun) sumGroup(ctx context.Context) (time.Duration, int, error) {
	b, d, err := v.getTimed(ctx, v.ddoc+"/_view/by_group", "group=true")
	if err != nil {
		return d, 0, err
	}
	want := map[int]float64{}
	for i := range v.docs {
		want[v.g[i]] += float64(v.n[i])
	}
	groups, err := checkSumGroups(b, want)
	return d, groups, err
}

func checkSumGroups(b []byte, want map[int]float64) (int, error) {
	var resp struct {
		Rows []struct {
			Key   int     `json:"key"`
			Value float64 `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return 0, fmt.Errorf("%w: by_group?group=true: %w", ErrResponse, err)
	}
	if len(resp.Rows) != len(want) {
		return len(resp.Rows), fmt.Errorf("%w: by_group?group=true: %d groups, want %d", ErrCount, len(resp.Rows), len(want))
	}
	for _, row := range resp.Rows {
		if w, ok := want[row.Key]; !ok || row.Value != w {
			return len(resp.Rows), fmt.Errorf("%w: by_group?group=true: group %d sums to %v, want %v", ErrCount, row.Key, row.Value, w)
		}
	}
	return len(resp.Rows), nil
}

// jsAgg is by_n's reduce value: how many docs, the largest n.
type jsAgg struct {
	Count int `json:"count"`
	Max   int `json:"max"`
}

// jsGroup times a grouped query of by_n, group_level=1 ([g]: 100 groups,
// the _sum query's grouping) or group=true ([g, n]: about as many groups
// as docs), and checks each group's count and max against the docs loaded
// so far. With group=true, a 500 timeout is an answer, not a failure:
// CouchDB calls its JavaScript process for every group and passes its 60 s
// request timeout at 20,000 docs (5.5 s for 2,000 here); timedOut says so.
func (v *viewsRun) jsGroup(ctx context.Context, exact bool) (d time.Duration, groups int, timedOut bool, err error) {
	query := "group_level=1"
	if exact {
		query = "group=true"
	}
	path := v.ddoc + "/_view/by_n"
	var buf bytes.Buffer
	t0 := time.Now()
	st, err := v.c.roundTrip(ctx, http.MethodGet, path, query, nil, &buf)
	d = time.Since(t0)
	if err != nil {
		return d, 0, false, err
	}
	if st != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if exact && st == http.StatusInternalServerError && json.Unmarshal(buf.Bytes(), &e) == nil && e.Error == "timeout" {
			v.prog.printf("  %s?%s: 500 timeout after %.1fs\n", path, query, d.Seconds())
			return d, 0, true, nil
		}
		return d, 0, false, statusError(http.MethodGet, path, st, buf.Bytes())
	}
	want := map[string]jsAgg{}
	for i := range v.docs {
		key := fmt.Sprint([]int{v.g[i]})
		if exact {
			key = fmt.Sprint([]int{v.g[i], v.n[i]})
		}
		a := want[key]
		a.Count++
		a.Max = max(a.Max, v.n[i])
		want[key] = a
	}
	groups, err = checkJSGroups(buf.Bytes(), query, want)
	return d, groups, false, err
}

// checkJSGroups checks by_n's grouped rows against want, keyed by
// fmt.Sprint of the key's integers.
func checkJSGroups(b []byte, query string, want map[string]jsAgg) (int, error) {
	var resp struct {
		Rows []struct {
			Key   []int `json:"key"`
			Value jsAgg `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return 0, fmt.Errorf("%w: by_n?%s: %w", ErrResponse, query, err)
	}
	if len(resp.Rows) != len(want) {
		return len(resp.Rows), fmt.Errorf("%w: by_n?%s: %d groups, want %d", ErrCount, query, len(resp.Rows), len(want))
	}
	for _, row := range resp.Rows {
		k := fmt.Sprint(row.Key)
		if w, ok := want[k]; !ok || row.Value != w {
			return len(resp.Rows), fmt.Errorf("%w: by_n?%s: group %s is %+v, want %+v", ErrCount, query, k, row.Value, w)
		}
	}
	return len(resp.Rows), nil
}

// writesDuringBuild runs the writer alone, then PUTs a second design doc
// (its views renamed, so its signature differs and its index is built from
// nothing) and keeps the writer going until that index answers.
func (v *viewsRun) writesDuringBuild(ctx context.Context) error {
	res := v.res
	w := &probeWriter{r: v.runner}
	lat, err := w.run(ctx, func() bool { return w.elapsed() < viewsWriterBefore })
	if err != nil {
		return err
	}
	st := summarize(0, 0, lat)
	res.WritesBefore, res.BeforeP50Ms, res.BeforeP99Ms = len(lat), st.p50, st.p99

	ddoc2 := v.dbPath + "/_design/bench2"
	res.Build2Docs = v.docs + w.n // the probes are docs too
	var building atomic.Bool
	building.Store(true)
	type built struct {
		b   buildTime
		err error
	}
	ch := make(chan built, 1)
	w2 := &probeWriter{r: v.runner, n: w.n}
	v.prog.printf("  building %s with the writer going\n", ddoc2)
	go func() {
		defer building.Store(false)
		b, err := v.build(ctx, ddoc2, "2")
		ch <- built{b: b, err: err}
	}()
	// at least one PUT, even when the build is over before the first
	lat, err = w2.run(ctx, func() bool { return building.Load() || w2.n == w.n })
	bt := <-ch
	if err != nil {
		return err
	}
	if bt.err != nil {
		return bt.err
	}
	st = summarize(0, 0, lat)
	res.WritesDuring, res.DuringP50Ms, res.DuringP99Ms = len(lat), st.p50, st.p99
	if res.BeforeP99Ms > 0 {
		res.P99Ratio = round2(res.DuringP99Ms / res.BeforeP99Ms)
	}
	res.Build2Sec, res.Build2Timeout = round2(bt.b.elapsed.Seconds()), bt.b.timeouts
	res.Build2Hz = round2(float64(res.Build2Docs) / bt.b.elapsed.Seconds())
	return nil
}

// ViewsDocs is the views workload's --docs when not given: the issue's
// 20,000 (fabric_bench's 100,000 would keep CouchDB indexing for five
// minutes).
const ViewsDocs = 20000
