package kivik_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	kivik "github.com/go-kivik/kivik/v4"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// findScenarios are what a kivik user does with Mango: CreateIndex,
// GetIndexes, Find (selector, fields, sort, limit, skip, bookmark; the
// ResultSet's rows, Bookmark and Warning), Explain and DeleteIndex. They
// run against settee (TestFindSettee) and CouchDB when present
// (TestFindCouchDB), with the same assertions.
var findScenarios = []scenario{
	{"FindIndexes", testFindIndexes},
	{"FindSorted", testFindSorted},
	{"FindBookmark", testFindBookmark},
	{"FindNoIndex", testFindNoIndex},
	{"FindExplain", testFindExplain},
	{"FindIndexAsView", testFindIndexAsView},
}

func runFindScenarios(t *testing.T, e *env) {
	for _, sc := range findScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, e)
		})
	}
}

// TestFindSettee drives settee's _find, _explain and _index through kivik.
func TestFindSettee(t *testing.T) {
	s := testserver.Start(t)
	runFindScenarios(t, newEnv(t, "settee", s.URL, testserver.AdminUser, testserver.AdminPassword))
}

// TestFindCouchDB runs the same scenarios against CouchDB 3.5.2 when one
// is present (skipped otherwise).
func TestFindCouchDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no CouchDB")
	}
	c := testcouch.Start(t, "")
	runFindScenarios(t, newEnv(t, "couchdb", c.URL, c.User, c.Password))
}

// pet is a document of the Find scenarios.
type pet struct {
	ID   string `json:"_id,omitempty"`
	Rev  string `json:"_rev,omitempty"`
	Kind string `json:"kind,omitempty"`
	Legs int    `json:"legs,omitempty"`
	Name string `json:"name,omitempty"`
}

// findDB is a database of 30 pets: p00..p29, legs i%5 (ties in the
// legs index broken by id; the 6 with 0 legs have no legs field, pet's
// omitempty), kind one of three, and a design doc _find never answers.
func findDB(t *testing.T, e *env, prefix string) *kivik.DB {
	t.Helper()
	db := e.newDB(t, prefix)
	kinds := []string{"cat", "bird", "snake"}
	var docs []any
	for i := 0; i < 30; i++ {
		docs = append(docs, pet{ID: fmt.Sprintf("p%02d", i), Kind: kinds[i%3], Legs: i % 5, Name: fmt.Sprintf("n%02d", 29-i)})
	}
	docs = append(docs, map[string]any{"_id": "_design/other", "views": map[string]any{}})
	res, err := db.BulkDocs(ctx(t), docs)
	must(t, "BulkDocs", err)
	for _, r := range res {
		if r.Error != nil {
			t.Fatalf("BulkDocs %s: %v", r.ID, r.Error)
		}
	}
	return db
}

// wantPets lists the pets of findDB that keep returns true for, as "id:legs",
// in the order of less.
func wantPets(keep func(i int) bool, less func(a, b int) int) []string {
	var idx []int
	for i := 0; i < 30; i++ {
		if keep(i) {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, less)
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = fmt.Sprintf("p%02d:%d", i, i%5)
	}
	return out
}

// byLegs orders findDB's pets by legs then id; byLegsDesc the reverse.
func byLegs(a, b int) int {
	if a%5 != b%5 {
		return a%5 - b%5
	}
	return a - b
}
func byLegsDesc(a, b int) int { return byLegs(b, a) }

// findAll runs a query and reads its ResultSet whole: the docs as
// "id:legs", and the metadata's bookmark and warning.
func findAll(t *testing.T, db *kivik.DB, query any, opts ...kivik.Option) (docs []string, bookmark, warning string) {
	t.Helper()
	rs := db.Find(ctx(t), query, opts...)
	defer rs.Close()
	for rs.Next() {
		var p pet
		if err := rs.ScanDoc(&p); err != nil {
			t.Fatalf("Find %v: ScanDoc: %v", query, err)
		}
		if p.Rev != "" || p.Kind != "" {
			t.Errorf("Find %v: %+v, want only the fields asked for", query, p)
		}
		docs = append(docs, fmt.Sprintf("%s:%d", p.ID, p.Legs))
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("Find %v: %v", query, err)
	}
	md, err := rs.Metadata()
	if err != nil {
		t.Fatalf("Find %v: Metadata: %v", query, err)
	}
	return docs, md.Bookmark, md.Warning
}

func sameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func testFindIndexes(t *testing.T, e *env) {
	db := findDB(t, e, "findidx")
	must(t, "CreateIndex by-legs", db.CreateIndex(ctx(t), "pets", "by-legs", map[string]any{"fields": []string{"legs"}}))
	// again: it exists, no error
	must(t, "CreateIndex by-legs again", db.CreateIndex(ctx(t), "pets", "by-legs", map[string]any{"fields": []string{"legs"}}))
	// ddoc and name made up by the server; the index as JSON text
	must(t, "CreateIndex kind,legs", db.CreateIndex(ctx(t), "", "", `{"fields":[{"kind":"desc"},{"legs":"desc"}]}`))
	// a partial index
	must(t, "CreateIndex partial", db.CreateIndex(ctx(t), "_design/cats", "cat-names",
		map[string]any{"fields": []string{"name"}, "partial_filter_selector": map[string]any{"kind": "cat"}}))

	idx, err := db.GetIndexes(ctx(t))
	must(t, "GetIndexes", err)
	var got []string
	for _, ix := range idx {
		ddoc := ix.DesignDoc
		if strings.HasPrefix(ddoc, "_design/") && len(ddoc) == len("_design/")+40 {
			ddoc = "_design/<hash>" // checked below
			if ix.Name != strings.TrimPrefix(ix.DesignDoc, "_design/") {
				t.Errorf("GetIndexes: made-up index %s in %s: want the name its ddoc's", ix.Name, ix.DesignDoc)
			}
		}
		got = append(got, fmt.Sprintf("%s %s %s %s", ddoc, ix.Type, ix.Name, canon(t, ix.Definition)))
	}
	wantIdx := []string{
		` special _all_docs {"fields":[{"_id":"asc"}]}`,
		`_design/<hash> json ` + madeUp(idx) + ` {"fields":[{"kind":"desc"},{"legs":"desc"}]}`,
		`_design/cats json cat-names {"fields":[{"name":"asc"}],"partial_filter_selector":{"kind":{"$eq":"cat"}}}`,
		`_design/pets json by-legs {"fields":[{"legs":"asc"}]}`,
	}
	sameList(t, "GetIndexes", got, wantIdx)

	// the same made-up name on both servers: CouchDB's hash of the definition
	if got := madeUp(idx); got != "535664d757fb62d69d739a6ada78255cfbcc7e64" {
		t.Errorf("GetIndexes: the made-up name %s", got)
	}
	// an index is a design doc of language "query"
	var dd map[string]any
	must(t, "Get _design/pets", db.Get(ctx(t), "_design/pets").ScanDoc(&dd))
	if dd["language"] != "query" {
		t.Errorf("_design/pets: language %v, want query", dd["language"])
	}

	must(t, "DeleteIndex by-legs", db.DeleteIndex(ctx(t), "pets", "by-legs"))
	wantStatus(t, "DeleteIndex by-legs again", db.DeleteIndex(ctx(t), "pets", "by-legs"), http.StatusNotFound, "")
	wantStatus(t, "DeleteIndex of a missing index", db.DeleteIndex(ctx(t), "cats", "nope"), http.StatusNotFound, "")
	// the full "_design/..." id works too
	must(t, "DeleteIndex _design/cats", db.DeleteIndex(ctx(t), "_design/cats", "cat-names"))
	// CouchDB's GET _index reads a design doc cache that may still hold a
	// deleted index for a moment (it listed _design/cats once in CI):
	// asked again for up to 5 s; settee answers at once
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		idx, err = db.GetIndexes(ctx(t))
		must(t, "GetIndexes after DeleteIndex", err)
		ok := len(idx) == 2 && idx[0].Name == "_all_docs" && idx[1].Name == madeUp(idx)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("GetIndexes after DeleteIndex: %+v, want _all_docs and the made-up one", idx)
			break
		}
	}
	wantStatus(t, "Get _design/pets after DeleteIndex", db.Get(ctx(t), "_design/pets").Err(), http.StatusNotFound, "deleted")

	// bad index definitions
	wantStatus(t, "CreateIndex without fields", answered(func() error { return db.CreateIndex(ctx(t), "", "", map[string]any{}) }),
		http.StatusBadRequest, "Missing required key: fields")
	nodb := e.admin.DB(e.dbName("nodb"))
	wantStatus(t, "CreateIndex in a missing db", answered(func() error {
		return nodb.CreateIndex(ctx(t), "", "", map[string]any{"fields": []string{"a"}})
	}), http.StatusNotFound, "Database does not exist.")
}

