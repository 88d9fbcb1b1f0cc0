package conformance

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
)

// The recorder: `go test ./conformance -run '^TestRecord$' -record -v` (or
// `make record`) starts a real Apache CouchDB 3.5.2 with ../shared/couchdb
// (or records from -record.couchdb), plays every scenario of
// testdata/scenarios/*.json against it, and writes testdata/*.jsonl.
var (
	recordFlag    = flag.Bool("record", false, "TestRecord: re-record the corpus from a real CouchDB 3.5.2 (see doc.go)")
	recordCouchDB = flag.String("record.couchdb", "", "TestRecord: record from this running CouchDB 3.5.2 (http://admin:PASSWORD@127.0.0.1:PORT) instead of starting one with $SETTEE_COUCHDB_DIR/start.sh")
	recordOut     = flag.String("record.out", "testdata", "TestRecord: write the recorded <area>.jsonl files to this directory")
)

const scenarioDir = "testdata/scenarios"

// sharedDir finds shared/<name> (holding the file probe) beside the
// repository or beside one of the directories above it; if there is none it
// returns where it should be, ../shared/<name> from the repository.
func sharedDir(name, probe string) string {
	repo, _ := filepath.Abs("..")
	for d := filepath.Dir(repo); ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "shared", name)
		if _, err := os.Stat(filepath.Join(cand, probe)); err == nil {
			return cand
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return filepath.Join(filepath.Dir(repo), "shared", name)
}

// startCouchDB starts a CouchDB 3.5.2 single node (admin:admin, q=2, n=1)
// on a free 127.0.0.1 port with a fresh data dir, stopped when t ends
// (internal/testcouch). The test is skipped when ../shared/couchdb is
// absent or will not start here.
func startCouchDB(t testing.TB) (base, user, password string) {
	t.Helper()
	cs := testcouch.Start(t, "")
	if cs.User != corpusAdmin {
		t.Fatalf("CouchDB at %s: the corpus's server admin is named %q, not %q", cs.URL, corpusAdmin, cs.User)
	}
	return cs.URL, cs.User, cs.Password
}

// splitCouchURL splits http://user:pw@127.0.0.1:port into base URL and the
// admin's credentials.
func splitCouchURL(t testing.TB, s string) (base, user, password string) {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil || u.User == nil || u.Host == "" {
		t.Fatalf("CouchDB URL %q: want http://admin:PASSWORD@127.0.0.1:PORT (%v)", s, err)
	}
	if h := u.Hostname(); h != "127.0.0.1" {
		t.Fatalf("CouchDB URL %q: the recorder talks to 127.0.0.1 only", s)
	}
	password, _ = u.User.Password()
	if u.User.Username() != corpusAdmin {
		t.Fatalf("CouchDB URL %q: the corpus's server admin is named %q", s, corpusAdmin)
	}
	return u.Scheme + "://" + u.Host, u.User.Username(), password
}

// checkCouchDB makes sure the server is the CouchDB the corpus is of.
func (h *harness) checkCouchDB(t testing.TB) {
	t.Helper()
	status, body, err := h.adminCall("GET", "/")
	if err != nil || status != 200 {
		t.Fatalf("GET %s/: %d %s %v", h.base, status, clip(string(body), 200), errOrEmpty(err))
	}
	var welcome struct{ Couchdb, Version string }
	if err := json.Unmarshal(body, &welcome); err != nil || welcome.Couchdb != "Welcome" || welcome.Version != "3.5.2" {
		t.Fatalf("%s is not Apache CouchDB 3.5.2: %s", h.base, clip(string(body), 200))
	}
}

