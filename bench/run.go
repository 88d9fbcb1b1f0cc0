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

// DBPrefix starts the name of every bench database (fabric_bench's ?PREFIX).
const DBPrefix = "fabricbenchdb-"

// maxDBAge: bench databases older than this are leftovers of crashed runs
// and are deleted before a run (fabric_bench's ?MAX_DB_AGE_USEC).
const maxDBAge = 8 * time.Hour

// Run runs the fabric_bench workload against cfg.URL. In text mode the
// fabric_bench lines are written to out as phases end (the same text as
// Result.WriteText); with cfg.JSON, out gets one JSON object (the Result)
// at the end of a successful run and the text lines go to progress, along
// with the status lines written while phases run. The bench database is
// deleted before Run returns, even when ctx is cancelled. On failure Run
// returns the partial Result together with the error.
func Run(ctx context.Context, cfg Config, out, progressW io.Writer) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if out == nil {
		out = io.Discard
	}
	if progressW == nil {
		progressW = io.Discard
	}
	c, err := newClient(cfg.URL, cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	defer c.close()
	gen, err := newDocGen(cfg.DocSize, 1)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg:  cfg,
		c:    c,
		gen:  gen,
		prog: &progress{w: progressW, every: cfg.ProgressEvery},
		res: &Result{
			URL: c.display, Docs: cfg.Docs, BatchSize: cfg.BatchSize, DocSize: cfg.DocSize,
			DocBytes: gen.docLen(len(strconv.Itoa(cfg.Docs))), IndividualDocs: cfg.IndividualDocs,
			Gets: cfg.Gets, Concurrency: cfg.Concurrency, UpdateSameDoc: cfg.UpdateSameDoc,
			Readers: cfg.Readers, HotReads: cfg.HotReads, Writers: cfg.Writers, WriterDocs: cfg.WriterDocs, NoCeiling: cfg.NoCeiling,
			ReqQ: cfg.Q, ReqN: cfg.N, Client: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		},
	}
	r.text = out
	if cfg.JSON {
		r.text = r.prog
	}
	start := time.Now()
	err = r.run(ctx)
	r.res.WallSec = round2(time.Since(start).Seconds())
	if err != nil {
		return r.res, err
	}
	if cfg.JSON {
		b, err := json.Marshal(r.res)
		if err != nil {
			return r.res, err
		}
		if _, err := out.Write(append(b, '\n')); err != nil {
			return r.res, err
		}
	}
	return r.res, nil
}

type runner struct {
	cfg    Config
	c      *client
	gen    *docGen
	prog   *progress
	text   io.Writer // where the fabric_bench lines go
	res    *Result
	dbPath string // "/fabricbenchdb-…"
}

