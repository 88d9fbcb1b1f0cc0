package httpgw_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// wireStep is one request and what Apache CouchDB 3.5.2 answers it (asked
// 2026-12-01); the steps of a table run in order on one database.
type wireStep struct {
	method, path, body  string
	hdr                 map[string]string // request headers beside Content-Type: application/json
	status              int
	err, reason, inBody string            // "" : not checked
	inBodyAll           []string          // each in the answer (members whose order CouchDB does not keep)
	raw                 string            // the exact body, when set
	rows                int               // rows in the answer, when > 0; -1: none
	as                  string            // "user:password" to send, "-" for none; "": the admin
	keep                string            // keeps the answer's "rev" as {keep} for the steps after
	lags                bool              // CouchDB may answer it late (an eventually consistent cache)
	retry               time.Duration     // asks again until the status is right or this has passed
	wantHdr             map[string]string // response headers ({db} and the kept revs substituted; "": absent)
}

// deletedDocs are docs with revs the test wrote itself (new_edits=false),
// so the same revs stand on any server: a live doc, a deleted one, and a
// live one with a deleted conflict.
const deletedDocs = `{"new_edits":false,"docs":[
 {"_id":"live","_rev":"1-aaaa","v":1},
 {"_id":"gone","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"_deleted":true},
 {"_id":"br","_rev":"2-aaaa","_revisions":{"start":2,"ids":["aaaa","root"]},"v":1},
 {"_id":"br","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","root"]},"_deleted":true}]}`

var deleteSteps = []wireStep{
	{method: "POST", path: "/{db}/_bulk_docs", body: deletedDocs, status: 201},
	{method: "DELETE", path: "/{db}/nope", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/nope?rev=1-abc", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/nope?rev=bad", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/_design/nope", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/gone", status: 404, err: "not_found", reason: "deleted"},
	{method: "DELETE", path: "/{db}/gone?rev=2-bbbb", status: 404, err: "not_found", reason: "deleted"},
	{method: "GET", path: "/{db}/gone", status: 404, err: "not_found", reason: "deleted"},
	{method: "DELETE", path: "/{db}/live", status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "DELETE", path: "/{db}/live?rev=9-abc", status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "DELETE", path: "/{db}/live?rev=bad", status: 400, err: "bad_request", reason: "Invalid rev format"},
	// a deleted doc takes no rev, not even its tombstone's; it is re-created without one
	{method: "PUT", path: "/{db}/gone", body: `{"_rev":"2-bbbb","a":1}`, status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"gone","_rev":"2-bbbb","_deleted":true}]}`,
		status: 201, inBody: `"error":"conflict"`},
	{method: "PUT", path: "/{db}/gone", body: `{"a":2}`, status: 201, inBody: `"rev":"3-`},
	// a live doc's deleted conflict is edited by its rev
	{method: "PUT", path: "/{db}/br", body: `{"_rev":"2-bbbb","v":2}`, status: 201, inBody: `"rev":"3-`},
	{method: "DELETE", path: "/{db}/br?rev=2-bbbb", status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "DELETE", path: "/{db}/live?rev=1-aaaa", status: 200, inBody: `"rev":"2-`},
	{method: "DELETE", path: "/{db}/live?rev=1-aaaa", status: 404, err: "not_found", reason: "deleted"},
}

// startCouchDB starts a real CouchDB 3.5.2 for t: skipped with -short or
// where there is none (internal/testcouch).
//
// The *AsCouchDB tests run in parallel (t.Parallel): each has a CouchDB
// and a database of its own, and most of their time is CouchDB's
// answering, which overlaps well with another test's.
func startCouchDB(t *testing.T) *testcouch.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	return testcouch.Start(t, "")
}

// runOnCouchDB runs steps on a fresh database db of a real CouchDB: the
// table's answers are CouchDB's own.
func runOnCouchDB(t *testing.T, db string, steps []wireStep) {
	t.Helper()
	cs := startCouchDB(t)
	runSteps(t, cs.URL, cs.User, cs.Password, "", []wireStep{{method: "PUT", path: "/" + db, status: 201}})
	runSteps(t, cs.URL, cs.User, cs.Password, db, steps)
}

