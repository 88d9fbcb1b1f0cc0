package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the progress goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

func testConfig(f *fakeCouch) Config {
	return Config{
		URL:            f.url("admin", "s3cret"),
		Docs:           2500,
		BatchSize:      1000,
		DocSize:        DocSmall,
		IndividualDocs: 50,
		Q:              2,
		N:              1,
		Concurrency:    3,
		Readers:        8,
		HotReads:       200,
		Writers:        8,
		WriterDocs:     200,
		ProgressEvery:  2 * time.Millisecond,
	}
}

// phaseLine matches fabric_bench's " * ~-38s (Hz): ~7B" lines and our
// latency suffix.
var phaseLine = regexp.MustCompile(`^ \* (.+?)\s+\((Hz|sec)\):\s+(\d+)(.*)$`)

type line struct {
	label, unit string
	value       int64
	rest        string
}

func parseLines(t *testing.T, out string) []line {
	t.Helper()
	var ls []line
	for _, s := range strings.Split(out, "\n") {
		m := phaseLine.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		v, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		ls = append(ls, line{m[1], m[2], v, m[4]})
	}
	return ls
}

func TestRunText(t *testing.T) {
	f := newFakeCouch(t, basic("admin", "s3cret"))
	cfg := testConfig(f)
	var out bytes.Buffer
	var prog syncBuffer
	res, err := Run(context.Background(), cfg, &out, &prog)
	if err != nil {
		t.Fatalf("Run: %v\nout:\n%s\nprogress:\n%s", err, out.String(), prog.String())
	}
	t.Logf("out:\n%s", out.String())

	ls := parseLines(t, out.String())
	wlabels := []string{
		"Add 2500 docs, ok:3/accepted:0",
		"Get random doc 2500X",
		"Get ceiling, bare net/http 2500X",
		"Get one doc, 8 clients 200X",
		"All docs",
		"All docs w/ include_docs",
		"Changes",
		"Single doc updates 50X",
		"Put small docs, 8 clients 200X",
		"Add 2500 docs seq, ok:3/accepted:0",
		"Time to run all benchmarks",
	}
	if len(ls) != len(wlabels) {
		t.Fatalf("got %d phase lines, want %d:\n%s", len(ls), len(wlabels), out.String())
	}
	for i, l := range ls {
		if l.label != wlabels[i] {
			t.Errorf("line %d: label %q, want %q", i, l.label, wlabels[i])
		}
		if i < len(ls)-1 {
			if l.unit != "Hz" || l.value <= 0 || !strings.Contains(l.rest, "p50 ") || !strings.Contains(l.rest, "p99 ") {
				t.Errorf("line %d: %+v: want a positive Hz and p50/p99", i, l)
			}
		} else if l.unit != "sec" {
			t.Errorf("total line unit %q", l.unit)
		}
	}
	for _, w := range []string{" *** Parameters\n", " * batch_size       : 1000\n", " * q                : 2\n",
		" * readers          : 8\n", " * writer_docs      : 200\n",
		" *** Environment\n", " * Nodes        : 2\n", " * Q            : 2\n", " * Couch ver.   : 3.5.2\n",
		"\n *** Inserting 2500 docs\n"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q", w)
		}
	}
	// Streamed output is exactly WriteText's.
	var again bytes.Buffer
	res.WriteText(&again)
	if again.String() != out.String() {
		t.Errorf("WriteText differs from streamed output:\n%s\n---\n%s", again.String(), out.String())
	}

	f.mu.Lock() // the handlers are done; the lock orders their writes for -race
	defer f.mu.Unlock()
	if got, w := f.createQuery.Encode(), "n=1&q=2"; got != w {
		t.Errorf("create query %q, want %q", got, w)
	}
	if len(f.dbs) != 0 {
		t.Errorf("databases left behind: %v", f.dbs)
	}
	db := f.deleted[res.DB]
	if db == nil {
		t.Fatalf("bench db %q was not deleted", res.DB)
	}
	if got, w := len(db.docs), cfg.Docs+cfg.IndividualDocs+cfg.WriterDocs; got != w {
		t.Errorf("docs at delete: %d, want %d", got, w)
	}
	// the sequential adds went to a database of their own, deleted too
	if seq := f.deleted[res.SeqAddDB]; res.SeqAddDB == res.DB || seq == nil || len(seq.docs) != cfg.Docs {
		t.Errorf("sequential adds' database %q: %v", res.SeqAddDB, seq)
	}
	for i := 1; i <= cfg.Docs; i++ {
		if db.docs[strconv.Itoa(i)] == nil {
			t.Fatalf("doc %d missing", i)
		}
	}
	if f.maxInBulk > cfg.Concurrency {
		t.Errorf("%d _bulk_docs in flight, concurrency %d", f.maxInBulk, cfg.Concurrency)
	}
	if f.unauth != 0 {
		t.Errorf("%d requests without the right Authorization", f.unauth)
	}
	// the get phase, the ceiling's one GET of a doc, the hot reads
	if w := cfg.Docs + 1 + cfg.HotReads; f.gets != w {
		t.Errorf("GET doc requests: %d, want %d", f.gets, w)
	}
	if f.seenPaths["PUT /db/doc"] != cfg.IndividualDocs+cfg.WriterDocs || f.seenPaths["POST /db/_bulk_docs"] != 6 {
		t.Errorf("requests: %v", f.seenPaths)
	}
	// GET / for the environment, then one from every client of the
	// many-client phases before their clocks start
	if w := 1 + cfg.Readers + cfg.Writers; f.seenPaths["GET "] != w {
		t.Errorf("GET / requests: %d, want %d", f.seenPaths["GET "], w)
	}
	if strings.Contains(res.URL, "s3cret") || strings.Contains(out.String(), "s3cret") {
		t.Errorf("credentials leaked into the report: %s", res.URL)
	}
	if res.AddOK != 3 || res.AddAccepted != 0 || res.AllDocsRows != 2500 || res.AllDocsIncludeDocsRows != 2500 || res.ChangesRows != 2500 {
		t.Errorf("counts: %+v", res)
	}
	checkNewPhases(t, cfg, res)
	if res.Q != 2 || res.N != 1 || res.Nodes != 2 || res.ServerGitSHA != "abc1234" {
		t.Errorf("environment: q=%d n=%d nodes=%d sha=%q", res.Q, res.N, res.Nodes, res.ServerGitSHA)
	}
	for name, p := range map[string][2]float64{
		"add": {res.AddP50Ms, res.AddP99Ms}, "get": {res.GetP50Ms, res.GetP99Ms},
		"single": {res.SingleUpdatesP50Ms, res.SingleUpdatesP99Ms}, "changes": {res.ChangesP50Ms, res.ChangesP99Ms},
	} {
		if p[0] <= 0 || p[0] > p[1] {
			t.Errorf("%s latency p50 %v p99 %v", name, p[0], p[1])
		}
	}
	if res.AllDocsFirstRowMs <= 0 || res.AllDocsFirstRowMs > res.AllDocsP50Ms {
		t.Errorf("first row %vms, request %vms", res.AllDocsFirstRowMs, res.AllDocsP50Ms)
	}
	if w := res.AddSec + res.GetSec + res.AllDocsSec + res.ChangesSec + res.SingleUpdatesSec; res.TotalSec < w-0.02 || res.TotalSec > w+0.02 {
		t.Errorf("total %v, want the sum without include_docs %v", res.TotalSec, w)
	}
	for _, w := range []string{"created " + res.DB, "deleted " + res.DB} {
		if !strings.Contains(prog.String(), w) {
			t.Errorf("progress lacks %q:\n%s", w, prog.String())
		}
	}
}

