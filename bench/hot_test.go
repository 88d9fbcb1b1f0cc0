package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// checkNewPhases checks the figures of the GET ceiling, hot read, many
// writers and sequential add phases of a run of cfg that succeeded: all
// filled in and consistent with each other (no timing is asserted).
func checkNewPhases(t *testing.T, cfg Config, res *Result) {
	t.Helper()
	for name, p := range map[string][4]float64{
		"get ceiling": {res.GetCeilingHz, res.GetCeilingP50Ms, res.GetCeilingP99Ms, res.GetCeilingSec},
		"hot read":    {res.HotReadHz, res.HotReadP50Ms, res.HotReadP99Ms, res.HotReadSec},
		"writers":     {res.WritersHz, res.WritersP50Ms, res.WritersP99Ms, res.WritersSec},
		"seq add":     {res.SeqAddHz, res.SeqAddP50Ms, res.SeqAddP99Ms, res.SeqAddSec},
	} {
		if p[0] <= 0 || p[1] <= 0 || p[1] > p[2] || p[3] <= 0 {
			t.Errorf("%s: hz %v p50 %v p99 %v sec %v", name, p[0], p[1], p[2], p[3])
		}
	}
	if w := math.Round(res.GetHz/res.GetCeilingHz*1000) / 1000; res.GetCeilingRatio != w {
		t.Errorf("get/ceiling %v, want %v (%v / %v)", res.GetCeilingRatio, w, res.GetHz, res.GetCeilingHz)
	}
	if res.GetCeilingBodyBytes < 100 {
		t.Errorf("ceiling body of %d bytes", res.GetCeilingBodyBytes)
	}
	if w := strconv.Itoa((cfg.Docs + 1) / 2); res.HotReadDocID != w {
		t.Errorf("hot read doc %q, want %q", res.HotReadDocID, w)
	}
	if res.WritersOK+res.WritersAccepted != cfg.WriterDocs {
		t.Errorf("writers: %d ok + %d accepted, want %d", res.WritersOK, res.WritersAccepted, cfg.WriterDocs)
	}
	if nb := (cfg.Docs + cfg.BatchSize - 1) / cfg.BatchSize; res.SeqAddOK+res.SeqAddAccepted != nb {
		t.Errorf("seq add: %d ok + %d accepted batches, want %d", res.SeqAddOK, res.SeqAddAccepted, nb)
	}
	if res.GetCeilingServer != CeilingChildProcess {
		t.Errorf("ceiling server %q, want %q (TestMain called CeilingChild)", res.GetCeilingServer, CeilingChildProcess)
	}
	if res.SeqAddDB == "" || res.SeqAddDB == res.DB || !strings.HasPrefix(res.SeqAddDB, DBPrefix) {
		t.Errorf("seq add db %q (bench db %q)", res.SeqAddDB, res.DB)
	}
}

// TestRunBenchPhasesSettee runs the whole fabric_bench workload, the new
// phases with small counts, against a real settee, and checks that they
// reported and left no database behind.
func TestRunBenchPhasesSettee(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a real database")
	}
	s := testserver.Start(t)
	u := adminURL(t, s.URL)
	runBenchPhasesSmall(t, u.String())
}

// TestRunBenchPhasesCouchDB runs the same against Apache CouchDB 3.5.2:
// $BENCH_COUCHDB_URL (http://user:pw@host:port), else one testcouch starts
// (skipped when there is none).
func TestRunBenchPhasesCouchDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no live CouchDB")
	}
	base := couchURL(t, "BENCH_COUCHDB_URL")
	runBenchPhasesSmall(t, base)
}

// runBenchPhasesSmall runs 300 medium docs, 8 readers and 8 writers of 200
// requests each, and checks the new phases' figures and lines.
func runBenchPhasesSmall(t *testing.T, base string) {
	t.Helper()
	cfg := Config{URL: base, Docs: 300, BatchSize: 100, DocSize: DocMedium, IndividualDocs: 20, Concurrency: 2,
		Readers: 8, HotReads: 200, Writers: 8, WriterDocs: 200}
	var out bytes.Buffer
	res, err := Run(context.Background(), cfg, &out, nil)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	checkNewPhases(t, cfg, res)
	if res.GetCeilingBodyBytes < 14000 {
		t.Errorf("ceiling body of %d bytes, want a medium doc's", res.GetCeilingBodyBytes)
	}
	for _, w := range []string{"Get ceiling, bare net/http 300X", "get/ceiling ", "Get one doc, 8 clients 200X",
		"Put small docs, 8 clients 200X", "Add 300 docs seq, ok:"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q", w)
		}
	}
	c, err := newClient(base, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var dbs []string
	if err := c.getJSON(context.Background(), "/_all_dbs", "", &dbs); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		if db == res.DB || db == res.SeqAddDB {
			t.Errorf("database %s left behind", db)
		}
	}
}

