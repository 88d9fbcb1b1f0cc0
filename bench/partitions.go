package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The partitions workload (issue 19), over the public HTTP API only, so
// that the same run measures settee and a real CouchDB: the same queries on
// a partitioned database and on a global (non-partitioned) one, both with
// q=8 unless --q says otherwise.
//
//  1. create both, the partitioned one with ?partitioned=true (checked in
//     its db info: a server that ignores the flag measures nothing);
//  2. load the same Docs docs into both (fabric_bench's shapes after _id,
//     part, g in 0..99 and n in 0..999), doc i in partition p<i mod P>: id
//     p<k>:doc<i> in both (a colon is legal in a global db's ids) and part
//     "p<k>", so that the global queries can select a partition;
//  3. a design doc: in the partitioned db by_g (g -> n,
//     options.partitioned), in the global db by_part_g ([part, g] -> n);
//     its build timed to the first queries (below);
//  4. a Mango index: [g] in the partitioned db (partitioned), [part, g] in
//     the global db; its build timed the same way;
//  5. Lookups queries of each kind on each db, Concurrency clients, over
//     random partitions (the same partitions and ranges on both):
//     - view: a range of g within the partition,
//     /db/_partition/p<k>/_design/bench/_view/by_g?startkey=lo&endkey=hi
//     against by_part_g?startkey=["p<k>",lo]&endkey=["p<k>",hi];
//     - _all_docs: /db/_partition/p<k>/_all_docs against _all_docs from
//     "p<k>:" to "p<k>;" (';' follows ':'), the partition's whole id range;
//     - _find: /db/_partition/p<k>/_find {"g": {"$gte": lo, "$lte": hi}}
//     against _find {"part": "p<k>", "g": {…}}; _explain checks first that
//     each is planned on its index.
//
// The first query of a global index fans out to all q shards, so it
// waits for every shard's build; a partition's first query waits for its
// own shard's only. The partitioned build is therefore timed to one first
// query per shard range (found with GET /db/_shards/{docid} before the
// clock; every partition when the server has no _shards), sent together as
// the global query's fan-out is, and the global build to its one first
// query. Every answer of the timed phases is checked against what was
// loaded (the ids in order, the values), so a figure is never one of a
// server that answered something else.

// WorkloadPartitions names the partitions workload (--workload).
const WorkloadPartitions = "partitions"

// PartitionsDocs is the partitions workload's --docs when not given: two
// databases of 20,000 docs each.
const PartitionsDocs = 20000

// Defaults of the partitions workload: its partitions, its shards and
// Config.Lookups (the queries of each kind on each db).
const (
	DefaultPartitions      = 100
	PartitionsQ            = 8
	defaultPartitionLookup = 1000
)

// partitionQueryLimit is CouchDB's [query_server_config]
// partition_query_limit: a partition query returns at most this many rows,
// so a partition must hold fewer docs for its _all_docs to be whole.
const partitionQueryLimit = 2000

// partitionWidth is how many values of g (in 0..99) a view or _find range
// spans: about a tenth of a partition's docs.
const partitionWidth = 10

// The design docs, the views and the Mango indexes.
const (
	partDDoc          = "bench"
	partView          = "by_g"
	globalView        = "by_part_g"
	partMangoDDoc     = "bench-mango"
	partMangoIndex    = "bench-g"
	globalMangoIndex  = "bench-part-g"
	mapPartitionedByG = `function(doc){ if (doc.g !== undefined) emit(doc.g, doc.n); }`
	mapGlobalByPartG  = `function(doc){ if (doc.g !== undefined) emit([doc.part, doc.g], doc.n); }`
)

// ErrNoPartitions is returned when the server has no partitioned
// databases: it refused ?partitioned=true, or created a database whose
// info does not say props.partitioned.
var ErrNoPartitions = errors.New("bench: the server has no partitioned databases")

// PartitionsSide is one database's figures for one kind of query. Rates
// are per second, latencies in milliseconds.
type PartitionsSide struct {
	Hz    float64 `json:"hz"` // queries/s, all clients together
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	Sec   float64 `json:"sec"`
	Rows  int64   `json:"rows"` // rows (docs for _find) of all answers
}