// madeUp is the name of the one index with a made-up (40 hex) name.
func madeUp(idx []kivik.Index) string {
	for _, ix := range idx {
		if len(ix.Name) == 40 {
			return ix.Name
		}
	}
	return "<none>"
}

func testFindSorted(t *testing.T, e *env) {
	db := findDB(t, e, "findsort")
	must(t, "CreateIndex", db.CreateIndex(ctx(t), "pets", "by-legs", map[string]any{"fields": []string{"legs"}}))

	legsGT1 := func(i int) bool { return i%5 > 1 }
	q := map[string]any{
		"selector": map[string]any{"legs": map[string]any{"$gt": 1}},
		"fields":   []string{"_id", "legs"},
		"sort":     []any{map[string]string{"legs": "asc"}},
	}
	docs, bm, warn := findAll(t, db, q)
	sameList(t, "Find legs>1 sorted asc (the default limit, 25)", docs, wantPets(legsGT1, byLegs))
	if bm == "" || bm == "nil" || warn != "" {
		t.Errorf("Find legs>1: bookmark %q warning %q, want a bookmark and no warning", bm, warn)
	}

	q["sort"] = []any{map[string]string{"legs": "desc"}}
	docs, _, _ = findAll(t, db, q)
	sameList(t, "Find legs>1 sorted desc", docs, wantPets(legsGT1, byLegsDesc))

	// limit and skip as options (merged into the query) and in the query
	all := wantPets(legsGT1, byLegsDesc)
	docs, _, _ = findAll(t, db, q, kivik.Param("limit", 4), kivik.Param("skip", 3))
	sameList(t, "Find desc skip 3 limit 4 (options)", docs, all[3:7])
	q["limit"], q["skip"] = 5, 16
	docs, _, _ = findAll(t, db, q)
	sameList(t, "Find desc skip 16 limit 5 (in the query)", docs, all[16:])
	delete(q, "limit")
	delete(q, "skip")

	// a selector on more than the index: the rest matched on the docs
	docs, _, _ = findAll(t, db, `{"selector":{"legs":{"$gte":3},"kind":"cat"},"fields":["_id","legs"],"sort":["legs"]}`)
	sameList(t, "Find legs>=3 cats sorted", docs, wantPets(func(i int) bool { return i%5 >= 3 && i%3 == 0 }, byLegs))

	// no index for the sort
	wantStatus(t, "Find sorted on a field with no index", findErr(t, db, `{"selector":{"name":{"$gt":null}},"sort":["name"]}`), http.StatusBadRequest, "No index exists for this sort, try indexing by the sort fields.")
	// bad queries
	wantStatus(t, "Find with a bad operator", findErr(t, db, `{"selector":{"legs":{"$foo":1}}}`), http.StatusBadRequest, "Invalid operator: $foo")
	wantStatus(t, "Find in a missing db", findErr(t, e.admin.DB(e.dbName("nodb")), `{"selector":{}}`), http.StatusNotFound, "Database does not exist.")
}

