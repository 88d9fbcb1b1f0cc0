package replicator_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// clearAll lifts every fault of a proxy.
func (p *proxy) clearAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.hit, p.more = nil, 0, nil
}

// loadMixed gives src what a replication must carry exactly: plain docs, a
// conflict (two leaves), a deleted doc and a doc with an attachment.
func loadMixed(t *testing.T, s *testserver.Server) {
	t.Helper()
	must(t, s, "PUT", "/src", nil, 201)
	loadDocs(t, s, "src", 0, 30, "")
	must(t, s, "POST", "/src/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"d001","_rev":"1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","x":1}]}`, 201)
	d2 := must(t, s, "GET", "/src/d002", nil, 200)
	must(t, s, "DELETE", "/src/d002?rev="+d2["_rev"].(string), nil, 200)
	must(t, s, "PUT", "/src/att", `{"_attachments":{"hello.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ="}}}`, 201)
}

// TestBulkGetFallback: a source without _bulk_get (CouchDB before 2.3,
// which answers 405, or a server that answers 404 for the unknown path)
// is read with one GET ?open_revs=[rev]&revs=true&latest=true per missing
// rev, and the copy is the same: conflicts, deletions, attachments.
func TestBulkGetFallback(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		code int
		body string
	}{
		{"405", 405, `{"error":"method_not_allowed","reason":"Only GET,HEAD allowed"}`},
		{"404 not about the db", 404, `{"error":"not_found","reason":"missing"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b := testserver.Start(t), testserver.Start(t)
			loadMixed(t, a)
			pa := newProxy(t, a)
			pa.set(&fault{kind: status, match: "POST _bulk_get", code: c.code, body: c.body})
			res := must(t, b, "POST", "/_replicate", map[string]any{"source": pa.dbURL("src"), "target": "tgt", "create_target": true}, 200)
			h := history0(t, res)
			// 30 docs, d001's second leaf, d002's tombstone replacing its
			// first rev, the attachment doc
			if h["missing_found"].(float64) != 32 || h["docs_written"].(float64) != 32 || h["doc_write_failures"].(float64) != 0 {
				t.Fatalf("history %v", h)
			}
			sameLeaves(t, a, "src", b, "tgt")
			d1 := must(t, b, "GET", "/tgt/d001?conflicts=true", nil, 200)
			if c, _ := d1["_conflicts"].([]any); len(c) != 1 {
				t.Fatalf("conflict lost: %v", d1)
			}
			must(t, b, "GET", "/tgt/d002", nil, 404)
			if got := attBytes(t, b, "/tgt/att/hello.txt"); string(got) != "hello world" {
				t.Fatalf("attachment %q", got)
			}
			// _bulk_get was tried once; then one GET per missing rev, as
			// CouchDB's replicator asks it
			if n := pa.count("POST _bulk_get"); n != 1 {
				t.Fatalf("%d _bulk_get requests, want 1", n)
			}
			// (and one GET of the text attachment's stored bytes)
			var gets []seenReq
			for _, g := range pa.requests("GET doc") {
				if g.query.Has("open_revs") {
					gets = append(gets, g)
				}
			}
			if len(gets) != 32 {
				t.Fatalf("%d open_revs GETs, want 32", len(gets))
			}
			for _, g := range gets {
				q := g.query
				if !strings.HasPrefix(q.Get("open_revs"), `["`) || q.Get("revs") != "true" || q.Get("latest") != "true" {
					t.Fatalf("open_revs request %v", q)
				}
			}
			// the one-shot job reads _changes as a normal feed of every leaf
			for _, c := range pa.requests("GET _changes") {
				if c.query.Get("style") != "all_docs" || c.query.Get("feed") != "normal" {
					t.Fatalf("_changes request %v", c.query)
				}
			}
		})
	}
}

// TestOpenRevsMissingDB: in the open_revs fallback, a 404 saying the
// database does not exist is an error, not a missing rev to skip: the job
// crashes without writing or checkpointing anything, and completes once
// the source answers.
func TestOpenRevsMissingDB(t *testing.T) {
	t.Parallel()
	fp := newFaultPair(t, 20)
	fp.pa.set(&fault{kind: status, match: "POST _bulk_get", code: 405, body: `{"error":"method_not_allowed","reason":"Only GET,HEAD allowed"}`})
	fp.pa.also(&fault{kind: status, match: "GET doc", code: 404, body: `{"error":"not_found","reason":"Database does not exist."}`})
	must(t, fp.b, "PUT", "/_replicator/gone", fp.repDoc(nil), 201)
	crashing(t, fp.b, "gone", "Database does not exist.", 2)
	if n := ndocs(t, fp.b, "tgt"); n > 0 {
		t.Fatalf("%d docs written", n)
	}
	if ck := checkpoint(t, fp.b, "tgt"); ck != nil {
		t.Fatalf("a checkpoint past docs never written: %v", ck)
	}
	fp.pa.clearAll()
	st := completed(t, fp.b, "gone")
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
	if st["docs_written"].(float64) != 20 {
		t.Fatalf("stats %v", st)
	}
}