func (r *runner) run(ctx context.Context) (err error) {
	res := r.res
	res.writeParams(r.text)
	r.deleteOldDBs(ctx)

	res.DB = DBPrefix + strconv.FormatInt(time.Now().UnixMicro(), 10)
	r.dbPath = "/" + res.DB
	if err := r.createDB(ctx); err != nil {
		return err
	}
	defer func() {
		if derr := r.cleanUp(ctx); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	r.environment(ctx)
	res.writeEnv(r.text)
	res.writeInserting(r.text)

	// 1. Add.
	add, err := r.addDocs(ctx)
	if err != nil {
		return err
	}
	res.AddHz, res.AddP50Ms, res.AddP99Ms, res.AddSec = add.hz, add.p50, add.p99, add.sec
	res.writePhase(r.text, phaseAdd)
	var info dbInfo
	if err := r.c.getJSON(ctx, r.dbPath, "", &info); err != nil {
		return err
	}
	if info.DocCount != int64(r.cfg.Docs) {
		return fmt.Errorf("%w: doc_count %d after adding %d docs", ErrCount, info.DocCount, r.cfg.Docs)
	}

	// 2. Get random docs.
	get, getPaths, err := r.getDocs(ctx)
	if err != nil {
		return err
	}
	res.GetHz, res.GetP50Ms, res.GetP99Ms, res.GetSec = get.hz, get.p50, get.p99, get.sec
	res.writePhase(r.text, phaseGet)

	// The same GETs against a bare net/http server answering one doc's bytes.
	if !r.cfg.NoCeiling {
		if err := r.getCeiling(ctx, getPaths); err != nil {
			return err
		}
		res.writePhase(r.text, phaseGetCeiling)
	}

	// One doc read by Readers clients at once.
	if err := r.hotReads(ctx); err != nil {
		return err
	}
	res.writePhase(r.text, phaseHotRead)

	// 3-5. Streams.
	for _, s := range []struct {
		phase         int
		name, path, q string
		key           string
		rows          *int64
		hz, p50, p99  *float64
		first, sec    *float64
	}{
		{phaseAllDocs, "all docs", "/_all_docs", "", "rows", &res.AllDocsRows,
			&res.AllDocsHz, &res.AllDocsP50Ms, &res.AllDocsP99Ms, &res.AllDocsFirstRowMs, &res.AllDocsSec},
		{phaseAllDocsInclude, "all docs w/ include_docs", "/_all_docs", "include_docs=true", "rows", &res.AllDocsIncludeDocsRows,
			&res.AllDocsIncludeDocsHz, &res.AllDocsIncludeDocsP50Ms, &res.AllDocsIncludeDocsP99Ms, &res.AllDocsIncludeDocsFirstRowMs, &res.AllDocsIncludeDocsSec},
		{phaseChanges, "changes", "/_changes", "", "results", &res.ChangesRows,
			&res.ChangesHz, &res.ChangesP50Ms, &res.ChangesP99Ms, &res.ChangesFirstRowMs, &res.ChangesSec},
	} {
		var done atomic.Int64
		passes := max(r.cfg.StreamPasses, 1)
		stop := r.prog.track(s.name, int64(r.cfg.Docs)*int64(passes), &done)
		var took, firsts []time.Duration
		var all time.Duration
		for range passes {
			rows, first, total, err := r.streamRows(ctx, r.dbPath+s.path, s.q, s.key, &done)
			if err != nil {
				stop()
				return err
			}
			if rows != int64(r.cfg.Docs) {
				stop()
				return fmt.Errorf("%w: %s returned %d rows, want %d", ErrCount, s.name, rows, r.cfg.Docs)
			}
			took, firsts, all = append(took, total), append(firsts, first), all+total
		}
		stop()
		// rows/s of the median pass; p50/p99 of the passes' durations
		st := summarize(int64(r.cfg.Docs), 0, took)
		slices.Sort(firsts)
		median := took[(len(took)-1)/2]
		*s.rows, *s.hz, *s.p50, *s.p99 = int64(r.cfg.Docs), round2(float64(r.cfg.Docs)/median.Seconds()), st.p50, st.p99
		*s.first, *s.sec = ms(firsts[(len(firsts)-1)/2]), all.Seconds()
		res.writePhase(r.text, s.phase)
	}

	// 6. Single doc updates.
	single, err := r.singleUpdates(ctx)
	if err != nil {
		return err
	}
	res.SingleUpdatesHz, res.SingleUpdatesP50Ms, res.SingleUpdatesP99Ms, res.SingleUpdatesSec = single.hz, single.p50, single.p99, single.sec

	res.writePhase(r.text, phaseSingle)

	// Small docs PUT by Writers clients at once.
	if err := r.manyWriters(ctx); err != nil {
		return err
	}
	res.writePhase(r.text, phaseWriters)

	// fabric_bench's own sequential adds, into a database of their own.
	if r.cfg.Concurrency > 1 {
		if err := r.seqAdds(ctx); err != nil {
			return err
		}
		res.writePhase(r.text, phaseSeqAdd)
	}

	// fabric_bench: TSec = round((T1 + T2 + T3 + T5 + T6) / 1000000).
	res.TotalSec = round2(res.AddSec + res.GetSec + res.AllDocsSec + res.ChangesSec + res.SingleUpdatesSec)
	res.writeTotal(r.text)
	return nil
}

type dbInfo struct {
	DocCount int64 `json:"doc_count"`
	Cluster  struct {
		Q int `json:"q"`
		N int `json:"n"`
	} `json:"cluster"`
}

func (r *runner) createDB(ctx context.Context) error {
	q := url.Values{}
	if r.cfg.Q > 0 {
		q.Set("q", strconv.Itoa(r.cfg.Q))
	}
	if r.cfg.N > 0 {
		q.Set("n", strconv.Itoa(r.cfg.N))
	}
	var buf bytes.Buffer
	st, err := r.c.roundTrip(ctx, http.MethodPut, r.dbPath, q.Encode(), nil, &buf)
	if err != nil {
		return fmt.Errorf("bench: creating %s: %w", r.res.DB, err)
	}
	if st != http.StatusCreated && st != http.StatusAccepted {
		return statusError(http.MethodPut, r.dbPath, st, buf.Bytes())
	}
	r.prog.printf("  created %s\n", r.res.DB)
	return nil
}

// cleanUp deletes the database even when ctx was cancelled (within two
// minutes of its own).
func (r *runner) cleanUp(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return r.deleteDB(dctx)
}

func (r *runner) deleteDB(ctx context.Context) error {
	var buf bytes.Buffer
	st, err := r.c.roundTrip(ctx, http.MethodDelete, r.dbPath, "", nil, &buf)
	if err != nil {
		return fmt.Errorf("bench: deleting %s: %w", r.res.DB, err)
	}
	if st != http.StatusOK && st != http.StatusAccepted {
		return statusError(http.MethodDelete, r.dbPath, st, buf.Bytes())
	}
	r.prog.printf("  deleted %s\n", r.res.DB)
	return nil
}

// deleteOldDBs deletes bench databases older than maxDBAge, as fabric_bench's
// delete_old_dbs does. Best effort: failures are reported to progress only.
func (r *runner) deleteOldDBs(ctx context.Context) {
	var dbs []string
	q := "start_key=" + url.QueryEscape(`"`+DBPrefix+`"`) + "&end_key=" + url.QueryEscape(`"`+DBPrefix+`\ufff0"`)
	if err := r.c.getJSON(ctx, "/_all_dbs", q, &dbs); err != nil {
		r.prog.printf("  skipping old bench db cleanup: %v\n", err)
		return
	}
	now := time.Now()
	for _, db := range dbs {
		ts, ok := strings.CutPrefix(db, DBPrefix)
		if !ok {
			continue
		}
		us, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || now.Sub(time.UnixMicro(us)) <= maxDBAge {
			continue
		}
		var buf bytes.Buffer
		st, err := r.c.roundTrip(ctx, http.MethodDelete, "/"+db, "", nil, &buf)
		switch {
		case err != nil:
			r.prog.printf("  deleting old %s: %v\n", db, err)
		case st != http.StatusOK && st != http.StatusAccepted:
			r.prog.printf("  deleting old %s: %v\n", db, statusError(http.MethodDelete, "/"+db, st, buf.Bytes()))
		default:
			r.prog.printf("  deleted old %s\n", db)
		}
	}
}

// environment fills what the public API tells about the server. Best
// effort: unknown values stay empty.
func (r *runner) environment(ctx context.Context) {
	var welcome struct {
		Version string `json:"version"`
		GitSHA  string `json:"git_sha"`
		Vendor  struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"vendor"`
	}
	if err := r.c.getJSON(ctx, "/", "", &welcome); err == nil {
		r.res.ServerVersion, r.res.ServerGitSHA = welcome.Version, welcome.GitSHA
		r.res.ServerVendor = strings.TrimSpace(welcome.Vendor.Name + " " + welcome.Vendor.Version)
	}
	var members struct {
		AllNodes []string `json:"all_nodes"`
	}
	if err := r.c.getJSON(ctx, "/_membership", "", &members); err == nil {
		r.res.Nodes = len(members.AllNodes)
	}
	var info dbInfo
	if err := r.c.getJSON(ctx, r.dbPath, "", &info); err == nil {
		r.res.Q, r.res.N = info.Cluster.Q, info.Cluster.N
	}
}

// batch is one _bulk_docs request body, built before it is sent.
type batch struct {
	docs int
	body []byte
}

// addDocs inserts Docs docs with ids Docs, Docs-1, …, 1 in batches of
// BatchSize, as fabric_bench's bulk_docs/5 does, with Concurrency batches
// in flight. A producer builds the bodies; it fills up to PregenMB (at least
// one batch) before the clock starts, then keeps at most that much ahead of
// the senders.
func (r *runner) addDocs(ctx context.Context) (stats, error) {
	cfg := r.cfg
	nb := (cfg.Docs + cfg.BatchSize - 1) / cfg.BatchSize
	batchBytes := cfg.BatchSize*(r.gen.docLen(len(strconv.Itoa(cfg.Docs)))+1) + 16
	ahead := max(1, min(nb, cfg.PregenMB<<20/batchBytes))

	ctx, cancel := context.WithCancel(ctx)
	var prodWG sync.WaitGroup
	defer func() {
		cancel() // unblocks the producer if it is still running
		prodWG.Wait()
	}()
	work := make(chan batch, ahead)
	ready := make(chan struct{})
	var readyOnce sync.Once
	setReady := func() { readyOnce.Do(func() { close(ready) }) }
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		defer close(work)
		defer setReady()
		var id []byte
		for b := range nb {
			if b == ahead {
				setReady()
			}
			// A fresh buffer per batch: the transport may still hold a sent
			// body after RoundTrip returns, so bodies are never reused.
			buf := make([]byte, 0, batchBytes)
			first := cfg.Docs - b*cfg.BatchSize // doc(BulkDocs - I, DocSize)
			n := min(cfg.BatchSize, first)
			buf = append(buf, `{"docs":[`...)
			for i := range n {
				if i > 0 {
					buf = append(buf, ',')
				}
				id = strconv.AppendInt(id[:0], int64(first-i), 10)
				buf = r.gen.appendDoc(buf, id, "")
			}
			buf = append(buf, "]}"...)
			select {
			case work <- batch{docs: n, body: buf}:
			case <-ctx.Done():
				return
			}
		}
	}()
	r.prog.printf("  generating %d batches of %d %s docs (%d ahead)\n", nb, cfg.BatchSize, cfg.DocSize, ahead)
	select {
	case <-ready:
	case <-ctx.Done():
		return stats{}, ctx.Err()
	}

	var (
		done          atomic.Int64
		ok, accepted  atomic.Int64
		errOnce       sync.Once
		firstErr      error
		wg            sync.WaitGroup
		lats          = make([][]time.Duration, cfg.Concurrency)
		bulkPath      = r.dbPath + "/_bulk_docs"
		errorsInBatch = []byte(`"error"`)
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	stop := r.prog.track("add", int64(cfg.Docs), &done)
	start := time.Now()
	for w := range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, nb/cfg.Concurrency+1)
			var resp bytes.Buffer
			for bt := range work {
				t0 := time.Now()
				st, err := r.c.roundTrip(ctx, http.MethodPost, bulkPath, "", bt.body, &resp)
				lat = append(lat, time.Since(t0))
				switch {
				case err != nil:
				case st == http.StatusCreated:
					ok.Add(1)
				case st == http.StatusAccepted:
					accepted.Add(1)
				default:
					err = statusError(http.MethodPost, bulkPath, st, resp.Bytes())
				}
				if err == nil {
					if n := bytes.Count(resp.Bytes(), errorsInBatch); n > 0 {
						err = fmt.Errorf("%w: %d in one batch, first: %s", ErrDocErrors, n, firstDocError(resp.Bytes()))
					}
				}
				if err != nil {
					fail(err)
					break
				}
				done.Add(int64(bt.docs))
			}
			lats[w] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	if firstErr != nil {
		return stats{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return stats{}, err
	}
	r.res.AddOK, r.res.AddAccepted = int(ok.Load()), int(accepted.Load())
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return summarize(done.Load(), elapsed, all), nil
}

// firstDocError returns the JSON object around the first "error" key of a
// _bulk_docs response.
func firstDocError(b []byte) []byte {
	i := bytes.Index(b, []byte(`"error"`))
	if i < 0 {
		return nil
	}
	s := bytes.LastIndexByte(b[:i], '{')
	e := bytes.IndexByte(b[i:], '}')
	if s < 0 || e < 0 {
		return b[i:min(len(b), i+200)]
	}
	return b[s : i+e+1]
}

// getDocs GETs Gets random existing docs one after another, as fabric_bench's
// get_docs does (it seeds its PRNG with 0; so does this). It returns the
// paths too: the GET ceiling sends the same ones.
func (r *runner) getDocs(ctx context.Context) (stats, []string, error) {
	n := r.cfg.Gets
	paths := make([]string, n) // built before the clock
	rng := newPCG(0)
	for i := range paths {
		paths[i] = r.dbPath + "/" + strconv.Itoa(rng.IntN(r.cfg.Docs)+1)
	}
	st, err := getLoop(ctx, r.c, r.prog, "get", paths)
	return st, paths, err
}

// getLoop GETs paths through c one after another; every answer must be a
// 200. It is the get phase's loop, and the GET ceiling's.
func getLoop(ctx context.Context, c *client, prog *progress, name string, paths []string) (stats, error) {
	n := len(paths)
	lat := make([]time.Duration, 0, n)
	var buf bytes.Buffer
	var done atomic.Int64
	stop := prog.track(name, int64(n), &done)
	defer stop()
	start := time.Now()
	for _, path := range paths {
		t0 := time.Now()
		st, err := c.roundTrip(ctx, http.MethodGet, path, "", nil, &buf)
		if err != nil {
			return stats{}, err
		}
		if st != http.StatusOK {
			return stats{}, statusError(http.MethodGet, path, st, buf.Bytes())
		}
		lat = append(lat, time.Since(t0))
		done.Add(1)
	}
	return summarize(int64(n), time.Since(start), lat), nil
}

// singleUpdates makes IndividualDocs sequential single doc PUTs. As
// fabric_bench's put_docs, each writes a new doc with a random 128-bit id;
// with UpdateSameDoc they all write one doc, passing the rev from the
// previous response.
func (r *runner) singleUpdates(ctx context.Context) (stats, error) {
	n := r.cfg.IndividualDocs
	ids := make([][]byte, n)
	for i := range ids {
		if r.cfg.UpdateSameDoc && i > 0 {
			ids[i] = ids[0]
		} else {
			ids[i] = r.gen.randomID()
		}
	}
	// Bodies after _id/_rev, generated before the clock when they fit.
	var tails [][]byte
	if n*r.gen.bodyLen <= r.cfg.PregenMB<<20 {
		all := make([]byte, 0, n*r.gen.bodyLen)
		tails = make([][]byte, n)
		for i := range tails {
			s := len(all)
			all = r.gen.appendBody(all)
			tails[i] = all[s:len(all):len(all)]
		}
	}
	var (
		body []byte
		buf  bytes.Buffer
		rev  string
		done atomic.Int64
		lat  = make([]time.Duration, 0, n)
	)
	stop := r.prog.track("single updates", int64(n), &done)
	defer stop()
	start := time.Now()
	for i := range n {
		body = append(body[:0], `{"_id":"`...)
		body = append(body, ids[i]...)
		body = append(body, '"')
		if rev != "" {
			body = append(body, `,"_rev":"`...)
			body = append(body, rev...)
			body = append(body, '"')
		}
		if tails != nil {
			body = append(body, tails[i]...)
		} else {
			body = r.gen.appendBody(body)
		}
		path := r.dbPath + "/" + string(ids[i])
		t0 := time.Now()
		st, err := r.c.roundTrip(ctx, http.MethodPut, path, "", body, &buf)
		if err != nil {
			return stats{}, err
		}
		lat = append(lat, time.Since(t0))
		if st != http.StatusCreated && st != http.StatusAccepted {
			return stats{}, statusError(http.MethodPut, path, st, buf.Bytes())
		}
		if r.cfg.UpdateSameDoc {
			var res struct {
				Rev string `json:"rev"`
			}
			if err := json.Unmarshal(buf.Bytes(), &res); err != nil || res.Rev == "" {
				return stats{}, fmt.Errorf("%w: PUT %s: no rev in %q", ErrResponse, path, buf.Bytes())
			}
			rev = res.Rev
		}
		done.Add(1)
	}
	return summarize(int64(n), time.Since(start), lat), nil
}