func testFindBookmark(t *testing.T, e *env) {
	db := findDB(t, e, "findbm")
	must(t, "CreateIndex", db.CreateIndex(ctx(t), "pets", "by-legs", map[string]any{"fields": []string{"legs"}}))
	for _, dir := range []string{"asc", "desc"} {
		less := byLegs
		if dir == "desc" {
			less = byLegsDesc
		}
		want := wantPets(func(i int) bool { return i%5 >= 1 }, less)
		var paged []string
		bm := ""
		for page := 0; ; page++ {
			q := map[string]any{
				"selector": map[string]any{"legs": map[string]any{"$gte": 1}},
				"fields":   []string{"_id", "legs"},
				"sort":     []any{map[string]string{"legs": dir}},
				"limit":    7,
			}
			var opts []kivik.Option
			if bm != "" {
				opts = append(opts, kivik.Param("bookmark", bm))
			}
			docs, next, _ := findAll(t, db, q, opts...)
			if len(docs) > 7 {
				t.Fatalf("%s page %d: %d docs, limit 7", dir, page, len(docs))
			}
			if len(docs) == 0 {
				if bm != "" && next != bm {
					t.Errorf("%s: the empty page's bookmark %q, want the one sent", dir, next)
				}
				break
			}
			if page > 10 {
				t.Fatalf("%s: paging does not end", dir)
			}
			if next == "" || next == bm {
				t.Fatalf("%s page %d: bookmark %q after %q", dir, page, next, bm)
			}
			paged = append(paged, docs...)
			bm = next
		}
		sameList(t, "Find paged by 7 with Bookmark(), "+dir, paged, want)
	}
	// a bookmark not made by the server
	wantStatus(t, "Find with a bad bookmark", findErr(t, db, `{"selector":{"legs":1},"bookmark":"not-a-bookmark"}`), http.StatusBadRequest, `Invalid bookmark value: "not-a-bookmark"`)
}

func testFindNoIndex(t *testing.T, e *env) {
	db := findDB(t, e, "findnoidx")
	// no index: _all_docs, in id order, with CouchDB's warning
	want := wantPets(func(i int) bool { return i%3 == 1 }, func(a, b int) int { return a - b })
	docs, bm, warn := findAll(t, db, map[string]any{"selector": map[string]any{"kind": "bird"}, "fields": []string{"_id", "legs"}})
	sameList(t, "Find birds (no index)", docs, want)
	if warn != "No matching index found, create an index to optimize query time." || bm == "" {
		t.Errorf("Find birds: warning %q bookmark %q", warn, bm)
	}
	// paged by bookmark on _all_docs
	var paged []string
	bm = ""
	for page := 0; page < 10; page++ {
		q := map[string]any{"selector": map[string]any{"kind": "bird"}, "fields": []string{"_id", "legs"}, "limit": 4}
		if bm != "" {
			q["bookmark"] = bm
		}
		docs, next, _ := findAll(t, db, q)
		if len(docs) == 0 {
			break
		}
		paged = append(paged, docs...)
		bm = next
	}
	sameList(t, "Find birds paged by 4 (no index)", paged, want)
	// nothing matches: the bookmark is "nil"
	docs, bm, _ = findAll(t, db, `{"selector":{"kind":"fish"}}`)
	if len(docs) != 0 || bm != "nil" {
		t.Errorf("Find fish: %v bookmark %q, want none and \"nil\"", docs, bm)
	}
}