// TestEndpointObject: source and target given as {"url", "headers",
// "auth": {"basic": {...}}}: every request carries the endpoint's own
// headers and credentials, and the password shows nowhere.
func TestEndpointObject(t *testing.T) {
	t.Parallel()
	fp := newFaultPair(t, 25)
	auth := map[string]any{"basic": map[string]any{"username": testserver.AdminUser, "password": testserver.AdminPassword}}
	rep := map[string]any{
		"source":        map[string]any{"url": fp.pa.URL + "/src", "headers": map[string]string{"X-Rep-Test": "src-only"}, "auth": auth},
		"target":        map[string]any{"url": fp.pb.URL + "/tgt", "auth": auth},
		"create_target": true,
	}
	res := must(t, fp.b, "POST", "/_replicate", rep, 200)
	if h := history0(t, res); h["docs_written"].(float64) != 25 {
		t.Fatalf("history %v", h)
	}
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(testserver.AdminUser+":"+testserver.AdminPassword))
	for _, r := range fp.pa.requests("*") {
		if r.header.Get("Authorization") != basic || r.header.Get("X-Rep-Test") != "src-only" {
			t.Fatalf("source request %s: headers %v", r.key, r.header)
		}
	}
	for _, r := range fp.pb.requests("*") {
		if r.header.Get("Authorization") != basic || r.header.Get("X-Rep-Test") != "" {
			t.Fatalf("target request %s: headers %v", r.key, r.header)
		}
	}

	// as a _replicator doc: it completes, and its state shows the user,
	// not the password
	loadDocs(t, fp.a, "src", 25, 5, "")
	must(t, fp.b, "PUT", "/_replicator/obj", rep, 201)
	completed(t, fp.b, "obj")
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
	d := schedDoc(t, fp.b, "obj")
	if d["source"] != "http://"+testserver.AdminUser+":xxxxx@"+strings.TrimPrefix(fp.pa.URL, "http://")+"/src/" ||
		strings.Contains(fmt.Sprint(d), testserver.AdminPassword) {
		t.Fatalf("scheduler doc %v", d)
	}
}

// TestBatchBytes: the batcher writes _bulk_docs at 4 MB even when the
// batch has fewer docs than worker_batch_size, so a batch of big docs is
// never held whole.
func TestBatchBytes(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	pb := newProxy(t, b)
	must(t, a, "PUT", "/src", nil, 201)
	pad := strings.Repeat("x", 300<<10)
	for i := range 30 {
		must(t, a, "PUT", fmt.Sprintf("/src/big%02d", i), `{"pad":"`+pad+`"}`, 201)
	}
	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("tgt"), "create_target": true,
		"worker_processes": 1, "worker_batch_size": 500}, 200)
	sameLeaves(t, a, "src", b, "tgt")
	writes := pb.requests("POST _bulk_docs")
	if len(writes) < 3 {
		t.Fatalf("%d _bulk_docs for 9 MB of docs, want at least 3 of at most 4 MB", len(writes))
	}
	for _, w := range writes {
		// 4 MB, plus the doc that crossed it
		if w.size > 4<<20+400<<10 {
			t.Fatalf("a _bulk_docs of %d bytes", w.size)
		}
	}
}

