package replicator_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// TestSelectorFilteredAtSource: a replication with a selector from an HTTP
// source asks it for POST _changes?filter=_selector with the selector in
// the body, as CouchDB's replicator does, so the source sends only the
// matching changes: the job diffs and fetches those alone
// (missing_checked, docs_read), one-shot and in a continuous job's
// longpolls.
func TestSelectorFilteredAtSource(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	pa := newProxy(t, a)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "") // 10 even, 10 odd

	sel := map[string]any{"type": "even"}
	res := must(t, b, "POST", "/_replicate", map[string]any{"source": pa.dbURL("src"), "target": "even", "create_target": true, "selector": sel}, 200)
	h := history0(t, res)
	if h["missing_checked"] != 10.0 || h["docs_read"] != 10.0 || h["docs_written"] != 10.0 {
		t.Fatalf("history %v: the source should send the 10 matching changes only", h)
	}
	if got := leaves(t, b, "even"); len(got) != 10 || got["d000"] == "" || got["d001"] != "" {
		t.Fatalf("copied %v", got)
	}
	if n := pa.count("GET _changes"); n != 0 {
		t.Fatalf("%d unfiltered _changes requests", n)
	}
	posts := pa.requests("POST _changes")
	if len(posts) == 0 {
		t.Fatal("no POST _changes")
	}
	for _, r := range posts {
		var body struct{ Selector map[string]any }
		if r.query.Get("filter") != "_selector" || r.query.Get("style") != "all_docs" ||
			json.Unmarshal(r.body, &body) != nil || body.Selector["type"] != "even" {
			t.Fatalf("_changes request %v %s", r.query, r.body)
		}
	}

	// continuous: the longpolls carry the filter; only a matching doc
	// comes through
	rep := map[string]any{"source": pa.dbURL("src"), "target": "even", "continuous": true, "selector": sel}
	must(t, b, "POST", "/_replicate", rep, 202)
	t.Cleanup(func() {
		rep["cancel"] = true
		call(t, b, "POST", "/_replicate", rep)
	})
	must(t, a, "PUT", "/src/late-odd", `{"type":"odd"}`, 201)
	must(t, a, "PUT", "/src/late-even", `{"type":"even"}`, 201)
	waitFor(t, 10*time.Second, "late-even", func() bool { return leaves(t, b, "even")["late-even"] != "" })
	if got := leaves(t, b, "even"); got["late-odd"] != "" || len(got) != 11 {
		t.Fatalf("continuous copied %v", got)
	}
	longpolls := 0
	for _, r := range pa.requests("POST _changes") {
		if r.query.Get("filter") != "_selector" {
			t.Fatalf("_changes request %v", r.query)
		}
		if r.query.Get("feed") == "longpoll" {
			longpolls++
		}
	}
	if longpolls == 0 || pa.count("GET _changes") != 0 {
		t.Fatalf("%d filtered longpolls, %d unfiltered _changes", longpolls, pa.count("GET _changes"))
	}
}

// TestSelectorSourceRefusesFilter: a source that answers filter=_selector
// with a 400 or a 404 (an older server) is asked again unfiltered, once:
// the endpoint remembers it, and the worker's match of the fetched revs
// filters alone, with the same result.
func TestSelectorSourceRefusesFilter(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "")
	for _, c := range []struct {
		name string
		code int
		body string
	}{
		// CouchDB 1.x's answer to a filter name without a slash
		{"400", 400, `{"error":"bad_request","reason":"` + "`filter` must be of the form `designname/filtername`" + `"}`},
		{"404", 404, `{"error":"not_found","reason":"missing"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			pa := newProxy(t, a)
			pa.set(&fault{kind: status, match: "POST _changes", code: c.code, body: c.body})
			target := "odd" + c.name
			res := must(t, b, "POST", "/_replicate", map[string]any{"source": pa.dbURL("src"), "target": target, "create_target": true,
				"selector": map[string]any{"type": "odd"}}, 200)
			if got := leaves(t, b, target); len(got) != 10 || got["d001"] == "" || got["d000"] != "" {
				t.Fatalf("copied %v (%v)", got, res)
			}
			// every change was diffed, the worker matched the fetched revs
			if h := history0(t, res); h["missing_checked"] != 20.0 || h["docs_written"] != 10.0 {
				t.Fatalf("history %v", h)
			}
			if n := pa.count("POST _changes"); n != 1 {
				t.Fatalf("%d filtered _changes requests, want 1 (then remembered)", n)
			}
			for _, r := range pa.requests("GET _changes") {
				if r.query.Get("filter") != "" {
					t.Fatalf("unfiltered request %v", r.query)
				}
			}
			if pa.count("GET _changes") == 0 {
				t.Fatal("no unfiltered _changes after the refusal")
			}
		})
	}
}
