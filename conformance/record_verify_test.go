package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Tests of the recorder. TestRecorderCanned and TestRecorderRoundTrip need no
// CouchDB; TestRecorderLive records a few scenarios from a real one.

// corpusLines reads the raw lines of dir/*.jsonl, by record name.
func corpusLines(dir string) (map[string][]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.jsonl in %s", dir)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var r struct{ Name string }
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			out[r.Name] = line
		}
	}
	return out, nil
}

// firstDifference shows where two lines part.
func firstDifference(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("at byte %d:\n  want …%s\n  got  …%s", i, clip(string(want[from:]), 240), clip(string(got[from:]), 240))
}

// cannedExchange is one step of a canned scenario with CouchDB's answer.
type cannedExchange struct {
	status int
	header map[string]string
	body   string
	want   string // the record line, without its newline
}

func TestRecorderCanned(t *testing.T) {
	const (
		hashA  = "967a00dff5e02add41819138abb3284d"
		hashB  = "7051cbe5c8faa2c5ef2ea9ed2be6ec2c"
		client = "1-0000aaaa0000aaaa0000aaaa0000aaaa"
		seq1   = "1-g1AAAABXeJzLYWBgYMpgTmEQTM4vTc5ISXIwNDLXMwBCwxygPFMiQ5L8____szKYE1lygQLsJiaGZgaGidj0YzclyQFIJtXDjWIBGwXSYJphkmKRZm6egU0vHrPyWIAkQwOQAhq3H2weq5GBsbGpmYU2Nn1ZAN6vLOk"
		seq2   = "2-g1AAAABXeJzLYWBgYMpgTmEQTM4vTc5ISXIwNDLXMwBCwxygPFMiQ5L8____szKYE1lygQLsJiaGZgaGidj0YzclyQFIJtXDjWIBGwXSYJphkmKRZm6egU0vHrPyWIAkQwOQAhq3H2weq5GBsbGpmYU2Nn1ZAN6vLOl"
		cookie = "AuthSession=YWRtaW46NjkyRTAyMzA6Pc0kD1oTQ1IyTQ; Version=1; Expires=Tue, 01-Dec-2026 19:50:40 GMT; Max-Age=600; Path=/; HttpOnly"
	)
	defs := `{"scenario": "canned", "setup": ["PUT /{db}"], "steps": [
  {"name": "canned-put", "request": {"method": "PUT", "path": "/{db}/doc1", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<admin>"}, "body": {"v": 1}}, "vary": {"/response/headers/ETag": "rev", "/response/body/rev": "rev"}},
  {"name": "canned-update", "request": {"method": "PUT", "path": "/{db}/doc1", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<admin>"}, "body": {"_rev": "1-<rev:1>", "v": 2}}, "vary": {"/response/headers/ETag": "rev", "/response/body/rev": "rev"}},
  {"name": "canned-branch", "request": {"method": "POST", "path": "/{db}/_bulk_docs", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<admin>"}, "body": {"new_edits": false, "docs": [{"_id": "doc1", "_rev": "` + client + `", "v": "é"}]}}},
  {"name": "canned-feed", "request": {"method": "GET", "path": "/{db}/_changes?feed=continuous&style=all_docs&timeout=1000", "headers": {"Accept": "application/json", "Authorization": "<admin>"}}, "vary": {"/response/body": "feed"}, "note": "Client revs stay literal."},
  {"name": "canned-login", "request": {"method": "POST", "path": "/_session", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<none>"}, "body": {"name": "admin", "password": "<admin-password>"}}, "vary": {"/response/headers/Set-Cookie": "cookie"}},
  {"name": "canned-info", "request": {"method": "GET", "path": "/{db}", "headers": {"Accept": "application/json", "Cookie": "<admin>"}}, "vary": {"/response/body/instance_start_time": "time", "/response/body/disk_format_version": "literal", "/response/body/update_seq": "seq", "/response/body/sizes/file": "size"}}
]}`
	exchanges := []cannedExchange{{
		status: 201,
		header: map[string]string{"Content-Type": "application/json", "ETag": `"1-` + hashA + `"`, "Location": "http://127.0.0.1:5984/golden-canned/doc1", "Cache-Control": "must-revalidate", "Date": "Tue, 01 Dec 2026 19:40:40 GMT", "Server": "CouchDB/3.5.2 (Erlang OTP/25)", "X-Couch-Request-ID": "0f5578b082", "X-CouchDB-Body-Time": "0"},
		body:   `{"ok":true,"id":"doc1","rev":"1-` + hashA + `"}`,
		want:   `{"area": "canned", "scenario": "canned", "name": "canned-put", "step": 1, "setup": ["PUT /{db}"], "request": {"method": "PUT", "path": "/{db}/doc1", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<admin>"}, "body": {"v": 1}}, "response": {"status": 201, "headers": {"Content-Type": "application/json", "ETag": "\"1-<rev:1>\"", "Location": "{base}/{db}/doc1", "Cache-Control": "must-revalidate"}, "body": {"ok": true, "id": "doc1", "rev": "1-<rev:1>"}}, "normalise": ["/response/headers/ETag", "/response/body/rev"]}`,
	}, {
		status: 201,
		header: map[string]string{"Content-Type": "application/json", "ETag": `"2-` + hashB + `"`, "Location": "http://127.0.0.1:5984/golden-canned/doc1", "Cache-Control": "must-revalidate"},
		body:   `{"ok":true,"id":"doc1","rev":"2-` + hashB + `"}`,
		want:   `{"area": "canned", "scenario": "canned", "name": "canned-update", "step": 2, "request": {"method": "PUT", "path": "/{db}/doc1", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<admin>"}, "body": {"_rev": "1-<rev:1>", "v": 2}}, "response": {"status": 201, "headers": {"Content-Type": "application/json", "ETag": "\"2-<rev:2>\"", "Location": "{base}/{db}/doc1", "Cache-Control": "must-revalidate"}, "body": {"ok": true, "id": "doc1", "rev": "2-<rev:2>"}}, "normalise": ["/request/body/_rev", "/response/headers/ETag", "/response/body/rev"]}`,
	}, {
		status: 201,
		header: map[string]string{"Content-Type": "application/json", "Cache-Control": "must-revalidate"},
		body:   `[]`,
		want:   `{"area": "canned", "scenario": "canned", "name": "canned-branch", "step": 3, "request": {"method": "POST", "path": "/{db}/_bulk_docs", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<admin>"}, "body": {"new_edits": false, "docs": [{"_id": "doc1", "_rev": "` + client + `", "v": "é"}]}}, "response": {"status": 201, "headers": {"Content-Type": "application/json", "Cache-Control": "must-revalidate"}, "body": []}, "normalise": []}`,
	}, {
		status: 200,
		header: map[string]string{"Content-Type": "application/json", "Cache-Control": "must-revalidate", "Transfer-Encoding": "chunked"},
		body:   `{"seq":"` + seq2 + `","id":"doc1","changes":[{"rev":"2-` + hashB + `"},{"rev":"` + client + `"}]}` + "\n" + `{"last_seq":"` + seq2 + `","pending":0}` + "\n\n",
		want:   `{"area": "canned", "scenario": "canned", "name": "canned-feed", "step": 4, "request": {"method": "GET", "path": "/{db}/_changes?feed=continuous&style=all_docs&timeout=1000", "headers": {"Accept": "application/json", "Authorization": "<admin>"}}, "response": {"status": 200, "headers": {"Content-Type": "application/json", "Cache-Control": "must-revalidate"}, "body": "{\"seq\":\"<seq:1>\",\"id\":\"doc1\",\"changes\":[{\"rev\":\"2-<rev:2>\"},{\"rev\":\"` + client + `\"}]}\n{\"last_seq\":\"<seq:1>\",\"pending\":0}\n\n"}, "normalise": ["/response/body"], "note": "Client revs stay literal."}`,
	}, {
		status: 200,
		header: map[string]string{"Content-Type": "application/json", "Cache-Control": "must-revalidate", "Set-Cookie": cookie},
		body:   `{"ok":true,"name":"admin","roles":["_admin"]}`,
		want:   `{"area": "canned", "scenario": "canned", "name": "canned-login", "step": 5, "request": {"method": "POST", "path": "/_session", "headers": {"Accept": "application/json", "Content-Type": "application/json", "Authorization": "<none>"}, "body": {"name": "admin", "password": "<admin-password>"}}, "response": {"status": 200, "headers": {"Content-Type": "application/json", "Cache-Control": "must-revalidate", "Set-Cookie": "AuthSession=<session>; Version=1; Expires=<time>; Max-Age=600; Path=/; HttpOnly"}, "body": {"ok": true, "name": "admin", "roles": ["_admin"]}}, "normalise": ["/response/headers/Set-Cookie", "/request/body/password"]}`,
	}, {
		status: 200,
		header: map[string]string{"Content-Type": "application/json", "Cache-Control": "must-revalidate"},
		body:   `{"instance_start_time":"1796153014","db_name":"golden-canned","update_seq":"` + seq2 + `","purge_seq":"` + seq1 + `","sizes":{"file":8355,"external":0},"disk_format_version":8}`,
		want:   `{"area": "canned", "scenario": "canned", "name": "canned-info", "step": 6, "request": {"method": "GET", "path": "/{db}", "headers": {"Accept": "application/json", "Cookie": "<admin>"}}, "response": {"status": 200, "headers": {"Content-Type": "application/json", "Cache-Control": "must-revalidate"}, "body": {"instance_start_time": "<time>", "db_name": "{db}", "update_seq": "<seq:1>", "purge_seq": "` + seq1 + `", "sizes": {"file": "<size>", "external": 0}, "disk_format_version": 8}}, "normalise": ["/response/body/instance_start_time", "/response/body/disk_format_version", "/response/body/update_seq", "/response/body/sizes/file"]}`,
	}}

	var sd scenarioDef
	dec := json.NewDecoder(strings.NewReader(defs))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sd); err != nil {
		t.Fatal(err)
	}
	sc, err := sd.scenario("canned")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness("http://127.0.0.1:5984", corpusAdmin, "s3cret")
	st := newScenarioState(sc, h)
	rs := newRecState(st, sc)
	for i, ex := range exchanges {
		r := sc.records[i]
		req, err := h.buildRequest(st, r)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		var sent []byte
		if req.Body != nil {
			sent, _ = io.ReadAll(req.Body)
		}
		switch r.Name {
		case "canned-update": // the rev bound by step 1 goes out
			if want := `{"_rev":"1-` + hashA + `","v":2}`; string(sent) != want {
				t.Errorf("%s sent %s, want %s", r.Name, sent, want)
			}
		case "canned-login":
			if want := `{"name":"admin","password":"s3cret"}`; string(sent) != want {
				t.Errorf("%s sent %s, want %s", r.Name, sent, want)
			}
		case "canned-info": // the cookie of step 5
			if got := req.Header.Get("Cookie"); got != "AuthSession=YWRtaW46NjkyRTAyMzA6Pc0kD1oTQ1IyTQ" || req.Header.Get("Authorization") != "" {
				t.Errorf("%s sent Cookie %q, Authorization %q", r.Name, got, req.Header.Get("Authorization"))
			}
		}
		hdr := http.Header{}
		for k, v := range ex.header {
			hdr.Set(k, v)
		}
		rec, err := rs.convert(r, &sd.Steps[i], ex.status, hdr, []byte(ex.body))
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if got := encodeRecord(rec); string(got) != ex.want+"\n" {
			t.Errorf("%s: %s", r.Name, firstDifference([]byte(ex.want+"\n"), got))
		}
		st.afterResponse(r, ex.status, hdr)
	}
}