// PartitionsQuery is one kind of query on both databases.
type PartitionsQuery struct {
	Partitioned PartitionsSide `json:"partitioned"`
	Global      PartitionsSide `json:"global"`
	Ratio       float64        `json:"ratio"` // partitioned q/s / global q/s
}

// PartitionsBuild is one index's build on one database: from the design
// doc's PUT (or POST _index) until its first queries answered 200, 500
// timeouts included (the query is then sent again).
type PartitionsBuild struct {
	Sec      float64 `json:"sec"`
	Hz       float64 `json:"hz"`      // Docs / Sec
	Queries  int     `json:"queries"` // first queries waited for: shard ranges (partitioned) or 1
	Timeouts int     `json:"timeouts"`
}

// PartitionsResult is what the partitions workload measures.
type PartitionsResult struct {
	URL           string `json:"url"` // without credentials
	DB            string `json:"db"`  // the partitioned one
	GlobalDB      string `json:"global_db"`
	Docs          int    `json:"docs"` // in each db
	Partitions    int    `json:"partitions"`
	DocSize       string `json:"doc_size"`
	DocBytes      int    `json:"doc_bytes"`
	Lookups       int    `json:"lookups"` // queries of each kind on each db
	Concurrency   int    `json:"concurrency"`
	Q             int    `json:"q"` // as the server reports it (0: unknown)
	ServerVersion string `json:"server_version"`
	ServerVendor  string `json:"server_vendor"`
	Client        string `json:"client"`

	LoadSec       float64 `json:"load_sec"` // the partitioned db
	LoadHz        float64 `json:"load_hz"`  // docs/s
	GlobalLoadSec float64 `json:"global_load_sec"`
	GlobalLoadHz  float64 `json:"global_load_hz"`

	ViewBuild        PartitionsBuild `json:"view_build"`
	GlobalViewBuild  PartitionsBuild `json:"global_view_build"`
	MangoBuild       PartitionsBuild `json:"mango_build"`
	GlobalMangoBuild PartitionsBuild `json:"global_mango_build"`

	View    PartitionsQuery `json:"view"`
	AllDocs PartitionsQuery `json:"all_docs"`
	Find    PartitionsQuery `json:"find"`

	WallSec float64 `json:"wall_sec"`
}

// WriteText prints the result: a line a phase, the partitioned db's figure,
// the global db's, and for the queries their ratio.
func (r *PartitionsResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "partitions: %d docs in each db, %d partitions, q=%d, doc size %s (~%d bytes), server %s %s, %s\n",
		r.Docs, r.Partitions, r.Q, r.DocSize, r.DocBytes, orUnknown(r.ServerVendor), orUnknown(r.ServerVersion), r.URL)
	const row = "%-27s %-34s %-34s %s\n"
	fmt.Fprintf(w, row, "", "partitioned", "global", "ratio")
	load := func(hz, sec float64) string { return fmt.Sprintf("%.0f docs/s (%.2fs)", hz, sec) }
	fmt.Fprintf(w, row, "load (_bulk_docs):", load(r.LoadHz, r.LoadSec), load(r.GlobalLoadHz, r.GlobalLoadSec), "")
	build := func(b PartitionsBuild) string {
		s := fmt.Sprintf("%.0f docs/s (%.2fs", b.Hz, b.Sec)
		if b.Queries > 1 {
			s += fmt.Sprintf(", %d ranges", b.Queries)
		}
		if b.Timeouts > 0 {
			s += fmt.Sprintf(", %d x 500 timeout", b.Timeouts)
		}
		return s + ")"
	}
	fmt.Fprintf(w, row, "view build (first query):", build(r.ViewBuild), build(r.GlobalViewBuild), "")
	fmt.Fprintf(w, row, "mango build (first _find):", build(r.MangoBuild), build(r.GlobalMangoBuild), "")
	side := func(s PartitionsSide) string {
		return fmt.Sprintf("%.0f q/s, p50 %s, p99 %s", s.Hz, fmtMs(s.P50Ms), fmtMs(s.P99Ms))
	}
	for _, q := range []struct {
		name string
		q    PartitionsQuery
	}{
		{"view, g range:", r.View},
		{"_all_docs of a partition:", r.AllDocs},
		{"_find, g range:", r.Find},
	} {
		fmt.Fprintf(w, row, q.name, side(q.q.Partitioned), side(q.q.Global), fmt.Sprintf("%.2f", q.q.Ratio))
	}
	rows := func(q PartitionsQuery) float64 { return float64(q.Partitioned.Rows) / float64(max(1, r.Lookups)) }
	fmt.Fprintf(w, "(%d queries of each kind on each db, %d clients; rows an answer: view %.1f, _all_docs %.1f, _find %.1f)\n",
		r.Lookups, r.Concurrency, rows(r.View), rows(r.AllDocs), rows(r.Find))
}