// stepRequest builds a table step's request: {db} and the kept revs put
// into path, body and headers; the admin's basic auth unless as names
// another user ("user:pw") or none ("-"); a JSON body unless hdr says.
func stepRequest(t testing.TB, base, user, pw, as, method, path, body string, hdr map[string]string, subst *strings.Replacer) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(subst.Replace(body))
	}
	req, err := http.NewRequest(method, base+subst.Replace(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case as == "":
		req.SetBasicAuth(user, pw)
	case as != "-":
		u, p, _ := strings.Cut(as, ":")
		req.SetBasicAuth(u, p)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, subst.Replace(v))
	}
	return req
}

func runSteps(t *testing.T, base, user, pw, db string, steps []wireStep) {
	t.Helper()
	kept := []string{"{db}", db}
	for i, st := range steps {
		subst := strings.NewReplacer(kept...)
		req := stepRequest(t, base, user, pw, st.as, st.method, st.path, st.body, st.hdr, subst)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for until := time.Now().Add(st.retry); resp.StatusCode != st.status && time.Now().Before(until) && st.body == ""; {
			time.Sleep(50 * time.Millisecond)
			if resp, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		where := fmt.Sprintf("step %d: %s %s", i, st.method, st.path)
		if st.keep != "" {
			var r struct{ Rev string }
			_ = json.Unmarshal(b, &r)
			kept = append(kept, "{"+st.keep+"}", r.Rev)
		}
		if resp.StatusCode != st.status {
			t.Fatalf("%s: status %d, want %d: %s", where, resp.StatusCode, st.status, clip(b))
		}
		if st.err != "" {
			var e struct{ Error, Reason string }
			if json.Unmarshal(b, &e) != nil || e.Error != st.err || e.Reason != st.reason {
				t.Fatalf("%s: answer %s, want %q/%q", where, clip(b), st.err, st.reason)
			}
		}
		if st.inBody != "" && !bytes.Contains(b, []byte(st.inBody)) {
			t.Fatalf("%s: answer %s, want %s in it", where, clip(b), st.inBody)
		}
		for _, part := range st.inBodyAll {
			if !bytes.Contains(b, []byte(part)) {
				t.Fatalf("%s: answer %s, want %s in it", where, clip(b), part)
			}
		}
		if st.raw != "" && string(b) != st.raw {
			t.Fatalf("%s: body %q, want %q", where, clip(b), st.raw)
		}
		if st.rows != 0 {
			var r struct{ Rows []json.RawMessage }
			if json.Unmarshal(b, &r) != nil || len(r.Rows) != max(st.rows, 0) {
				t.Fatalf("%s: answer %s, want %d rows", where, clip(b), st.rows)
			}
		}
		after := strings.NewReplacer(kept...) // with this step's keep
		for k, v := range st.wantHdr {
			if got := resp.Header.Get(k); got != after.Replace(v) {
				t.Fatalf("%s: %s %q, want %q", where, k, got, v)
			}
		}
	}
}

// DELETE of a doc that is not there or deleted already is CouchDB's 404
// (missing or deleted, whatever the rev), not a conflict; a deleted doc
// is re-created without a rev and refuses one.
func TestDeleteAndDeletedDocs(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/del", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "del", deleteSteps)
}

func TestDeleteAndDeletedDocsAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "del", deleteSteps)
}

