package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testcouch"
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
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(testserver.AdminUser, testserver.AdminPassword)
	runBenchPhasesSmall(t, u.String())
}

// TestRunBenchPhasesCouchDB runs the same against Apache CouchDB 3.5.2:
// $BENCH_COUCHDB_URL (http://user:pw@host:port), else one testcouch starts
// (skipped when there is none).
func TestRunBenchPhasesCouchDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no live CouchDB")
	}
	base := os.Getenv("BENCH_COUCHDB_URL")
	if base == "" {
		c := testcouch.Start(t, "")
		u, err := url.Parse(c.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(c.User, c.Password)
		base = u.String()
	}
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