// partitionsRun is the state of one run: the two databases and what was
// loaded, to check answers.
type partitionsRun struct {
	cfg    Config
	c      *client
	prog   *progress
	res    *PartitionsResult
	part   *runner // the partitioned db
	global *runner
	g, n   []int   // per doc index
	byPart [][]int // per partition, its doc indexes ascending (id order)
}

// partName is partition k's name, "p<k>"; doc i is in partition i mod P.
func (p *partitionsRun) partName(k int) string { return "p" + strconv.Itoa(k) }

// docPartID is the id of doc i in both dbs: p<k>:doc<i, 8 digits>.
func (p *partitionsRun) docPartID(i int) string {
	return p.partName(i%p.cfg.Partitions) + ":" + docID(i)
}

// appendPartitionDoc appends doc i of partition part: fabric_bench's body
// for the size after _id, part, g and n.
func appendPartitionDoc(dst []byte, gen *docGen, part string, i, g, n int) []byte {
	dst = append(dst, `{"_id":"`...)
	dst = append(dst, part...)
	dst = append(dst, ":doc"...)
	dst = appendPad8(dst, i)
	dst = append(dst, `","part":"`...)
	dst = append(dst, part...)
	dst = append(dst, `","g":`...)
	dst = strconv.AppendInt(dst, int64(g), 10)
	dst = append(dst, `,"n":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return gen.appendBody(dst)
}

// RunPartitions runs the partitions workload against cfg.URL. Both
// databases are deleted before it returns; on failure the partial result
// comes with the error (ErrNoPartitions when the server has no
// partitioned databases).
func RunPartitions(ctx context.Context, cfg Config, out, progressW io.Writer) (*PartitionsResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Lookups == 0 {
		cfg.Lookups = defaultPartitionLookup
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.Q == 0 {
		cfg.Q = PartitionsQ
	}
	if per := (cfg.Docs + cfg.Partitions - 1) / cfg.Partitions; per >= partitionQueryLimit {
		return nil, fmt.Errorf("%w: %d docs in %d partitions is %d a partition; a partition query answers at most %d rows (CouchDB's partition_query_limit): use more --partitions",
			ErrConfig, cfg.Docs, cfg.Partitions, per, partitionQueryLimit)
	}
	if out == nil {
		out = io.Discard
	}
	if progressW == nil {
		progressW = io.Discard
	}
	c, err := newClient(cfg.URL, max(cfg.Concurrency, cfg.Q)+2)
	if err != nil {
		return nil, err
	}
	defer c.close()
	// one generator per db, the same seed: both dbs get the same bytes
	genP, err := newDocGen(cfg.DocSize, 1)
	if err != nil {
		return nil, err
	}
	genG, _ := newDocGen(cfg.DocSize, 1)
	res := &PartitionsResult{URL: c.display, Docs: cfg.Docs, Partitions: cfg.Partitions, DocSize: cfg.DocSize,
		Lookups: cfg.Lookups, Concurrency: cfg.Concurrency, Client: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	res.DocBytes = len(appendPartitionDoc(nil, genP, "p"+strconv.Itoa(cfg.Partitions-1), cfg.Docs, 99, 999))
	ts := strconv.FormatInt(time.Now().UnixMicro(), 10)
	res.DB, res.GlobalDB = DBPrefix+"partitioned-"+ts, DBPrefix+"global-"+ts
	prog := &progress{w: progressW, every: cfg.ProgressEvery}
	p := &partitionsRun{cfg: cfg, c: c, prog: prog, res: res,
		part:   &runner{cfg: cfg, c: c, gen: genP, prog: prog, res: &Result{DB: res.DB}, dbPath: "/" + res.DB},
		global: &runner{cfg: cfg, c: c, gen: genG, prog: prog, res: &Result{DB: res.GlobalDB}, dbPath: "/" + res.GlobalDB},
	}
	// g and n are drawn before anything is timed, from their own seed, so
	// that every run (and every server) indexes the same values
	rng := newPCG(19)
	p.g, p.n = make([]int, cfg.Docs), make([]int, cfg.Docs)
	p.byPart = make([][]int, cfg.Partitions)
	for i := range cfg.Docs {
		p.g[i], p.n[i] = rng.IntN(100), rng.IntN(1000)
		k := i % cfg.Partitions
		p.byPart[k] = append(p.byPart[k], i)
	}

	start := time.Now()
	err = p.run(ctx)
	res.WallSec = round2(time.Since(start).Seconds())
	if err != nil {
		return res, err
	}
	return res, writeResult(out, cfg.JSON, res)
}

func (p *partitionsRun) run(ctx context.Context) error {
	cfg, res := p.cfg, p.res

	// 1. the databases
	if err := p.createDB(ctx, p.part, true); err != nil {
		return err
	}
	defer func() { _ = p.part.cleanUp(ctx) }()
	if err := p.createDB(ctx, p.global, false); err != nil {
		return err
	}
	defer func() { _ = p.global.cleanUp(ctx) }()
	p.part.environment(ctx)
	res.ServerVersion, res.ServerVendor, res.Q = p.part.res.ServerVersion, p.part.res.ServerVendor, p.part.res.Q
	if err := p.checkProps(ctx); err != nil {
		return err
	}

	// 2. the same docs in both
	for _, db := range []struct {
		r       *runner
		name    string
		sec, hz *float64
	}{
		{p.part, "load partitioned", &res.LoadSec, &res.LoadHz},
		{p.global, "load global", &res.GlobalLoadSec, &res.GlobalLoadHz},
	} {
		t0 := time.Now()
		err := db.r.loadDocs(ctx, 0, cfg.Docs, cfg.BatchSize, res.DocBytes, db.name, func(dst []byte, i int) []byte {
			return appendPartitionDoc(dst, db.r.gen, p.partName(i%cfg.Partitions), i, p.g[i], p.n[i])
		})
		if err != nil {
			return err
		}
		*db.sec, *db.hz = round2(time.Since(t0).Seconds()), round2(float64(cfg.Docs)/time.Since(t0).Seconds())
	}
	if err := p.checkCounts(ctx); err != nil {
		return err
	}

	// every query of the run, built before the clocks: the same
	// partitions and ranges on both dbs
	qs := p.queries()

	// 3-4. the builds
	reps := p.shardReps(ctx)
	var err error
	if res.ViewBuild, err = p.build(ctx, http.MethodPut, p.part.dbPath+"/_design/"+partDDoc, partDDocBody(), qs.view.firstPart(reps)); err != nil {
		return err
	}
	if res.GlobalViewBuild, err = p.build(ctx, http.MethodPut, p.global.dbPath+"/_design/"+partDDoc, globalDDocBody(), qs.view.global[:1]); err != nil {
		return err
	}
	if res.MangoBuild, err = p.build(ctx, http.MethodPost, p.part.dbPath+"/_index", partMangoIndexBody(), qs.find.firstPart(reps)); err != nil {
		return err
	}
	if res.GlobalMangoBuild, err = p.build(ctx, http.MethodPost, p.global.dbPath+"/_index", globalMangoIndexBody(), qs.find.global[:1]); err != nil {
		return err
	}
	// the finds' plans: each on its index, not _all_docs
	if err := p.checkPlan(ctx, qs.find.part[0], partMangoIndex); err != nil {
		return err
	}
	if err := p.checkPlan(ctx, qs.find.global[0], globalMangoIndex); err != nil {
		return err
	}

	// 5. the queries
	for _, k := range []struct {
		name string
		q    *pqueries
		out  *PartitionsQuery
	}{
		{"view", &qs.view, &res.View},
		{"_all_docs", &qs.allDocs, &res.AllDocs},
		{"_find", &qs.find, &res.Find},
	} {
		var err error
		if k.out.Partitioned, err = p.timed(ctx, k.name+" partitioned", k.q.part, k.q.check); err != nil {
			return err
		}
		if k.out.Global, err = p.timed(ctx, k.name+" global", k.q.global, k.q.check); err != nil {
			return err
		}
		if k.out.Global.Hz > 0 {
			k.out.Ratio = round2(k.out.Partitioned.Hz / k.out.Global.Hz)
		}
	}
	return nil
}

// createDB PUTs r's database with ?q= (and ?n=), and ?partitioned=true
// for the partitioned one. A 400 to the latter is ErrNoPartitions.
func (p *partitionsRun) createDB(ctx context.Context, r *runner, partitioned bool) error {
	q := url.Values{}
	q.Set("q", strconv.Itoa(p.cfg.Q))
	if p.cfg.N > 0 {
		q.Set("n", strconv.Itoa(p.cfg.N))
	}
	if partitioned {
		q.Set("partitioned", "true")
	}
	var buf bytes.Buffer
	st, err := p.c.roundTrip(ctx, http.MethodPut, r.dbPath, q.Encode(), nil, &buf)
	if err != nil {
		return fmt.Errorf("bench: creating %s: %w", r.res.DB, err)
	}
	if st != http.StatusCreated && st != http.StatusAccepted {
		err := statusError(http.MethodPut, r.dbPath+"?"+q.Encode(), st, buf.Bytes())
		if partitioned && st == http.StatusBadRequest {
			err = fmt.Errorf("%w: %w", ErrNoPartitions, err)
		}
		return err
	}
	p.prog.printf("  created %s\n", r.res.DB)
	return nil
}

// checkProps checks that one db is partitioned and the other is not.
func (p *partitionsRun) checkProps(ctx context.Context) error {
	for _, db := range []struct {
		r    *runner
		want bool
	}{{p.part, true}, {p.global, false}} {
		var info struct {
			Props struct {
				Partitioned bool `json:"partitioned"`
			} `json:"props"`
		}
		if err := p.c.getJSON(ctx, db.r.dbPath, "", &info); err != nil {
			return err
		}
		if info.Props.Partitioned != db.want {
			err := fmt.Errorf("%w: GET %s: props.partitioned is %v, want %v", ErrResponse, db.r.dbPath, info.Props.Partitioned, db.want)
			if db.want {
				err = fmt.Errorf("%w: PUT ?partitioned=true created a database without props.partitioned", ErrNoPartitions)
			}
			return err
		}
	}
	return nil
}

// checkCounts checks both dbs' doc counts, and one partition's info in the
// partitioned db.
func (p *partitionsRun) checkCounts(ctx context.Context) error {
	for _, r := range []*runner{p.part, p.global} {
		var info dbInfo
		if err := p.c.getJSON(ctx, r.dbPath, "", &info); err != nil {
			return err
		}
		if info.DocCount != int64(p.cfg.Docs) {
			return fmt.Errorf("%w: %s: doc_count %d after adding %d docs", ErrCount, r.res.DB, info.DocCount, p.cfg.Docs)
		}
	}
	var pinfo struct {
		Partition string `json:"partition"`
		DocCount  int64  `json:"doc_count"`
	}
	path := p.part.dbPath + "/_partition/" + p.partName(0)
	if err := p.c.getJSON(ctx, path, "", &pinfo); err != nil {
		return err
	}
	if pinfo.Partition != p.partName(0) || pinfo.DocCount != int64(len(p.byPart[0])) {
		return fmt.Errorf("%w: GET %s: partition %q, doc_count %d, want %q, %d", ErrCount, path, pinfo.Partition, pinfo.DocCount, p.partName(0), len(p.byPart[0]))
	}
	return nil
}

// shardReps returns one partition per shard range of the partitioned db
// (GET /db/_shards/p<k>:x for each), so that the builds can wait for
// every shard; all partitions when the server does not answer _shards.
func (p *partitionsRun) shardReps(ctx context.Context) []int {
	var reps []int
	seen := map[string]bool{}
	for k := range p.cfg.Partitions {
		var sh struct {
			Range string `json:"range"`
		}
		if err := p.c.getJSON(ctx, p.part.dbPath+"/_shards/"+url.PathEscape(p.partName(k)+":x"), "", &sh); err != nil || sh.Range == "" {
			p.prog.printf("  no shard ranges (%v): the builds wait for a first query of every partition\n", err)
			reps = reps[:0]
			for k := range p.cfg.Partitions {
				reps = append(reps, k)
			}
			return reps
		}
		if !seen[sh.Range] {
			seen[sh.Range] = true
			reps = append(reps, k)
		}
	}
	return reps
}

// pquery is one timed request and what its answer must hold.
type pquery struct {
	method, path, query string
	body                []byte
	part                int   // the partition
	want                []int // doc indexes, in the order of the answer
}

// pqueries is one kind of query: the same queries on both dbs, and the
// check of an answer.
type pqueries struct {
	part, global []pquery
	check        func(q pquery, b []byte) (int, error)
}

// firstPart is the partitioned db's first query of each partition of reps
// (the first query of that partition among part, else a new one like it).
func (q *pqueries) firstPart(reps []int) []pquery {
	out := make([]pquery, 0, len(reps))
	for _, k := range reps {
		i := slices.IndexFunc(q.part, func(pq pquery) bool { return pq.part == k })
		if i >= 0 {
			out = append(out, q.part[i])
			continue
		}
		pq := q.part[0]
		pq.path = replacePartition(pq.path, pq.part, k)
		pq.part = k
		out = append(out, pq)
	}
	return out
}

// replacePartition rewrites /db/_partition/p<from>/… to p<to>.
func replacePartition(path string, from, to int) string {
	old := "/_partition/p" + strconv.Itoa(from) + "/"
	i := strings.Index(path, old)
	if i < 0 {
		return path
	}
	return path[:i] + "/_partition/p" + strconv.Itoa(to) + "/" + path[i+len(old):]
}

type partitionQueries struct {
	view, allDocs, find pqueries
}

// queries builds Lookups queries of each kind for both dbs, over random
// partitions and ranges of g (seeded: every run asks the same).
func (p *partitionsRun) queries() partitionQueries {
	n := p.cfg.Lookups
	rng := newPCG(2)
	var qs partitionQueries
	qs.view.check, qs.allDocs.check, qs.find.check = p.checkViewRows, p.checkAllDocsRows, p.checkFindAnswer
	limit := strconv.Itoa(len(p.byPart[0]) + 1) // the largest partition's docs, and one
	for range n {
		k := rng.IntN(p.cfg.Partitions)
		lo := rng.IntN(100 - partitionWidth + 1)
		hi := lo + partitionWidth - 1
		part := p.partName(k)
		inRange := p.inRange(k, lo, hi)
		pp := p.part.dbPath + "/_partition/" + part

		// the view: rows by key, then id; the global key starts with the partition
		q := url.Values{}
		q.Set("startkey", strconv.Itoa(lo))
		q.Set("endkey", strconv.Itoa(hi))
		qs.view.part = append(qs.view.part, pquery{method: http.MethodGet, path: pp + "/_design/" + partDDoc + "/_view/" + partView,
			query: q.Encode(), part: k, want: inRange})
		q = url.Values{}
		q.Set("startkey", `["`+part+`",`+strconv.Itoa(lo)+`]`)
		q.Set("endkey", `["`+part+`",`+strconv.Itoa(hi)+`]`)
		qs.view.global = append(qs.view.global, pquery{method: http.MethodGet, path: p.global.dbPath + "/_design/" + partDDoc + "/_view/" + globalView,
			query: q.Encode(), part: k, want: inRange})

		// _all_docs: the whole partition, in id order
		qs.allDocs.part = append(qs.allDocs.part, pquery{method: http.MethodGet, path: pp + "/_all_docs", part: k, want: p.byPart[k]})
		q = url.Values{}
		q.Set("startkey", `"`+part+`:"`)
		q.Set("endkey", `"`+part+`;"`)
		qs.allDocs.global = append(qs.allDocs.global, pquery{method: http.MethodGet, path: p.global.dbPath + "/_all_docs",
			query: q.Encode(), part: k, want: p.byPart[k]})

		// _find: the view's range, checked as a set
		rangeSel := `"g":{"$gte":` + strconv.Itoa(lo) + `,"$lte":` + strconv.Itoa(hi) + `}`
		tail := `},"fields":["_id","g"],"limit":` + limit + `}`
		qs.find.part = append(qs.find.part, pquery{method: http.MethodPost, path: pp + "/_find",
			body: []byte(`{"selector":{` + rangeSel + tail), part: k, want: inRange})
		qs.find.global = append(qs.find.global, pquery{method: http.MethodPost, path: p.global.dbPath + "/_find",
			body: []byte(`{"selector":{"part":"` + part + `",` + rangeSel + tail), part: k, want: inRange})
	}
	return qs
}

// inRange is the docs of partition k with lo <= g <= hi, by g then id (a
// view's order).
func (p *partitionsRun) inRange(k, lo, hi int) []int {
	var out []int
	for _, i := range p.byPart[k] {
		if p.g[i] >= lo && p.g[i] <= hi {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return p.g[a] - p.g[b] })
	return out
}

func partDDocBody() []byte {
	return []byte(`{"language":"javascript","options":{"partitioned":true},"views":{"` + partView + `":{"map":` +
		strconv.Quote(mapPartitionedByG) + `}}}`)
}

func globalDDocBody() []byte {
	return []byte(`{"language":"javascript","views":{"` + globalView + `":{"map":` + strconv.Quote(mapGlobalByPartG) + `}}}`)
}

func partMangoIndexBody() []byte {
	return []byte(`{"index":{"fields":["g"]},"ddoc":"` + partMangoDDoc + `","name":"` + partMangoIndex + `","type":"json","partitioned":true}`)
}

func globalMangoIndexBody() []byte {
	return []byte(`{"index":{"fields":["part","g"]},"ddoc":"` + partMangoDDoc + `","name":"` + globalMangoIndex + `","type":"json"}`)
}

// build writes a design doc or an index (method, path, body), then sends
// the first queries together, at most q at a time, each until it answers
// 200: a 500 "timeout" is CouchDB giving up on the request while the build
// goes on, counted and sent again, as the views workload's build does. The
// time runs from before the write: CouchDB's background indexer may start
// on it. The first answers are not checked: the timed phases check theirs.
func (p *partitionsRun) build(ctx context.Context, method, path string, body []byte, first []pquery) (PartitionsBuild, error) {
	b := PartitionsBuild{Queries: len(first)}
	ctx, cancel := context.WithTimeout(ctx, buildCap)
	defer cancel()
	p.prog.printf("  %s %s, then %d first queries\n", method, path, len(first))
	var buf bytes.Buffer
	t0 := time.Now()
	st, err := p.c.roundTrip(ctx, method, path, "", body, &buf)
	if err != nil {
		return b, err
	}
	if st != http.StatusOK && st != http.StatusCreated && st != http.StatusAccepted {
		return b, statusError(method, path, st, buf.Bytes())
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, max(1, p.cfg.Q))
		timeouts atomic.Int64
		errOnce  sync.Once
		firstErr error
		done     atomic.Int64
	)
	stop := p.prog.track("first queries", int64(len(first)), &done)
	for _, q := range first {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var buf bytes.Buffer
			for {
				st, err := p.c.roundTrip(ctx, q.method, q.path, q.query, q.body, &buf)
				if err == nil && st == http.StatusOK {
					done.Add(1)
					return
				}
				if err == nil && !isTimeout(st, buf.Bytes()) {
					err = statusError(q.method, q.path, st, buf.Bytes())
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				timeouts.Add(1)
				p.prog.printf("  %s: 500 timeout after %.1fs, asking again\n", q.path, time.Since(t0).Seconds())
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	stop()
	if firstErr != nil {
		return b, firstErr
	}
	b.Sec, b.Hz, b.Timeouts = round2(elapsed.Seconds()), round2(float64(p.cfg.Docs)/elapsed.Seconds()), int(timeouts.Load())
	return b, nil
}

// isTimeout reports a 500 whose error is "timeout".
func isTimeout(st int, b []byte) bool {
	var e struct {
		Error string `json:"error"`
	}
	return st == http.StatusInternalServerError && json.Unmarshal(b, &e) == nil && e.Error == "timeout"
}

// checkPlan asks _explain (beside the query's _find) which index q would
// use.
func (p *partitionsRun) checkPlan(ctx context.Context, q pquery, want string) error {
	path := q.path[:len(q.path)-len("_find")] + "_explain"
	var buf bytes.Buffer
	st, err := p.c.roundTrip(ctx, http.MethodPost, path, "", q.body, &buf)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return statusError(http.MethodPost, path, st, buf.Bytes())
	}
	return checkExplain(buf.Bytes(), q.body, want)
}

// timed sends the queries from Concurrency clients and checks each
// answer.
func (p *partitionsRun) timed(ctx context.Context, name string, qs []pquery, check func(pquery, []byte) (int, error)) (PartitionsSide, error) {
	n := len(qs)
	var (
		next     atomic.Int64
		done     atomic.Int64
		rows     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		lats     = make([][]time.Duration, p.cfg.Concurrency)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := p.prog.track(name, int64(n), &done)
	start := time.Now()
	for w := range p.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				q := qs[i]
				t0 := time.Now()
				st, err := p.c.roundTrip(ctx, q.method, q.path, q.query, q.body, &buf)
				lats[w] = append(lats[w], time.Since(t0))
				if err == nil && st != http.StatusOK {
					err = statusError(q.method, q.path, st, buf.Bytes())
				}
				if err == nil {
					var got int
					got, err = check(q, buf.Bytes())
					rows.Add(int64(got))
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s %s?%s %s: %w", q.method, q.path, q.query, q.body, err); cancel() })
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
		return PartitionsSide{}, firstErr
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	st := summarize(int64(n), elapsed, all)
	return PartitionsSide{Hz: st.hz, P50Ms: st.p50, P99Ms: st.p99, Sec: round2(st.sec), Rows: rows.Load()}, nil
}

// viewRows is a view or _all_docs answer: the rows' ids and values (the
// answers hold no docs, so decoding them whole is cheap).
type viewRows struct {
	Rows *[]struct {
		ID    string          `json:"id"`
		Value json.RawMessage `json:"value"`
	} `json:"rows"`
}

// checkViewRows checks a view answer: the docs q.want, in order, each
// with its n as the value.
func (p *partitionsRun) checkViewRows(q pquery, b []byte) (int, error) {
	var v viewRows
	if err := json.Unmarshal(b, &v); err != nil || v.Rows == nil {
		return 0, fmt.Errorf("%w: not a view answer: %.200q", ErrResponse, b)
	}
	rows := *v.Rows
	if len(rows) != len(q.want) {
		return len(rows), fmt.Errorf("%w: %d rows, want %d", ErrCount, len(rows), len(q.want))
	}
	for k, row := range rows {
		i := q.want[k]
		if row.ID != p.docPartID(i) || string(row.Value) != strconv.Itoa(p.n[i]) {
			return len(rows), fmt.Errorf("%w: row %d is %s with value %s, want %s with %d", ErrResponse, k, row.ID, row.Value, p.docPartID(i), p.n[i])
		}
	}
	return len(rows), nil
}

// checkAllDocsRows checks an _all_docs answer: the partition's docs, in id
// order.
func (p *partitionsRun) checkAllDocsRows(q pquery, b []byte) (int, error) {
	var v viewRows
	if err := json.Unmarshal(b, &v); err != nil || v.Rows == nil {
		return 0, fmt.Errorf("%w: not an _all_docs answer: %.200q", ErrResponse, b)
	}
	rows := *v.Rows
	if len(rows) != len(q.want) {
		return len(rows), fmt.Errorf("%w: %d rows, want %d", ErrCount, len(rows), len(q.want))
	}
	for k, row := range rows {
		if want := p.docPartID(q.want[k]); row.ID != want {
			return len(rows), fmt.Errorf("%w: row %d is %s, want %s", ErrResponse, k, row.ID, want)
		}
	}
	return len(rows), nil
}

// checkFindAnswer checks a _find answer: the docs q.want in any order
// (Mango promises no order without a sort), each with just _id and its g.
func (p *partitionsRun) checkFindAnswer(q pquery, b []byte) (int, error) {
	a, err := parseFind(b)
	if err != nil {
		return len(a.docs), err
	}
	if len(a.docs) != len(q.want) {
		return len(a.docs), fmt.Errorf("%w: %d docs, want %d", ErrCount, len(a.docs), len(q.want))
	}
	want := make(map[string]int, len(q.want))
	for _, i := range q.want {
		want[p.docPartID(i)] = i
	}
	for k, d := range a.docs {
		i, ok := want[d.id]
		if !ok || d.has != hasID|hasG || d.fields != 2 || d.g != p.g[i] {
			return len(a.docs), fmt.Errorf("%w: doc %d is %+v, not one of the %d wanted (with _id and g only)", ErrResponse, k, d, len(q.want))
		}
		delete(want, d.id)
	}
	return len(a.docs), nil
}