// Every answer carries X-Couch-Request-ID: the client's own when it sent
// one, else ten hex digits, new for each request, as CouchDB.
func TestRequestID(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	hex10 := regexp.MustCompile(`^[0-9a-f]{10}$`)
	seen := map[string]bool{}
	for _, tc := range []struct {
		method, path string
		admin        bool
		status       int
	}{
		{"GET", "/", false, 200},
		{"GET", "/_all_dbs", true, 200},
		{"GET", "/no-such-db", true, 404},
		{"GET", "/_all_dbs", false, 401},
		{"PATCH", "/", true, 405},
		{"PUT", "/Bad", true, 400},
	} {
		req := s.NewRequest(t, tc.method, tc.path, nil)
		if tc.admin {
			req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Couch-Request-ID")
		if resp.StatusCode != tc.status || !hex10.MatchString(id) || seen[id] {
			t.Fatalf("%s %s: status %d (want %d), X-Couch-Request-ID %q (ten hex digits, new each time)", tc.method, tc.path, resp.StatusCode, tc.status, id)
		}
		seen[id] = true
	}
	req := s.NewRequest(t, "GET", "/", nil)
	req.Header.Set("X-Couch-Request-ID", "trace-me-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Couch-Request-ID"); got != "trace-me-42" {
		t.Fatalf("X-Couch-Request-ID %q, want the client's own", got)
	}
}

// The welcome lists only the features settee has: a client that sees
// "reshard" there uses it.
func TestWelcomeFeatures(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	var w struct{ Features []string }
	mustCall(t, s, 200, "GET", "/", nil, &w)
	if strings.Join(w.Features, ",") != "partitioned,scheduler" {
		t.Fatalf("features %v, want [partitioned scheduler]", w.Features)
	}
}

// CouchDB's small print that clients and tools rely on (issue 15).
var smallPrintSteps = []wireStep{
	{method: "PUT", path: "/{db}/src", body: `{"a":1}`, status: 201},
	{method: "GET", path: "/{db}/_changes?feed=live&timeout=100", status: 200, inBody: `"last_seq"`},
	// _local docs in _bulk_docs are local docs
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"_local/x","a":1}]}`, status: 201,
		inBody: `"id":"_local/x","rev":"0-1"`},
	{method: "GET", path: "/{db}/_local/x", status: 200, inBody: `"a":1`},
	{method: "PUT", path: "/{db}/_local/", body: `{}`, status: 400, err: "bad_request", reason: "Invalid _local document id."},
	{method: "PUT", path: "/{db}/_local%2F", body: `{}`, status: 400, err: "bad_request", reason: "Invalid _local document id."},
	{method: "COPY", path: "/{db}/src", hdr: map[string]string{"Destination": "http://example.com/x"},
		status: 400, err: "bad_request", reason: "Destination URL must be relative."},
	{method: "PUT", path: "/{db}/s1", body: `{"_attachments":{"a.txt":{"stub":true,"revpos":5}}}`,
		status: 412, err: "missing_stub", reason: "Invalid attachment stub in s1 for a.txt"},
	{method: "PUT", path: "/{db}/b1?batch=ok", body: `{}`, status: 202, inBody: `"ok":true`},
	{method: "PUT", path: "/{db}/src?batch=ok", body: `{}`, status: 202, inBody: `"ok":true`}, // a conflict, untold
	// a POSTed _all_docs body's limit counts; the query string's wins
	{method: "POST", path: "/{db}/_all_docs", body: `{"keys":["src","nope"],"limit":1}`, status: 200, rows: 1},
	{method: "POST", path: "/{db}/_all_docs?limit=2", body: `{"keys":["src","nope","zz"],"limit":1}`, status: 200, rows: 2},
	{method: "POST", path: "/{db}/_all_docs", body: `{"keys":"x"}`, status: 400, err: "bad_request", reason: "`keys` body member must be an array."},
	{method: "PUT", path: "/{db}/at1/%FF%FE", body: "hi", hdr: map[string]string{"Content-Type": "text/plain"},
		status: 400, err: "bad_request", reason: "Attachment name is not UTF-8 encoded"},
	{method: "POST", path: "/{db}/src", hdr: map[string]string{"X-HTTP-Method-Override": "GET"}, status: 200, inBody: `"a":1`},
	{method: "PUT", path: "/{db}/fh", body: `{}`, hdr: map[string]string{"X-Forwarded-Host": "proxy.example:8080"},
		status: 201, wantHdr: map[string]string{"Location": "http://proxy.example:8080/{db}/fh"}},
	// Range on an attachment stored as it is
	{method: "PUT", path: "/{db}/rg/f.bin", body: "abcdefghij", hdr: map[string]string{"Content-Type": "application/octet-stream"}, status: 201},
	{method: "GET", path: "/{db}/rg/f.bin", status: 200, raw: "abcdefghij", wantHdr: map[string]string{"Accept-Ranges": "bytes"}},
	{method: "GET", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "bytes=2-4"}, status: 206, raw: "cde",
		wantHdr: map[string]string{"Content-Range": "bytes 2-4/10", "Accept-Ranges": "bytes", "Content-Length": "3"}},
	{method: "GET", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "bytes=-3"}, status: 206, raw: "hij",
		wantHdr: map[string]string{"Content-Range": "bytes 7-9/10"}},
	{method: "GET", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "bytes=8-"}, status: 206, raw: "ij"},
	{method: "GET", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "bytes=20-30"}, status: 416,
		err: "requested_range_not_satisfiable", reason: "Requested range not satisfiable"},
	{method: "GET", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "garbage"}, status: 200, raw: "abcdefghij"},
	{method: "GET", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "bytes=0-1,5-6"}, status: 206,
		inBody: "Content-Range: bytes 5-6/10"},
	{method: "HEAD", path: "/{db}/rg/f.bin", hdr: map[string]string{"Range": "bytes=2-4"}, status: 206,
		wantHdr: map[string]string{"Content-Range": "bytes 2-4/10"}},
	// not on a text type, stored gzipped
	{method: "PUT", path: "/{db}/tx/t.txt?rev=1-x", body: "hello", hdr: map[string]string{"Content-Type": "text/plain"}, status: 409},
	{method: "PUT", path: "/{db}/tx/t.txt", body: "hello", hdr: map[string]string{"Content-Type": "text/plain"}, status: 201},
	{method: "GET", path: "/{db}/tx/t.txt", hdr: map[string]string{"Range": "bytes=0-1"}, status: 200, raw: "hello",
		wantHdr: map[string]string{"Accept-Ranges": "none"}},
	// found by the differential tester (tools/difftest)
	{method: "PUT", path: "/{db}-q?q=0", status: 400, err: "bad_request", reason: "The `q` value should be a positive integer."},
	{method: "PUT", path: "/{db}-q?q=abc", status: 400, err: "bad_request", reason: "The `q` value should be a positive integer."},
	{method: "PUT", path: "/{db}-q?n=-1", status: 400, err: "bad_request", reason: "The `n` value should be a positive integer."},
	{method: "PUT", path: "/{db}-q?partitioned=maybe", status: 400, err: "bad_request", reason: "Invalid `partitioned` parameter"},
	{method: "GET", path: "/{db}-q", status: 404, err: "not_found", reason: "Database does not exist."},
	{method: "GET", path: "/_no_such_endpoint", status: 404, err: "not_found", reason: "Database does not exist."},
	{method: "DELETE", path: "/_no_such_endpoint", status: 404, err: "not_found", reason: "Database does not exist."},
	{method: "PUT", path: "/_no_such_endpoint", status: 400, inBody: `"error":"illegal_database_name"`},
	{method: "GET", path: "/{db}/_all_docs?group=true", status: 400, err: "query_parse_error", reason: "Invalid use of grouping on a map view."},
	{method: "GET", path: "/{db}/_all_docs?group_level=1", status: 400, err: "query_parse_error", reason: "Invalid use of grouping on a map view."},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&reduce=true", status: 400, err: "query_parse_error", reason: "Reduce is invalid for map-only views."},
	{method: "GET", path: "/{db}/_all_docs?reduce=false&group=false", status: 200},
	{method: "GET", path: "/_scheduler/jobs?limit=abc", status: 400, err: "query_parse_error", reason: "limit must be an integer"},
	{method: "GET", path: "/_scheduler/jobs?skip=-1", status: 400, err: "query_parse_error", reason: "skip not in range of [0,infinity]"},
	{method: "GET", path: "/_scheduler/jobs?limit=1&skip=3", status: 200, inBody: `"offset":0`}, // skip, at most the count
	{method: "GET", path: "/_scheduler/docs?limit=abc", status: 400, err: "query_parse_error", reason: `Invalid value for integer: "abc"`},
	// an empty value is printed as Erlang prints an empty string
	{method: "GET", path: "/{db}/_all_docs?descending=", status: 400, err: "query_parse_error", reason: "Invalid boolean parameter: []"},
	{method: "GET", path: "/{db}/_all_docs?limit=", status: 400, err: "query_parse_error", reason: "Invalid value for integer: []"},
	{method: "GET", path: "/{db}/_local_docs?skip=", status: 400, err: "query_parse_error", reason: "Invalid value for integer: []"},
	// a doc read's options: only "true" counts, anything else is ignored
	{method: "GET", path: "/{db}/src?revs=maybe&conflicts=1&revs_info=false&latest=no", status: 200, raw: `{"_id":"src","_rev":"1-23202479633c2b380f79507a776743d5","a":1}` + "\n"},
}

func TestSmallPrint(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/sp", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "sp", smallPrintSteps)
}

func TestSmallPrintAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "sp", smallPrintSteps)
}