// checkFresh refuses a server on which alice exists or existed: _users keeps
// her history, so her user doc would be recorded at another generation.
func (h *harness) checkFresh(t testing.TB) {
	t.Helper()
	status, body, err := h.adminCall("GET", userDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if status != 404 || !bytes.Contains(body, []byte(`"reason":"missing"`)) {
		t.Fatalf("%s%s answers %d %s: record from a fresh CouchDB (the recorder starts one without -record.couchdb)", h.base, userDocPath, status, bytes.TrimSpace(body))
	}
}

// recordScenario plays one scenario definition against the server and returns
// its records, one encoded line per step.
func (h *harness) recordScenario(t testing.TB, area string, sd *scenarioDef) ([][]byte, error) {
	sc, err := sd.scenario(area)
	if err != nil {
		return nil, err
	}
	st := newScenarioState(sc, h)
	rs := newRecState(st, sc)
	h.preclean(sc, st)
	defer h.cleanup(t, sc, st)
	for _, s := range sd.Setup {
		method, path, _ := strings.Cut(st.names.apply(s), " ")
		status, body, err := h.adminCall(method, path)
		if err != nil || (status != 201 && status != 202) {
			return nil, fmt.Errorf("setup %s: %d %s %v", s, status, clip(string(body), 200), errOrEmpty(err))
		}
	}
	var lines [][]byte
	for i, r := range sc.records {
		req, err := h.buildRequest(st, r)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", r.Name, err)
		}
		status, hdr, body, err := h.do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", r.Name, req.URL.RequestURI(), err)
		}
		rec, err := rs.convert(r, &sd.Steps[i], status, hdr, body)
		if err != nil {
			return nil, fmt.Errorf("%s: %s answered %d %s: %v", r.Name, req.URL.RequestURI(), status, clip(string(body), 300), err)
		}
		lines = append(lines, encodeRecord(rec))
		st.afterResponse(r, status, hdr)
		if strings.Contains(r.Request.Path, "batch=ok") && status == 202 {
			if err := h.awaitBatchWrite(req.Method, req.URL.Opaque, body); err != nil {
				return nil, fmt.Errorf("%s: %v", r.Name, err)
			}
		}
	}
	return lines, nil
}

// preclean removes what an interrupted run may have left on a -record.couchdb
// server: the scenario's databases and, if the scenario uses it, alice.
func (h *harness) preclean(sc *scenario, st *scenarioState) {
	for _, db := range []string{st.names.db, st.names.db2} {
		_, _, _ = h.adminCall("DELETE", "/"+db)
	}
	for _, r := range sc.records {
		if !strings.HasPrefix(r.Request.Path, userDocPath) {
			continue
		}
		if status, body, err := h.adminCall("GET", userDocPath); err == nil && status == 200 {
			var doc struct {
				Rev string `json:"_rev"`
			}
			if json.Unmarshal(body, &doc) == nil && doc.Rev != "" {
				_, _, _ = h.adminCall("DELETE", userDocPath+"?rev="+url.QueryEscape(doc.Rev))
			}
		}
		return
	}
}

// awaitBatchWrite waits until the doc a batch=ok write accepted is readable,
// so that the next step records the state after the write ("the write lands a
// moment later").
func (h *harness) awaitBatchWrite(method, path string, body []byte) error {
	if method == "POST" {
		var res struct{ ID string }
		if err := json.Unmarshal(body, &res); err != nil || res.ID == "" {
			return fmt.Errorf("batch=ok answer without an id: %s", clip(string(body), 200))
		}
		path += "/" + url.PathEscape(res.ID)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, err := h.adminCall("GET", path)
		if err == nil && status == 200 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the batch=ok write to %s did not land within 10 s (last: %d %v)", path, status, errOrEmpty(err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRecord re-records the corpus (only with -record): every scenario of
// testdata/scenarios/*.json, against a CouchDB it starts (or -record.couchdb),
// into -record.out (testdata).
func TestRecord(t *testing.T) {
	if !*recordFlag {
		t.Skip("records the corpus from a real CouchDB only with -record: go test ./conformance -run '^TestRecord$' -record -v")
	}
	var base, user, password string
	if *recordCouchDB != "" {
		base, user, password = splitCouchURL(t, *recordCouchDB)
	} else {
		base, user, password = startCouchDB(t)
	}
	h := newHarness(base, user, password)
	h.checkCouchDB(t)
	h.checkFresh(t)
	files, err := loadScenarioFiles(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(*recordOut, 0o755); err != nil {
		t.Fatal(err)
	}
	// record everything first: a failed recording leaves the corpus as it was
	outs := make([]bytes.Buffer, len(files))
	n := 0
	for i, sf := range files {
		for _, sd := range sf.scenarios {
			lines, err := h.recordScenario(t, sf.area, sd)
			if err != nil {
				t.Fatalf("%s: scenario %s: %v", sf.path, sd.Scenario, err)
			}
			for _, l := range lines {
				outs[i].Write(l)
			}
			n += len(lines)
		}
	}
	stale, _ := filepath.Glob(filepath.Join(*recordOut, "*.jsonl"))
	written := map[string]bool{}
	for i, sf := range files {
		p := filepath.Join(*recordOut, sf.area+".jsonl")
		if err := os.WriteFile(p, outs[i].Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		written[p] = true
	}
	for _, p := range stale {
		if !written[p] {
			if err := os.Remove(p); err != nil {
				t.Error(err)
			}
			t.Logf("removed %s (no scenarios/%s)", p, strings.TrimSuffix(filepath.Base(p), ".jsonl")+".json")
		}
	}
	t.Logf("recorded %d records from %s into %s", n, base, *recordOut)
}