// TestRecorderErrors: a scenario that does not fit the answer fails the
// recording instead of writing a wrong record.
func TestRecorderErrors(t *testing.T) {
	cases := []struct {
		name, vary, body, want string
	}{
		{"missing pointer", `{"/response/body/nope": "rev"}`, `{"ok":true}`, "vary /response/body/nope: no such value"},
		{"not a rev", `{"/response/body/rev": "rev"}`, `{"rev":"abc"}`, "no rev in"},
		{"client rev", `{"/response/body/rev": "rev"}`, `{"rev":"1-0000aaaa0000aaaa0000aaaa0000aaaa"}`, "a rev the scenario's requests write themselves"},
		{"size wants a number", `{"/response/body/s": "size"}`, `{"s":"12"}`, "size wants a number"},
		{"uuid wants hex", `{"/response/body/uuid": "uuid"}`, `{"uuid":"xyz"}`, "uuid wants 32 hex digits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defs := `{"scenario": "bad", "steps": [{"name": "bad-step", "request": {"method": "PUT", "path": "/{db}/d?rev=1-0000aaaa0000aaaa0000aaaa0000aaaa", "headers": {"Accept": "application/json"}}, "vary": ` + c.vary + `}]}`
			var sd scenarioDef
			if err := json.Unmarshal([]byte(defs), &sd); err != nil {
				t.Fatal(err)
			}
			sc, err := sd.scenario("bad")
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness("http://127.0.0.1:5984", corpusAdmin, "pw")
			rs := newRecState(newScenarioState(sc, h), sc)
			hdr := http.Header{"Content-Type": {"application/json"}}
			_, err = rs.convert(sc.records[0], &sd.Steps[0], 200, hdr, []byte(c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestRecorderRoundTrip feeds the recorder, for every committed record, an
// answer synthesised from the record (placeholders filled with made-up values,
// as TestHarnessSelfCheck does) and checks it writes the committed line again,
// byte for byte. It also checks that testdata/scenarios and testdata/*.jsonl
// describe the same steps.
func TestRecorderRoundTrip(t *testing.T) {
	files, err := loadScenarioFiles(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	scs, n, err := loadCorpus("testdata")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := corpusLines("testdata")
	if err != nil {
		t.Fatal(err)
	}
	corpus := map[string]*scenario{}
	for _, sc := range scs {
		corpus[sc.name] = sc
	}
	h := newHarness("http://127.0.0.1:1", corpusAdmin, "pw")
	steps := 0
	for _, sf := range files {
		for _, sd := range sf.scenarios {
			sc, err := sd.scenario(sf.area)
			if err != nil {
				t.Fatal(err)
			}
			rec := corpus[sd.Scenario]
			if rec == nil || len(rec.records) != len(sc.records) {
				t.Errorf("scenario %s: %d steps in %s, %d records in testdata", sd.Scenario, len(sc.records), sf.path, len(rec.records))
				continue
			}
			st := newScenarioState(sc, h)
			rs := newRecState(st, sc)
			for i, r := range sc.records {
				cr := rec.records[i]
				if cr.Name != r.Name || cr.Area != sf.area {
					t.Errorf("%s step %d: %s (%s) in testdata", r.Name, i+1, cr.Name, cr.Area)
					break
				}
				hdr := http.Header{}
				for k, v := range cr.Response.Headers {
					hdr.Set(k, fillText(st.names.apply(v)))
				}
				var body []byte
				switch cr.resBody.kind {
				case bodyJSON:
					body = encodeJSON(fillJSON(cr.resBody.json, st.names))
				case bodyText:
					body = []byte(fillText(st.names.apply(cr.resBody.text)))
				}
				out, err := rs.convert(r, &sd.Steps[i], cr.Response.Status, hdr, body)
				if err != nil {
					t.Errorf("%s: %v", r.Name, err)
					break
				}
				if got := encodeRecord(out); !bytes.Equal(got, lines[r.Name]) {
					t.Errorf("%s: the recorder does not reproduce the committed record %s", r.Name, firstDifference(lines[r.Name], got))
				}
				st.afterResponse(r, cr.Response.Status, hdr)
				steps++
			}
		}
	}
	if steps != n {
		t.Errorf("%d scenario steps, %d corpus records", steps, n)
	}
}

// liveScenarios are the scenarios TestRecorderLive records: revs, uuids,
// seqs, sizes, times, a cookie login with the admin password, literals.
var liveScenarios = []string{"server-welcome", "server-dbs-info", "doc-crud", "doc-post", "sec-session"}

// TestRecorderLive records a few scenarios from a real CouchDB 3.5.2
// (../shared/couchdb; skipped without it) and checks the records equal the
// committed ones byte for byte.
func TestRecorderLive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a CouchDB: not with -short")
	}
	files, err := loadScenarioFiles(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := corpusLines("testdata")
	if err != nil {
		t.Fatal(err)
	}
	base, user, password := startCouchDB(t)
	h := newHarness(base, user, password)
	h.checkCouchDB(t)
	found := 0
	for _, sf := range files {
		for _, sd := range sf.scenarios {
			if !contains(liveScenarios, sd.Scenario) {
				continue
			}
			found++
			got, err := h.recordScenario(t, sf.area, sd)
			if err != nil {
				t.Errorf("scenario %s: %v", sd.Scenario, err)
				continue
			}
			for i, line := range got {
				name := sd.Steps[i].Name
				if !bytes.Equal(line, lines[name]) {
					t.Errorf("%s: recorded now, differs from testdata (re-record? see doc.go) %s", name, firstDifference(lines[name], line))
				}
			}
		}
	}
	if found != len(liveScenarios) {
		t.Errorf("found %d of the scenarios %v", found, liveScenarios)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestGoldenCrossCheck compares the repository's corpus with the starting
// corpus ../shared/couchdb-golden when that is present: every golden record
// (scenario, name, step) must be in testdata with the same request, setup and
// note, and the same response and normalise pointers, apart from the
// normalised literal values (version, git_sha, … vary between builds).
func TestGoldenCrossCheck(t *testing.T) {
	dir := os.Getenv("SETTEE_GOLDEN_DIR")
	if dir == "" {
		dir = sharedDir("couchdb-golden", "README.md")
	}
	golden, err := corpusLines(dir)
	if err != nil {
		t.Skipf("no golden corpus to cross-check with: %v", err)
	}
	ours, err := corpusLines("testdata")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(golden))
	for name := range golden {
		names = append(names, name)
	}
	sort.Strings(names)
	same, literal := 0, 0
	for _, name := range names {
		line, ok := ours[name]
		if !ok {
			t.Errorf("%s: in %s, not in testdata", name, dir)
			continue
		}
		if bytes.Equal(line, golden[name]) {
			same++
			continue
		}
		g, o := mustRecordJSON(t, golden[name]), mustRecordJSON(t, line)
		gn, on := normaliseSet(g), normaliseSet(o)
		if !equalSets(gn, on) {
			t.Errorf("%s: normalise %v in %s, %v in testdata", name, sortedKeys(gn), dir, sortedKeys(on))
			continue
		}
		var diffs []string
		compareRecords("", g, o, gn, &diffs)
		if len(diffs) > 0 {
			t.Errorf("%s differs from %s:\n  %s", name, dir, strings.Join(diffs, "\n  "))
			continue
		}
		literal++
	}
	t.Logf("cross-check with %s: %d records byte-identical, %d differ only in normalised literals or normalise order", dir, same, literal)
}

func mustRecordJSON(t *testing.T, line []byte) any {
	t.Helper()
	v, err := decodeJSON(line)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func normaliseSet(rec any) map[string]bool {
	out := map[string]bool{}
	o, _ := rec.(*object)
	if o == nil {
		return out
	}
	list, _ := o.vals["normalise"].([]any)
	for _, p := range list {
		if s, ok := p.(string); ok {
			out[s] = true
		}
	}
	return out
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// compareRecords compares two records value by value; a normalised value
// that holds no placeholder is a literal of one server and may differ.
func compareRecords(ptr string, g, o any, norm map[string]bool, diffs *[]string) {
	if ptr == "/normalise" {
		return // compared as a set
	}
	if norm[ptr] && !hasPlaceholder(g) && !hasPlaceholder(o) {
		return
	}
	switch gv := g.(type) {
	case *object:
		ov, ok := o.(*object)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s vs %s", ptr, render(g), render(o)))
			return
		}
		for _, k := range gv.keys {
			if _, ok := ov.vals[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s: missing in testdata", ptrJoin(ptr, k)))
				continue
			}
			compareRecords(ptrJoin(ptr, k), gv.vals[k], ov.vals[k], norm, diffs)
		}
		for _, k := range ov.keys {
			if _, ok := gv.vals[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s: only in testdata", ptrJoin(ptr, k)))
			}
		}
	case []any:
		ov, ok := o.([]any)
		if !ok || len(ov) != len(gv) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s vs %s", ptr, render(g), render(o)))
			return
		}
		for i := range gv {
			compareRecords(ptrJoin(ptr, i), gv[i], ov[i], norm, diffs)
		}
	default:
		if !bytes.Equal(encodeJSON(g), encodeJSON(o)) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s vs %s", ptr, render(g), render(o)))
		}
	}
}