// TestOneWritePerBatch: a worker asks _revs_diff once per batch and its
// batcher writes once per batch (at worker_batch_size, or on the round's
// one flush), never a request per doc.
func TestOneWritePerBatch(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	pb := newProxy(t, b)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 50, "")
	res := must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("tgt"), "create_target": true,
		"worker_processes": 1, "worker_batch_size": 10}, 200)
	if h := history0(t, res); h["docs_written"] != 50.0 {
		t.Fatalf("history %v", h)
	}
	// seq_interval as fabric answers it: the feed's first row carries a
	// seq too (its countdown from 10^15 is a multiple of 10 there), so the
	// batches are 1, 10, 10, 10, 10, 9 docs
	if d, w := pb.count("POST _revs_diff"), pb.count("POST _bulk_docs"); d != 6 || w != 6 {
		t.Fatalf("%d _revs_diff and %d _bulk_docs for 6 batches of at most 10", d, w)
	}
	// a batch smaller than worker_batch_size (3 new docs, 2 new conflict
	// revs): one write, at the round's flush
	loadDocs(t, a, "src", 50, 3, "")
	must(t, a, "POST", "/src/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"d000","_rev":"1-cccccccccccccccccccccccccccccccc"},`+
		`{"_id":"d001","_rev":"1-dddddddddddddddddddddddddddddddd"}]}`, 201)
	before := pb.count("POST _bulk_docs")
	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("tgt"),
		"worker_processes": 1, "worker_batch_size": 10}, 200)
	if n := pb.count("POST _bulk_docs") - before; n != 1 {
		t.Fatalf("%d _bulk_docs for one batch", n)
	}
	sameLeaves(t, a, "src", b, "tgt")
}

// TestFiltersOverHTTP: doc_ids and selector with an HTTP source, one-shot
// and continuous: doc_ids go to the source as POST
// _changes?filter=_doc_ids (normal feed, then longpolls), the selector is
// matched on the fetched revs; only matching docs arrive, later ones too.
func TestFiltersOverHTTP(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	pa := newProxy(t, a)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "")

	ids := []string{"d003", "d007", "d100"} // d100 comes later
	res := must(t, b, "POST", "/_replicate", map[string]any{"source": pa.dbURL("src"), "target": "ids", "create_target": true,
		"doc_ids": ids}, 200)
	if got := leaves(t, b, "ids"); len(got) != 2 || got["d003"] == "" || got["d007"] == "" {
		t.Fatalf("doc_ids copied %v (%v)", got, res)
	}
	if n := pa.count("GET _changes"); n != 0 {
		t.Fatalf("%d unfiltered _changes requests", n)
	}
	for _, r := range pa.requests("POST _changes") {
		if r.query.Get("filter") != "_doc_ids" || r.query.Get("style") != "all_docs" {
			t.Fatalf("_changes request %v", r.query)
		}
	}

	sel := map[string]any{"type": "even", "n": map[string]any{"$lt": 10}}
	must(t, b, "POST", "/_replicate", map[string]any{"source": pa.dbURL("src"), "target": "sel", "create_target": true, "selector": sel}, 200)
	if got := leaves(t, b, "sel"); len(got) != 5 || got["d008"] == "" || got["d010"] != "" || got["d001"] != "" {
		t.Fatalf("selector copied %v", got)
	}

	// continuous: new and changed docs that pass the filter arrive, others do not
	for _, c := range []struct {
		target string
		filter map[string]any
	}{{"ids", map[string]any{"doc_ids": ids}}, {"sel", map[string]any{"selector": sel}}} {
		rep := map[string]any{"source": pa.dbURL("src"), "target": c.target, "continuous": true}
		for k, v := range c.filter {
			rep[k] = v
		}
		must(t, b, "POST", "/_replicate", rep, 202)
		t.Cleanup(func() {
			rep["cancel"] = true
			call(t, b, "POST", "/_replicate", rep)
		})
	}
	must(t, a, "PUT", "/src/d100", `{"type":"even","n":4}`, 201)
	must(t, a, "PUT", "/src/d101", `{"type":"even","n":4}`, 201)
	d3 := must(t, a, "GET", "/src/d003", nil, 200)
	d3["n"] = 2
	d3["type"] = "even"
	must(t, a, "PUT", "/src/d003", d3, 201)
	waitFor(t, 10*time.Second, "filtered changes", func() bool {
		i, s := leaves(t, b, "ids"), leaves(t, b, "sel")
		return len(i) == 3 && i["d100"] != "" && strings.HasPrefix(i["d003"], "2-") &&
			len(s) == 8 && s["d100"] != "" && s["d101"] != "" && strings.HasPrefix(s["d003"], "2-")
	})
	if got := leaves(t, b, "ids"); got["d101"] != "" {
		t.Fatalf("doc_ids let d101 through: %v", got)
	}
	longpolls := 0
	for _, r := range pa.requests("POST _changes") {
		if r.query.Get("feed") == "longpoll" && r.query.Get("filter") == "_doc_ids" {
			longpolls++
		}
	}
	if longpolls == 0 {
		t.Fatal("the continuous doc_ids job never long-polled with its filter")
	}
}
