package replicator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
	"github.com/settee/settee/replicator"
)

// The id of a replication with a design doc's filter hashes the filter
// function's source as the source database has it (CouchDB's v4 ids): the
// same function resumes from the checkpoint, an edited one is a new
// replication that starts from the beginning, and a filter the source
// lacks is CouchDB's filter_fetch_error.

const (
	evenFilter = `function (doc, req) { return doc.type === 'even'; }`
	smallNs    = `function (doc, req) { return doc.n < 5; }`
)

// localIDs are the ids of a database's _local docs (the checkpoints).
func localIDs(t *testing.T, s *testserver.Server, db string) []string {
	t.Helper()
	var ids []string
	for _, r := range must(t, s, "GET", "/"+db+"/_local_docs", nil, 200)["rows"].([]any) {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	return ids
}

// setFilter writes _design/f of src with filters.pick = src.
func setFilter(t *testing.T, s *testserver.Server, db, code string) {
	t.Helper()
	doc := map[string]any{"filters": map[string]any{"pick": code}}
	if st, d := call(t, s, "GET", "/"+db+"/_design/f", nil); st == 200 {
		doc["_rev"] = d["_rev"]
	}
	must(t, s, "PUT", "/"+db+"/_design/f", doc, 201)
}

func TestFilterIDFollowsFilterSource(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	for _, tc := range []struct{ name, src, tgt string }{
		{"local", `"src_local"`, "tgt_local"},
		{"http", "", "tgt_http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "src_" + tc.name
			must(t, a, "PUT", "/"+db, nil, 201)
			loadDocs(t, a, db, 0, 20, "")
			setFilter(t, a, db, evenFilter)
			src := `"` + dbURL(a, db) + `"`
			if tc.name == "local" {
				src = `"` + db + `"`
			}
			body := fmt.Sprintf(`{"source":%s,"target":%q,"create_target":true,"filter":"f/pick"}`, src, tc.tgt)

			first := must(t, a, "POST", "/_replicate", body, 200)
			if n := ndocs(t, a, tc.tgt); n != 10 {
				t.Fatalf("the even filter copied %d docs", n)
			}
			ck1 := localIDs(t, a, db)
			if len(ck1) != 1 {
				t.Fatalf("checkpoints %v", ck1)
			}
			// the same function: the same id, resumed at its checkpoint
			again := must(t, a, "POST", "/_replicate", body, 200)
			if again["no_changes"] != true || fmt.Sprint(localIDs(t, a, db)) != fmt.Sprint(ck1) {
				t.Fatalf("the same filter again: %v, checkpoints %v (were %v)", again, localIDs(t, a, db), ck1)
			}
			// an edited function: a new id, from the beginning
			setFilter(t, a, db, smallNs)
			edited := must(t, a, "POST", "/_replicate", body, 200)
			h := history0(t, edited)
			if fmt.Sprint(h["start_last_seq"]) != "0" || h["docs_written"] != 2.0 {
				t.Fatalf("the edited filter's run: %v", h)
			}
			if ids := localIDs(t, a, db); len(ids) != 2 {
				t.Fatalf("checkpoints after the edit %v", ids)
			}
			if n := ndocs(t, a, tc.tgt); n != 12 {
				t.Fatalf("the target has %d docs after the edit", n)
			}
			if edited["session_id"] == first["session_id"] {
				t.Fatal("the edited filter's run has the first session")
			}
			// the first function back: its id again, resumed where its
			// checkpoint left it (the design doc edits since then are
			// the only changes, and it passes none)
			setFilter(t, a, db, "  "+evenFilter+" ")
			back := must(t, a, "POST", "/_replicate", body, 200)
			h = history0(t, back)
			// (its counters go on from the first run's: CouchDB's count
			// every session)
			if fmt.Sprint(h["start_last_seq"]) == "0" || h["docs_written"] != history0(t, first)["docs_written"] {
				t.Fatalf("the first filter back did not resume: %v", h)
			}
			if ids := localIDs(t, a, db); len(ids) != 2 {
				t.Fatalf("checkpoints after going back %v", ids)
			}
		})
	}
}