func TestRunJSON(t *testing.T) {
	f := newFakeCouch(t, "")
	f.bulkStatus = 202
	cfg := testConfig(f)
	cfg.URL = f.url("", "")
	cfg.JSON = true
	cfg.Docs, cfg.BatchSize = 1200, 500
	var out bytes.Buffer
	var prog syncBuffer
	if _, err := Run(context.Background(), cfg, &out, &prog); err != nil {
		t.Fatalf("Run: %v\n%s", err, prog.String())
	}
	if n := bytes.Count(bytes.TrimSpace(out.Bytes()), []byte("\n")); n != 0 {
		t.Errorf("want one JSON line, got:\n%s", out.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"add_hz", "get_hz", "all_docs_hz", "all_docs_include_docs_hz", "changes_hz", "single_updates_hz",
		"get_ceiling_hz", "hot_read_hz", "writers_hz", "seq_add_hz"} {
		v, ok := m[k].(float64)
		if !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, m[k])
		}
		base := strings.TrimSuffix(k, "_hz")
		for _, s := range []string{"_p50_ms", "_p99_ms", "_sec"} {
			if _, ok := m[base+s].(float64); !ok {
				t.Errorf("missing %s", base+s)
			}
		}
	}
	if m["add_ok"] != 0.0 || m["add_accepted"] != 3.0 || m["doc_size"] != "small" || m["total_sec"] == 0.0 {
		t.Errorf("fields: add_ok=%v add_accepted=%v doc_size=%v total=%v", m["add_ok"], m["add_accepted"], m["doc_size"], m["total_sec"])
	}
	if m["seq_add_ok"] != 0.0 || m["seq_add_accepted"] != 3.0 || m["readers"] != 8.0 || m["writer_docs"] != 200.0 ||
		m["hot_read_doc_id"] != "600" || m["get_ceiling_ratio"] == 0.0 || m["get_ceiling_body_bytes"] == 0.0 || m["writers_ok"] != 200.0 {
		t.Errorf("fields: seq_add_ok=%v seq_add_accepted=%v readers=%v writer_docs=%v hot_read_doc_id=%v ratio=%v body=%v writers_ok=%v",
			m["seq_add_ok"], m["seq_add_accepted"], m["readers"], m["writer_docs"], m["hot_read_doc_id"],
			m["get_ceiling_ratio"], m["get_ceiling_body_bytes"], m["writers_ok"])
	}
	// The text goes to progress in JSON mode.
	ls := parseLines(t, prog.String())
	if len(ls) != 11 || ls[0].label != "Add 1200 docs, ok:0/accepted:3" || ls[9].label != "Add 1200 docs seq, ok:0/accepted:3" {
		t.Errorf("progress lines: %+v", ls)
	}
	// Round trip.
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.AddAccepted != 3 || res.Docs != 1200 {
		t.Errorf("unmarshal Result: %v %+v", err, res)
	}
}

