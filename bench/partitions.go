package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
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