func testFindExplain(t *testing.T, e *env) {
	db := findDB(t, e, "findexplain")
	must(t, "CreateIndex", db.CreateIndex(ctx(t), "pets", "by-legs", map[string]any{"fields": []string{"legs"}}))
	q := map[string]any{
		"selector": map[string]any{"legs": map[string]any{"$gt": 1}},
		"fields":   []string{"_id", "legs"},
		"sort":     []any{map[string]string{"legs": "desc"}},
		"limit":    5,
		"skip":     2,
	}
	plan, err := db.Explain(ctx(t), q)
	must(t, "Explain", err)
	if plan.DBName != db.Name() || plan.Limit != 5 || plan.Skip != 2 {
		t.Errorf("Explain: dbname %q limit %d skip %d, want %s 5 2", plan.DBName, plan.Limit, plan.Skip, db.Name())
	}
	if got := canon(t, plan.Index); got != `{"ddoc":"_design/pets","def":{"fields":[{"legs":"asc"}]},"name":"by-legs","partitioned":false,"type":"json"}` {
		t.Errorf("Explain: index %s", got)
	}
	if got := canon(t, plan.Selector); got != `{"legs":{"$gt":1}}` {
		t.Errorf("Explain: selector %s", got)
	}
	if got := canon(t, plan.Fields); got != `["_id","legs"]` {
		t.Errorf("Explain: fields %s", got)
	}
	if plan.Options["sort"] == nil || canon(t, plan.Options["sort"]) != `{"legs":"desc"}` || plan.Options["limit"] != float64(5) {
		t.Errorf("Explain: opts %s", canon(t, plan.Options))
	}
	// a query no json index serves: _all_docs
	plan, err = db.Explain(ctx(t), `{"selector":{"kind":"cat"}}`)
	must(t, "Explain without an index", err)
	if plan.Index["name"] != "_all_docs" || plan.Index["type"] != "special" || plan.Limit != 25 {
		t.Errorf("Explain without an index: index %s limit %d", canon(t, plan.Index), plan.Limit)
	}
	_, err = db.Explain(ctx(t), `{"selector":{"name":{"$gt":null}},"sort":["name"]}`)
	// CouchDB plans it without an index (index null), it only fails to run
	must(t, "Explain a sort no index serves", err)
}

// findErr is the error of a Find that fails (see answered: CouchDB may
// close the connection while kivik still sends the body).
func findErr(t *testing.T, db *kivik.DB, query string) error {
	t.Helper()
	return answered(func() error {
		rs := db.Find(ctx(t), query)
		defer rs.Close()
		rs.Next()
		return rs.Err()
	})
}

// canon is v as JSON with sorted keys.
func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	return string(b)
}

// testFindIndexAsView: a json index is a view of its design doc, and
// CouchDB answers it through _view like any other: reduced, the _count
// of its rows; unreduced, a row per doc that has the fields, key the
// array of their values, value null.
func testFindIndexAsView(t *testing.T, e *env) {
	db := findDB(t, e, "findview")
	must(t, "CreateIndex", db.CreateIndex(ctx(t), "pets", "by-legs", map[string]any{"fields": []string{"legs"}}))
	rs := db.Query(ctx(t), "_design/pets", "by-legs", kivik.Param("reduce", false), kivik.Param("limit", 4), kivik.Param("descending", true))
	var got []string
	for rs.Next() {
		id, _ := rs.ID()
		var key []int
		if err := rs.ScanKey(&key); err != nil {
			t.Fatalf("Query by-legs: ScanKey: %v", err)
		}
		var v any
		if err := rs.ScanValue(&v); err != nil || v != nil {
			t.Errorf("Query by-legs: value %v %v, want null", v, err)
		}
		got = append(got, fmt.Sprintf("%s:%v", id, key))
	}
	must(t, "Query by-legs", rs.Err())
	sameList(t, "Query by-legs reduce=false descending limit 4", got, []string{"p29:[4]", "p24:[4]", "p19:[4]", "p14:[4]"})
	rs = db.Query(ctx(t), "_design/pets", "by-legs")
	var n int
	if !rs.Next() || rs.ScanValue(&n) != nil || n != 24 {
		t.Errorf("Query by-legs reduced: %d %v, want the _count 24", n, rs.Err())
	}
	_ = rs.Close()
}