func TestRunUpdateSameDoc(t *testing.T) {
	f := newFakeCouch(t, "")
	cfg := testConfig(f)
	cfg.URL = f.url("", "")
	cfg.Docs, cfg.UpdateSameDoc, cfg.IndividualDocs, cfg.DocSize = 600, true, 100, DocMedium
	// 1 MB holds no 100-doc medium batch and not all the update bodies:
	// generation overlaps the requests in both phases.
	cfg.BatchSize, cfg.PregenMB = 100, 1
	res, err := Run(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := f.deletedDB(res.DB)
	// the bulk docs, the one updated doc, the many writers' new docs
	if w := cfg.Docs + 1 + cfg.WriterDocs; len(db.docs) != w {
		t.Fatalf("docs %d, want %d", len(db.docs), w)
	}
	var updated int
	for id, d := range db.docs {
		switch {
		case d.gen == cfg.IndividualDocs:
			updated++
		case d.gen != 1:
			t.Errorf("doc %s at generation %d, want 1 or %d", id, d.gen, cfg.IndividualDocs)
		}
	}
	if updated != 1 {
		t.Errorf("%d updated docs, want 1", updated)
	}
}

func TestRunBulkDocError(t *testing.T) {
	f := newFakeCouch(t, "")
	f.bulkDocErr = true
	cfg := testConfig(f)
	cfg.URL = f.url("", "")
	var out bytes.Buffer
	res, err := Run(context.Background(), cfg, &out, nil)
	if !errors.Is(err, ErrDocErrors) || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("err = %v, want ErrDocErrors with the conflict", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if res == nil || f.deleted[res.DB] == nil || len(f.dbs) != 0 {
		t.Errorf("bench db not deleted after a failure")
	}
	if strings.Contains(out.String(), "(Hz)") {
		t.Errorf("phase line printed for a failed phase:\n%s", out.String())
	}
}

func TestRunUnauthorized(t *testing.T) {
	f := newFakeCouch(t, basic("admin", "right"))
	cfg := testConfig(f)
	cfg.URL = f.url("admin", "wrong")
	_, err := Run(context.Background(), cfg, nil, nil)
	if !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want ErrStatus 401", err)
	}
}

func TestRunCancelDeletesDB(t *testing.T) {
	f := newFakeCouch(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onGetDoc = func(n int) {
		if n == 10 {
			cancel()
		}
	}
	cfg := testConfig(f)
	cfg.URL = f.url("", "")
	res, err := Run(ctx, cfg, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deleted[res.DB] == nil || len(f.dbs) != 0 {
		t.Errorf("bench db not deleted after cancel: %v", f.dbs)
	}
}

func TestRunDeletesOldDBs(t *testing.T) {
	f := newFakeCouch(t, "")
	old := DBPrefix + strconv.FormatInt(time.Now().Add(-9*time.Hour).UnixMicro(), 10)
	recent := DBPrefix + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMicro(), 10)
	for _, n := range []string{old, recent, "other"} {
		f.dbs[n] = &fakeDB{docs: map[string]*fakeDoc{}}
	}
	cfg := testConfig(f)
	cfg.URL = f.url("", "")
	cfg.Docs, cfg.IndividualDocs = 10, 2
	if _, err := Run(context.Background(), cfg, nil, nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dbs[old] != nil || f.dbs[recent] == nil || f.dbs["other"] == nil {
		t.Errorf("after cleanup: %v", f.dbs)
	}
}

func TestConfigFlags(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if cfg.Docs != 100000 || cfg.BatchSize != 1000 || cfg.DocSize != DocMedium || cfg.IndividualDocs != 1000 || cfg.Concurrency < 2 ||
		cfg.Readers != 130 || cfg.HotReads != 10000 || cfg.Writers != 130 || cfg.WriterDocs != 10000 || cfg.StreamPasses != 5 || cfg.NoCeiling {
		t.Errorf("defaults: %+v", cfg)
	}
	err := fs.Parse([]string{"--url", "http://a:b@h:1", "--docs", "10", "--batch-size", "5", "--doc-size", "large",
		"--individual-docs", "7", "--gets", "3", "--q", "8", "--n", "3", "--concurrency", "2", "--json",
		"--update-same-doc", "--pregen-mb", "64", "--writer-db", "other",
		"--readers", "9", "--hot-reads", "99", "--writers", "6", "--writer-docs", "66", "--stream-passes", "3", "--no-ceiling"})
	if err != nil {
		t.Fatal(err)
	}
	w := Config{URL: "http://a:b@h:1", Docs: 10, BatchSize: 5, DocSize: DocLarge, IndividualDocs: 7, Gets: 3, Q: 8, N: 3,
		Concurrency: 2, JSON: true, UpdateSameDoc: true, PregenMB: 64, WriterDB: WriterOther,
		Readers: 9, HotReads: 99, Writers: 6, WriterDocs: 66, StreamPasses: 3, NoCeiling: true}
	if cfg != w {
		t.Errorf("parsed %+v\nwant   %+v", cfg, w)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}

	t.Setenv(EnvURL, "http://env:pw@example:5984")
	d := Config{}.withDefaults()
	if d.URL != "http://env:pw@example:5984" || d.Gets != d.Docs || d.Docs != 100000 || d.Readers != 130 || d.WriterDocs != 10000 {
		t.Errorf("withDefaults: %+v", d)
	}
	for _, bad := range []Config{{DocSize: "huge"}, {Docs: -1}, {Q: -1}, {URL: "ftp://x"}, {URL: "localhost:5984"}, {WriterDB: "both"}, {Readers: -1}, {WriterDocs: -2}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}

func TestFabricHz(t *testing.T) {
	for _, c := range []struct {
		hz float64
		w  int64
	}{
		{0, 0}, {7.4, 7}, {99.5, 100}, {100, 100}, {155, 160}, {444, 440}, {1634, 1600},
		{3912, 3900}, {10000, 10000}, {49123, 49000}, {100000, 100000}, {123456, 120000},
	} {
		if got := fabricHz(c.hz); got != c.w {
			t.Errorf("fabricHz(%v) = %d, want %d", c.hz, got, c.w)
		}
	}
}

func TestPhaseLineFormat(t *testing.T) {
	r := &Result{Docs: 100000, AddOK: 100, AddHz: 443.2, AddSec: 225, AddP50Ms: 8.5, AddP99Ms: 21.26, TotalSec: 300.4}
	var b bytes.Buffer
	r.writePhase(&b, phaseAdd)
	r.writePhase(&b, phaseGet) // did not run: nothing
	r.Gets, r.GetCeilingSec, r.GetCeilingHz, r.GetCeilingP50Ms, r.GetCeilingP99Ms, r.GetCeilingRatio = 20000, 4.2, 4761.9, 0.2, 0.41, 0.6133
	r.writePhase(&b, phaseGetCeiling)
	r.writeTotal(&b)
	w := " * Add 100000 docs, ok:100/accepted:0     (Hz):     440   p50 8.50ms  p99 21.3ms\n" +
		" * Get ceiling, bare net/http 20000X      (Hz):    4800   p50 0.200ms  p99 0.410ms  get/ceiling 0.61\n" +
		" * Time to run all benchmarks            (sec):     300\n"
	if b.String() != w {
		t.Errorf("got\n%q\nwant\n%q", b.String(), w)
	}
}

func TestCountRows(t *testing.T) {
	body := `{"total_rows":3,"offset":0,"rows":[` +
		`{"id":"1","key":"1","value":{"rev":"1-a"},"doc":{"_id":"1","x":[1,2,{"y":"]}"}]}},` +
		`{"id":"2","key":"2","value":{"rev":"1-b"}},` +
		`{"id":"3","key":"3","value":{"rev":"1-c"}}],"update_seq":{"a":[1,2]}}`
	var done atomic.Int64
	n, first, err := countRows(strings.NewReader(body), "rows", time.Now(), &done)
	if err != nil || n != 3 || done.Load() != 3 || first <= 0 {
		t.Errorf("countRows = %d, %v, %v (done %d)", n, first, err, done.Load())
	}
	for _, bad := range []string{`{"rows":[{"id":"1"},`, `{"results":[]}`, `[]`, `{"rows":[{"key":"1"}]}`} {
		if _, _, err := countRows(strings.NewReader(bad), "rows", time.Now(), &done); !errors.Is(err, ErrResponse) {
			t.Errorf("countRows(%q) err = %v, want ErrResponse", bad, err)
		}
	}
}

func BenchmarkCountRowsIncludeDocsMedium(b *testing.B) {
	g, _ := newDocGen(DocMedium, 1)
	var buf bytes.Buffer
	buf.WriteString(`{"total_rows":200,"offset":0,"rows":[`)
	for i := range 200 {
		if i > 0 {
			buf.WriteString(",\r\n")
		}
		fmt.Fprintf(&buf, `{"id":"%d","key":"%d","value":{"rev":"1-abc"},"doc":`, i, i)
		buf.Write(g.appendDoc(nil, []byte(strconv.Itoa(i)), "1-abc"))
		buf.WriteByte('}')
	}
	buf.WriteString("]}")
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var done atomic.Int64
	for b.Loop() {
		if _, _, err := countRows(bytes.NewReader(data), "rows", time.Now(), &done); err != nil {
			b.Fatal(err)
		}
	}
}