// TestRunNoCeilingSequential: --no-ceiling skips the ceiling, and with
// --concurrency 1 the add phase is fabric_bench's loop already, so the
// sequential adds do not run again.
func TestRunNoCeilingSequential(t *testing.T) {
	f := newFakeCouch(t, "")
	cfg := testConfig(f)
	cfg.Docs, cfg.NoCeiling, cfg.Concurrency = 500, true, 1
	var out bytes.Buffer
	res, err := Run(context.Background(), cfg, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetCeilingSec != 0 || res.GetCeilingHz != 0 || res.SeqAddSec != 0 || res.SeqAddDB != "" {
		t.Errorf("ceiling or seq add ran: %+v", res)
	}
	if strings.Contains(out.String(), "Get ceiling") || strings.Contains(out.String(), "docs seq") {
		t.Errorf("output:\n%s", out.String())
	}
	if res.HotReadSec <= 0 || res.WritersSec <= 0 {
		t.Errorf("hot read %vs, writers %vs", res.HotReadSec, res.WritersSec)
	}
	if f.seenPaths["PUT /db"] != 1 {
		t.Errorf("databases created: %d", f.seenPaths["PUT /db"])
	}
}

// TestRunHotReadFails: one bad answer among the hot reads fails the phase
// (and the run), whether a status or a doc that is not the one asked for.
func TestRunHotReadFails(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"500", 500, `{"error":"internal_server_error","reason":"boom"}`, ErrStatus},
		{"wrong _id", 200, `{"_id":"7","_rev":"1-abc","x":1}`, ErrResponse},
		{"no _id", 200, `{"_rev":"1-abc","x":1}`, ErrResponse},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCouch(t, "")
			cfg := testConfig(f)
			cfg.Docs, cfg.Gets, cfg.NoCeiling = 300, 20, true
			f.badGet = func(n int) (int, string) {
				if n == cfg.Gets+150 { // one of the hot reads
					return c.status, c.body
				}
				return 0, ""
			}
			var out bytes.Buffer
			res, err := Run(context.Background(), cfg, &out, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if res.GetSec <= 0 || res.HotReadSec != 0 || res.AllDocsSec != 0 {
				t.Errorf("get %vs, hot read %vs, all docs %vs", res.GetSec, res.HotReadSec, res.AllDocsSec)
			}
			if strings.Contains(out.String(), "Get one doc") {
				t.Errorf("hot read line printed for a failed phase:\n%s", out.String())
			}
			if f.deletedDB(res.DB) == nil {
				t.Error("bench db not deleted")
			}
		})
	}
}

// TestRunWritersFail: one bad answer among the many writers' PUTs fails the
// phase, whether a status, no ok, or another doc's id.
func TestRunWritersFail(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"500", 500, `{"error":"internal_server_error","reason":"boom"}`, ErrStatus},
		{"409", 409, `{"error":"conflict","reason":"Document update conflict."}`, ErrStatus},
		{"no ok", 201, `{"id":"1","rev":"1-abc"}`, ErrResponse},
		{"wrong id", 201, `{"ok":true,"id":"1","rev":"1-abc"}`, ErrResponse},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCouch(t, "")
			cfg := testConfig(f)
			cfg.Docs = 300
			f.badPut = func(n int) (int, string) {
				if n == cfg.IndividualDocs+100 { // one of the many writers'
					return c.status, c.body
				}
				return 0, ""
			}
			var out bytes.Buffer
			res, err := Run(context.Background(), cfg, &out, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if res.SingleUpdatesSec <= 0 || res.WritersSec != 0 || res.SeqAddSec != 0 || res.TotalSec != 0 {
				t.Errorf("single %vs, writers %vs, seq add %vs, total %vs", res.SingleUpdatesSec, res.WritersSec, res.SeqAddSec, res.TotalSec)
			}
			if strings.Contains(out.String(), "Put small docs") {
				t.Errorf("writers line printed for a failed phase:\n%s", out.String())
			}
			if f.deletedDB(res.DB) == nil {
				t.Error("bench db not deleted")
			}
		})
	}
}

// TestCeilingServer: the ceiling's server, a child process or in this one,
// answers every GET with the reply's bytes and headers, and stops.
func TestCeilingServer(t *testing.T) {
	reply := &ceilingReply{Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"1-abc"`},
		"Content-Length": {"15"}}, Body: []byte(`{"_id":"1","x":1}`[:15])}
	prog := &progress{w: io.Discard}
	for _, child := range []bool{true, false} {
		childOK.Store(child)
		s, err := startCeiling(reply, prog)
		childOK.Store(true)
		if err != nil {
			t.Fatal(err)
		}
		if w := map[bool]string{true: CeilingChildProcess, false: CeilingInProcess}[child]; s.where != w {
			t.Errorf("server %q, want %q", s.where, w)
		}
		for _, path := range []string{"/db/1", "/other/x?y=1"} {
			resp, err := http.Get("http://" + s.addr + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != string(reply.Body) || resp.ContentLength != 15 ||
				resp.Header.Get("ETag") != `"1-abc"` || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: %d %q %v", s.where, resp.StatusCode, b, resp.Header)
			}
		}
		s.stop()
		if _, err := http.Get("http://" + s.addr + "/"); err == nil {
			t.Errorf("%s server still answers after stop", s.where)
		}
	}
}

// TestRunCeilingInProcess: without CeilingChild the ceiling serves from the
// client's process, and its line says so.
func TestRunCeilingInProcess(t *testing.T) {
	childOK.Store(false)
	defer childOK.Store(true)
	f := newFakeCouch(t, "")
	cfg := testConfig(f)
	cfg.Docs = 300
	var out bytes.Buffer
	res, err := Run(context.Background(), cfg, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetCeilingServer != CeilingInProcess || res.GetCeilingHz <= 0 || !strings.Contains(out.String(), ", in-process\n") {
		t.Errorf("ceiling %q %v/s:\n%s", res.GetCeilingServer, res.GetCeilingHz, out.String())
	}
}

func TestRawDocID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"_id":"12","_rev":"1-a"}`, `"12"`},
		{`{"_rev":"1-a","a":{"_id":"x"},"_id":"a\"b"}`, `"a\"b"`},
		{`{"_rev":"1-a"}`, ``},
		{`{"_id":12}`, ``},
		{`[]`, ``},
	} {
		if got := string(rawDocID([]byte(c.in))); got != c.want {
			t.Errorf("rawDocID(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestMain lets this test binary, started again by a GET ceiling, be its
// server (CeilingChild), as `settee bench` is.
func TestMain(m *testing.M) {
	CeilingChild()
	os.Exit(m.Run())
}