// A filter the source cannot give: 404 not_found with CouchDB's reasons
// for POST /_replicate, the same on settee (TestFilterFetchErrors) and on
// CouchDB 3.5.2 (TestFilterFetchErrorsAsCouchDB).
func runFilterFetchErrors(t *testing.T, base, user, pw string, local bool) {
	do := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.SetBasicAuth(user, pw)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// a CouchDB just started has once answered its admin 401 here (its
	// auth not ready yet, under CI load): asked again for up to 30 s
	st, _ := do("PUT", "/fsrc", nil)
	for deadline := time.Now().Add(30 * time.Second); st == http.StatusUnauthorized && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		st, _ = do("PUT", "/fsrc", nil)
	}
	if st != 201 {
		t.Fatalf("PUT /fsrc: %d", st)
	}
	if st, _ := do("PUT", "/fsrc/_design/f", map[string]any{"filters": map[string]any{"pick": evenFilter}}); st != 201 {
		t.Fatalf("PUT the design doc: %d", st)
	}
	u, _ := url.Parse(base)
	u.User = url.UserPassword(user, pw)
	src := func(db string) string { return u.String() + "/" + db }
	cases := []struct{ src, filter, reason string }{
		{src("fsrc"), "nope/pick", "Couldn't open document `_design/nope` from source database `" + base + "/fsrc/`: {error,<<\"not_found\">>}"},
		{src("fsrc"), "f/nope", "Couldn't parse filter code from document f on `" + base + "/fsrc/`  Error: {not_found,<<\"missing json key: nope\">>}"},
		{src("nosrc"), "f/pick", "Could not open source database `" + base + "/nosrc/`: {db_not_found,<<\"" + base + "/nosrc/\">>}"},
	}
	if local {
		// CouchDB names a local source by its URL; settee by its name
		cases = append(cases, struct{ src, filter, reason string }{"fsrc", "nope/pick", "Couldn't open document `_design/nope` from source database `fsrc`: {error,<<\"not_found\">>}"})
	}
	for _, tc := range cases {
		st, out := do("POST", "/_replicate", map[string]any{"source": tc.src, "target": src("ftgt"), "create_target": true, "filter": tc.filter})
		if st != 404 || out["error"] != "not_found" || out["reason"] != tc.reason {
			t.Errorf("%s %s: %d %v\nwant reason %s", tc.src, tc.filter, st, out, tc.reason)
		}
	}
	if st, _ := do("GET", "/ftgt", nil); st != 404 {
		t.Errorf("a replication without its filter created its target (%d)", st)
	}
	// a _replicator doc: state error, no id, the reason as info.error
	if st, out := do("PUT", "/_replicator/fe", map[string]any{"source": src("fsrc"), "target": src("ftgt"), "create_target": true, "filter": "nope/pick"}); st != 201 {
		t.Fatalf("PUT the _replicator doc: %d %v", st, out)
	}
	var d map[string]any
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, d = do("GET", "/_scheduler/docs/_replicator/fe", nil); d["state"] == "error" {
			break
		}
	}
	info, _ := d["info"].(map[string]any)
	if n, _ := d["error_count"].(float64); d["state"] != "error" || d["id"] != nil || info["error"] != cases[0].reason || n < 1 {
		t.Errorf("the _replicator doc: %v\nwant state error, error %s", d, cases[0].reason)
	}
}

func TestFilterFetchErrors(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	runFilterFetchErrors(t, a.URL, testserver.AdminUser, testserver.AdminPassword, true)
}

func TestFilterFetchErrorsAsCouchDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	cs := testcouch.Start(t, "")
	runFilterFetchErrors(t, cs.URL, cs.User, cs.Password, false)
}

// A _replicator doc whose filter is missing is in state "error" (no id),
// tried again with the crash backoff until the filter is there; one whose
// filter is edited while it runs gets the new function's id.
func TestFilterReplicatorDoc(t *testing.T) {
	defer replicator.SetFilterRecheck(200 * time.Millisecond)()
	a := testserver.Start(t, func(c *node.Config) { c.ReplicatorRetryBase = 100 * time.Millisecond })
	must(t, a, "PUT", "/rsrc", nil, 201)
	loadDocs(t, a, "rsrc", 0, 20, "")
	must(t, a, "PUT", "/_replicator/fr", map[string]any{"source": "rsrc", "target": "rtgt", "create_target": true,
		"continuous": true, "filter": "f/pick", "checkpoint_interval": 200}, 201)
	var d map[string]any
	waitFor(t, 10*time.Second, "the error state", func() bool { d = schedDoc(t, a, "fr"); return d["state"] == "error" })
	info, _ := d["info"].(map[string]any)
	want := "Couldn't open document `_design/f` from source database `rsrc`: {error,<<\"not_found\">>}"
	if d["id"] != nil || info["error"] != want || d["error_count"] == 0.0 {
		t.Fatalf("scheduler doc %v\nwant error %s", d, want)
	}

	setFilter(t, a, "rsrc", evenFilter)
	waitFor(t, 10*time.Second, "the even docs", func() bool { return ndocs(t, a, "rtgt") == 10 })
	id1, _ := schedDoc(t, a, "fr")["id"].(string)
	if id1 == "" {
		t.Fatalf("no id once running: %v", schedDoc(t, a, "fr"))
	}

	setFilter(t, a, "rsrc", smallNs)
	var id2 string
	waitFor(t, 10*time.Second, "a new id", func() bool {
		id2, _ = schedDoc(t, a, "fr")["id"].(string)
		return id2 != "" && id2 != id1
	})
	// the new id's job started from the beginning: d001 and d003 pass
	// the new function
	waitFor(t, 10*time.Second, "the small docs", func() bool { return ndocs(t, a, "rtgt") == 12 })
	waitFor(t, 10*time.Second, "a checkpoint of each id", func() bool { return len(localIDs(t, a, "rsrc")) == 2 })
}

// TestFilterCodeInID: the id takes the filter's source and query_params,
// not its name; without a source read (FilterCode "") the name stands in.
func TestFilterCodeInID(t *testing.T) {
	id := func(filter, code, rest string) string {
		t.Helper()
		r, err := replicator.ParseRep([]byte(`{"source":"http://h/a","target":"b","filter":"` + filter + `"` + rest + `}`))
		if err != nil {
			t.Fatal(err)
		}
		r.FilterCode = code
		return r.BaseID("uuid")
	}
	base := id("f/x", evenFilter, "")
	if id("g/y", evenFilter, "") != base {
		t.Error("the same function under another name has another id")
	}
	if id("f/x", smallNs, "") == base {
		t.Error("an edited function keeps the id")
	}
	if id("f/x", evenFilter, `,"query_params":{"m":1}`) == base {
		t.Error("query_params are not in the id")
	}
	if id("f/x", "", "") == id("g/x", "", "") {
		t.Error("without the source, two filters share an id")
	}
}
