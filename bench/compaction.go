package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The compaction workload (seed 002's: every doc updated many times), over
// the public HTTP API only:
//
//  1. insert Docs docs, then update every one of them Edits times with
//     _bulk_docs (BatchSize per request, Concurrency in flight);
//  2. measure the data directory (DataDir: the server's, since HTTP cannot
//     see the disk) and the db's sizes;
//  3. run a writer (single doc PUTs, one at a time) for a few seconds: its
//     latency before compaction;
//  4. POST /db/_compact and keep the writer going until compact_running is
//     false: its latency during compaction, and the compaction wall time;
//  5. measure again.

// WorkloadCompaction names the compaction workload (--workload).
const WorkloadCompaction = "compaction"

// CompactionResult is what the compaction workload measures.
type CompactionResult struct {
	DB           string  `json:"db"`
	Docs         int     `json:"docs"`
	Edits        int     `json:"edits"`
	DocSize      string  `json:"doc_size"`
	DocBytes     int     `json:"doc_bytes"`
	LoadSec      float64 `json:"load_sec"`
	DirBefore    int64   `json:"data_dir_bytes_before"` // -1: no --data-dir
	DirAfter     int64   `json:"data_dir_bytes_after"`
	FileBefore   int64   `json:"sizes_file_before"`
	FileAfter    int64   `json:"sizes_file_after"`
	External     int64   `json:"sizes_external"`
	ActiveAfter  int64   `json:"sizes_active_after"`
	CompactSec   float64 `json:"compact_sec"`
	LiveMBPerSec float64 `json:"live_mb_per_sec"`
	WritesBefore int     `json:"writes_before"`
	BeforeP50Ms  float64 `json:"write_p50_ms_before"`
	BeforeP99Ms  float64 `json:"write_p99_ms_before"`
	WritesDuring int     `json:"writes_during"`
	DuringP50Ms  float64 `json:"write_p50_ms_during"`
	DuringP99Ms  float64 `json:"write_p99_ms_during"`
	// the writer during compaction, split by the phase _active_tasks
	// reported when each PUT started: the document copy (the by-seq walk
	// and its commits), then the reclaim (badger flush, LSM flatten,
	// value-log GC)
	WritesCopy    int     `json:"writes_during_copy"`
	CopyP50Ms     float64 `json:"write_p50_ms_during_copy"`
	CopyP99Ms     float64 `json:"write_p99_ms_during_copy"`
	WritesReclaim int     `json:"writes_during_reclaim"`
	ReclaimP50Ms  float64 `json:"write_p50_ms_during_reclaim"`
	ReclaimP99Ms  float64 `json:"write_p99_ms_during_reclaim"`
	DirOverExtern float64 `json:"data_dir_over_external"`
	// DocsAfter is the compacted database's doc_count after compaction
	DocsAfter int64 `json:"doc_count_after"`
	// WriterDB is the database the writer PUT into: the compacted one
	// (same) or its own (other)
	WriterDB string `json:"writer_db"`
}

// WriteText prints the result, one figure a line.
func (r *CompactionResult) WriteText(w io.Writer) {
	mb := func(b int64) string {
		if b < 0 {
			return "n/a (no --data-dir)"
		}
		return fmt.Sprintf("%.1f MB (%d bytes)", float64(b)/(1<<20), b)
	}
	fmt.Fprintf(w, "compaction: %d docs x %d edits, doc size %s (~%d bytes), loaded in %.1fs\n", r.Docs, r.Edits, r.DocSize, r.DocBytes, r.LoadSec)
	fmt.Fprintf(w, "data dir before:        %s\n", mb(r.DirBefore))
	fmt.Fprintf(w, "data dir after:         %s\n", mb(r.DirAfter))
	if r.DirAfter >= 0 && r.External > 0 {
		fmt.Fprintf(w, "data dir / external:    %.2f (after)\n", r.DirOverExtern)
	}
	fmt.Fprintf(w, "sizes.file before/after %s -> %s; sizes.external %s; sizes.active after %s\n", mb(r.FileBefore), mb(r.FileAfter), mb(r.External), mb(r.ActiveAfter))
	fmt.Fprintf(w, "compaction wall time:   %.2fs\n", r.CompactSec)
	fmt.Fprintf(w, "live data compacted:    %.1f MB/s (sizes.active / wall time)\n", r.LiveMBPerSec)
	fmt.Fprintf(w, "writer database:        %s\n", r.WriterDB)
	if r.WriterDB == WriterNone {
		return
	}
	fmt.Fprintf(w, "writer before:          %d PUTs, p50 %.2fms, p99 %.2fms\n", r.WritesBefore, r.BeforeP50Ms, r.BeforeP99Ms)
	fmt.Fprintf(w, "writer during:          %d PUTs, p50 %.2fms, p99 %.2fms\n", r.WritesDuring, r.DuringP50Ms, r.DuringP99Ms)
	fmt.Fprintf(w, "  document copy:        %d PUTs, p50 %.2fms, p99 %.2fms\n", r.WritesCopy, r.CopyP50Ms, r.CopyP99Ms)
	fmt.Fprintf(w, "  reclaim:              %d PUTs, p50 %.2fms, p99 %.2fms\n", r.WritesReclaim, r.ReclaimP50Ms, r.ReclaimP99Ms)
}

type compactionInfo struct {
	DocCount       int64 `json:"doc_count"`
	CompactRunning bool  `json:"compact_running"`
	Sizes          struct {
		File     int64 `json:"file"`
		External int64 `json:"external"`
		Active   int64 `json:"active"`
	} `json:"sizes"`
}

// RunCompaction runs the compaction workload against cfg.URL.
func RunCompaction(ctx context.Context, cfg Config, out, progressW io.Writer) (*CompactionResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Edits == 0 {
		cfg.Edits = 100
	}
	if cfg.Edits < 1 {
		return nil, fmt.Errorf("%w: --edits must be at least 1", ErrConfig)
	}
	if out == nil {
		out = io.Discard
	}
	if progressW == nil {
		progressW = io.Discard
	}
	c, err := newClient(cfg.URL, cfg.Concurrency+1)
	if err != nil {
		return nil, err
	}
	defer c.close()
	gen, err := newDocGen(cfg.DocSize, 1)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, c: c, gen: gen, prog: &progress{w: progressW, every: cfg.ProgressEvery}, res: &Result{}}
	res := &CompactionResult{Docs: cfg.Docs, Edits: cfg.Edits, DocSize: cfg.DocSize, DocBytes: gen.bodyLen, DirBefore: -1, DirAfter: -1,
		WriterDB: WriterSame}
	res.DB = DBPrefix + "compact-" + strconv.FormatInt(time.Now().UnixMicro(), 10)
	r.res.DB = res.DB
	r.dbPath = "/" + res.DB
	if err := r.createDB(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = r.cleanUp(ctx) }()

	// the writer's database: this one, or one of its own
	wr := r
	if cfg.WriterDB == WriterOther {
		res.WriterDB = WriterOther
		wr = &runner{cfg: cfg, c: c, gen: gen, prog: r.prog, res: &Result{DB: res.DB + "-writer"}}
		wr.dbPath = "/" + wr.res.DB
		if err := wr.createDB(ctx); err != nil {
			return nil, err
		}
		defer func() { _ = wr.cleanUp(ctx) }()
	}

	// auto-compaction would compact the database while it loads, and the
	// workload's _compact would then find that one running
	restore, err := pauseSmoosh(ctx, c)
	if err != nil {
		return nil, err
	}
	defer restore()

	start := time.Now()
	if err := r.loadEdits(ctx); err != nil {
		return res, err
	}
	res.LoadSec = round2(time.Since(start).Seconds())
	// let badger settle what the load queued (memtable flushes)
	time.Sleep(time.Second)
	res.DirBefore = dirBytes(cfg.DataDir)
	var info compactionInfo
	if err := c.getJSON(ctx, r.dbPath, "", &info); err != nil {
		return res, err
	}
	res.FileBefore, res.External = info.Sizes.File, info.Sizes.External

	// the writer alone
	w := &probeWriter{r: wr}
	var lat []time.Duration
	var st stats
	if cfg.WriterDB == WriterNone {
		res.WriterDB = WriterNone
	} else {
		lat, err = w.run(ctx, func() bool { return w.elapsed() < 3*time.Second })
		if err != nil {
			return res, err
		}
		st = summarize(int64(len(lat)), 0, lat)
		res.WritesBefore, res.BeforeP50Ms, res.BeforeP99Ms = len(lat), st.p50, st.p99
	}

	// compaction, with the writer going on
	var buf bytes.Buffer
	cstart := time.Now()
	code, err := c.roundTrip(ctx, http.MethodPost, r.dbPath+"/_compact", "", []byte("{}"), &buf)
	if err != nil {
		return res, err
	}
	if code != http.StatusAccepted {
		return res, statusError(http.MethodPost, r.dbPath+"/_compact", code, buf.Bytes())
	}
	var started struct {
		AlreadyRunning bool `json:"already_running"`
	}
	if json.Unmarshal(buf.Bytes(), &started) == nil && started.AlreadyRunning {
		return res, fmt.Errorf("POST %s/_compact: a compaction of the database was already running, which this run would measure", r.dbPath)
	}
	r.prog.printf("  compacting %s\n", res.DB)
	var running atomic.Bool
	running.Store(true)
	var phase atomic.Int32 // phaseCopy until no shard of the db copies
	phase.Store(phaseCopy)
	pollErr := make(chan error, 1)
	go func() {
		defer running.Store(false)
		sawCopy := false
		for {
			var info compactionInfo
			if err := c.getJSON(ctx, r.dbPath, "", &info); err != nil {
				pollErr <- err
				return
			}
			if !info.CompactRunning {
				pollErr <- nil
				return
			}
			// the tasks appear a moment after the 202: reclaim begins
			// when no shard copies any more after one was seen copying
			if phase.Load() == phaseCopy {
				if copying(ctx, c, res.DB) {
					sawCopy = true
				} else if sawCopy {
					phase.Store(phaseReclaim)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	w2 := &probeWriter{r: wr, n: w.n, phase: &phase}
	if cfg.WriterDB != WriterNone {
		if lat, err = w2.run(ctx, running.Load); err != nil {
			return res, err
		}
	}
	if err := <-pollErr; err != nil {
		return res, err
	}
	res.CompactSec = round2(time.Since(cstart).Seconds())
	var byPhase [2][]time.Duration
	for i, l := range lat {
		byPhase[w2.phases[i]] = append(byPhase[w2.phases[i]], l)
	}
	st = summarize(int64(len(lat)), 0, lat)
	res.WritesDuring, res.DuringP50Ms, res.DuringP99Ms = len(lat), st.p50, st.p99
	st = summarize(0, 0, byPhase[phaseCopy])
	res.WritesCopy, res.CopyP50Ms, res.CopyP99Ms = len(byPhase[phaseCopy]), st.p50, st.p99
	st = summarize(0, 0, byPhase[phaseReclaim])
	res.WritesReclaim, res.ReclaimP50Ms, res.ReclaimP99Ms = len(byPhase[phaseReclaim]), st.p50, st.p99

	res.DirAfter = dirBytes(cfg.DataDir)
	if err := c.getJSON(ctx, r.dbPath, "", &info); err != nil {
		return res, err
	}
	res.FileAfter, res.ActiveAfter, res.DocsAfter = info.Sizes.File, info.Sizes.Active, info.DocCount
	if res.CompactSec > 0 {
		res.LiveMBPerSec = round2(float64(res.ActiveAfter) / (1 << 20) / res.CompactSec)
	}
	if res.DirAfter >= 0 && res.External > 0 {
		res.DirOverExtern = round2(float64(res.DirAfter) / float64(res.External))
	}
	return res, writeResult(out, cfg.JSON, res)
}

// loadEdits inserts the docs and updates each of them Edits times, a round
// of _bulk_docs over all docs per edit.
func (r *runner) loadEdits(ctx context.Context) error {
	cfg := r.cfg
	ids := make([][]byte, cfg.Docs)
	revs := make([]string, cfg.Docs)
	for i := range ids {
		ids[i] = []byte(fmt.Sprintf("doc%08d", i))
	}
	var done atomic.Int64
	stop := r.prog.track("load and edit", int64(cfg.Docs)*int64(cfg.Edits+1), &done)
	defer stop()
	type job struct{ lo, hi int }
	for round := 0; round <= cfg.Edits; round++ {
		jobs := make(chan job)
		errs := make(chan error, cfg.Concurrency)
		for range cfg.Concurrency {
			go func() {
				var body []byte
				var buf bytes.Buffer
				for j := range jobs {
					body = append(body[:0], `{"docs":[`...)
					for i := j.lo; i < j.hi; i++ {
						if i > j.lo {
							body = append(body, ',')
						}
						body = r.gen.appendDocSafe(body, ids[i], revs[i])
					}
					body = append(body, "]}"...)
					st, err := r.c.roundTrip(ctx, http.MethodPost, r.dbPath+"/_bulk_docs", "", body, &buf)
					if err == nil && st != http.StatusCreated && st != http.StatusAccepted {
						err = statusError(http.MethodPost, r.dbPath+"/_bulk_docs", st, buf.Bytes())
					}
					var rows []struct {
						ID    string `json:"id"`
						Rev   string `json:"rev"`
						Error string `json:"error"`
					}
					if err == nil {
						err = json.Unmarshal(buf.Bytes(), &rows)
					}
					if err == nil && len(rows) != j.hi-j.lo {
						err = fmt.Errorf("%w: %d results for %d docs", ErrResponse, len(rows), j.hi-j.lo)
					}
					for k, row := range rows {
						if err == nil && row.Error != "" {
							err = fmt.Errorf("%w: %s: %s", ErrDocErrors, row.ID, row.Error)
						}
						revs[j.lo+k] = row.Rev
					}
					done.Add(int64(j.hi - j.lo))
					if err != nil {
						errs <- err
						for range jobs {
						}
						return
					}
				}
				errs <- nil
			}()
		}
		for lo := 0; lo < cfg.Docs; lo += cfg.BatchSize {
			select {
			case jobs <- job{lo, min(lo+cfg.BatchSize, cfg.Docs)}:
			case <-ctx.Done():
			}
		}
		close(jobs)
		var first error
		for range cfg.Concurrency {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

var genMu sync.Mutex

// appendDocSafe is appendDoc for concurrent senders: the generator's PRNG is
// not safe for concurrent use, so bodies come from a lock.
func (g *docGen) appendDocSafe(dst, id []byte, rev string) []byte {
	genMu.Lock()
	defer genMu.Unlock()
	return g.appendDoc(dst, id, rev)
}

// Compaction phases as _active_tasks reports them.
const (
	phaseCopy    = 0 // "document_copy"
	phaseReclaim = 1 // "reclaim", or the task is gone
)

// copying reports whether a shard of db still copies documents; an error
// (a server without _active_tasks) counts as copying, so every sample
// stays in the copy phase.
func copying(ctx context.Context, c *client, db string) bool {
	var tasks []struct {
		Type     string `json:"type"`
		Database string `json:"database"`
		Phase    string `json:"phase"`
	}
	if err := c.getJSON(ctx, "/_active_tasks", "", &tasks); err != nil {
		return true
	}
	for _, t := range tasks {
		if t.Type == "database_compaction" && strings.HasSuffix(t.Database, "/"+db) && t.Phase == "document_copy" {
			return true
		}
	}
	return false
}

// probeWriter PUTs new small docs one at a time and records latencies, and
// with phase set, the phase each PUT started in.
type probeWriter struct {
	r      *runner
	n      int
	start  time.Time
	phase  *atomic.Int32
	phases []int32
}

func (w *probeWriter) elapsed() time.Duration { return time.Since(w.start) }

func (w *probeWriter) run(ctx context.Context, more func() bool) ([]time.Duration, error) {
	w.start = time.Now()
	var lat []time.Duration
	var buf bytes.Buffer
	for more() {
		w.n++
		path := w.r.dbPath + "/probe" + strconv.Itoa(w.n)
		var ph int32
		if w.phase != nil {
			ph = w.phase.Load()
		}
		t0 := time.Now()
		st, err := w.r.c.roundTrip(ctx, http.MethodPut, path, "", []byte(`{"probe":true}`), &buf)
		if err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(t0))
		w.phases = append(w.phases, ph)
		if st != http.StatusCreated && st != http.StatusAccepted {
			return lat, statusError(http.MethodPut, path, st, buf.Bytes())
		}
	}
	return lat, nil
}

// dirBytes is the allocated size of every file under dir, -1 without dir.
func dirBytes(dir string) int64 {
	if dir == "" {
		return -1
	}
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		return -1
	}
	return n
}

// pauseSmoosh turns the node's auto-compaction off for the workload and
// returns what turns it back on (if it was on).
func pauseSmoosh(ctx context.Context, c *client) (func(), error) {
	const path = "/_node/_local/_config/smoosh/enabled"
	var buf bytes.Buffer
	code, err := c.roundTrip(ctx, http.MethodPut, path, "", []byte(`"false"`), &buf)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, statusError(http.MethodPut, path, code, buf.Bytes())
	}
	var old string
	if json.Unmarshal(buf.Bytes(), &old) != nil || old == "false" {
		return func() {}, nil
	}
	return func() {
		// the workload's context may be done: restore regardless
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		val, _ := json.Marshal(old)
		_, _ = c.roundTrip(ctx, http.MethodPut, path, "", val, &bytes.Buffer{})
	}, nil
}
