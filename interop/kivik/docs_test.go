package kivik_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	kivik "github.com/go-kivik/kivik/v4"
)

// animal is a document as a kivik user declares it.
type animal struct {
	ID      string `json:"_id,omitempty"`
	Rev     string `json:"_rev,omitempty"`
	Deleted bool   `json:"_deleted,omitempty"`
	Kind    string `json:"kind"`
	Legs    int    `json:"legs"`
}

func testDocuments(t *testing.T, e *env) {
	db := e.newDB(t, "docs")

	rev1, err := db.Put(ctx(t), "cat", animal{Kind: "cat", Legs: 4})
	must(t, "Put cat", err)
	if revGen(t, rev1) != 1 {
		t.Errorf("Put cat: rev %s, want generation 1", rev1)
	}

	var got animal
	must(t, "Get cat", db.Get(ctx(t), "cat").ScanDoc(&got))
	if want := (animal{ID: "cat", Rev: rev1, Kind: "cat", Legs: 4}); got != want {
		t.Errorf("Get cat = %+v, want %+v", got, want)
	}
	doc := db.Get(ctx(t), "cat")
	if r, err := doc.Rev(); err != nil || r != rev1 {
		t.Errorf("Get cat .Rev() = %q %v, want %s", r, err, rev1)
	}
	_ = doc.Close()

	// update through the struct's _rev
	got.Legs = 3
	rev2, err := db.Put(ctx(t), "cat", got)
	must(t, "Put cat with _rev", err)
	if revGen(t, rev2) != 2 {
		t.Errorf("update: rev %s, want generation 2", rev2)
	}
	if r, err := db.GetRev(ctx(t), "cat"); err != nil || r != rev2 {
		t.Errorf("GetRev cat = %q %v, want %s", r, err, rev2)
	}

	// POST: a generated id
	id, rev, err := db.CreateDoc(ctx(t), map[string]any{"kind": "dog", "legs": 4})
	must(t, "CreateDoc", err)
	if id == "" || revGen(t, rev) != 1 {
		t.Errorf("CreateDoc = %q %q, want an id and a first rev", id, rev)
	}
	// POST with _id in the body
	id2, _, err := db.CreateDoc(ctx(t), animal{ID: "bird", Kind: "bird", Legs: 2})
	must(t, "CreateDoc with _id", err)
	if id2 != "bird" {
		t.Errorf("CreateDoc with _id bird: id %q", id2)
	}

	// the errors a kivik user sees
	_, errStale := db.Put(ctx(t), "cat", animal{Rev: rev1, Kind: "cat"})
	_, errNoRev := db.Put(ctx(t), "cat", animal{Kind: "cat"})
	_, _, errCreate := db.CreateDoc(ctx(t), animal{ID: "bird", Kind: "bird"})
	_, errDelStale := db.Delete(ctx(t), "cat", rev1)
	_, errDelMissing := db.Delete(ctx(t), "nobody", rev1)
	_, errGetRevMissing := db.GetRev(ctx(t), "nobody")
	for _, tc := range []struct {
		what   string
		err    error
		status int
		reason string
	}{
		{"Put with a stale rev", errStale, http.StatusConflict, "Document update conflict."},
		{"Put over a doc without rev", errNoRev, http.StatusConflict, "Document update conflict."},
		{"CreateDoc of an existing id", errCreate, http.StatusConflict, "Document update conflict."},
		{"Delete with a stale rev", errDelStale, http.StatusConflict, "Document update conflict."},
		{"Delete missing", errDelMissing, http.StatusNotFound, "missing"},
		{"Get missing", db.Get(ctx(t), "nobody").Err(), http.StatusNotFound, "missing"},
		{"GetRev missing", errGetRevMissing, http.StatusNotFound, ""},
		{"Get of a missing rev", db.Get(ctx(t), "cat", kivik.Rev("1-00000000000000000000000000000000")).Err(), http.StatusNotFound, "missing"},
		{"Get in a missing db", e.admin.DB(e.dbName("nodb")).Get(ctx(t), "x").Err(), http.StatusNotFound, "Database does not exist."},
	} {
		wantStatus(t, tc.what, tc.err, tc.status, tc.reason)
	}

	// delete, then what a reader sees
	rev3, err := db.Delete(ctx(t), "cat", rev2)
	must(t, "Delete cat", err)
	if revGen(t, rev3) != 3 {
		t.Errorf("Delete: rev %s, want generation 3", rev3)
	}
	wantStatus(t, "Get deleted", db.Get(ctx(t), "cat").Err(), http.StatusNotFound, "deleted")
	var tomb animal
	must(t, "Get deleted at its rev", db.Get(ctx(t), "cat", kivik.Rev(rev3)).ScanDoc(&tomb))
	if !tomb.Deleted || tomb.Rev != rev3 || tomb.Kind != "" {
		t.Errorf("Get deleted at its rev = %+v, want the tombstone", tomb)
	}
	var old animal
	must(t, "Get old rev", db.Get(ctx(t), "cat", kivik.Rev(rev1)).ScanDoc(&old))
	if old.Legs != 4 || old.Rev != rev1 {
		t.Errorf("Get at rev 1 = %+v, want 4 legs", old)
	}
	_, err = db.Delete(ctx(t), "cat", rev3)
	wantStatus(t, "Delete deleted", err, http.StatusNotFound, "deleted")

	// re-create a deleted doc without a rev
	rev4, err := db.Put(ctx(t), "cat", animal{Kind: "cat", Legs: 4})
	must(t, "Put over a tombstone", err)
	if revGen(t, rev4) != 4 {
		t.Errorf("re-create: rev %s, want generation 4", rev4)
	}

	// ids that need escaping
	for _, id := range []string{"with space", "slash/in/id", "ünï©ødé", "plus+sign", "q?uery#frag"} {
		r, err := db.Put(ctx(t), id, map[string]string{"id": id})
		must(t, "Put "+id, err)
		var m map[string]any
		must(t, "Get "+id, db.Get(ctx(t), id).ScanDoc(&m))
		if m["_id"] != id || m["_rev"] != r || m["id"] != id {
			t.Errorf("Get %q = %v", id, m)
		}
	}

	st, err := db.Stats(ctx(t))
	must(t, "Stats", err)
	if st.DocCount != 3+5 {
		t.Errorf("doc count %d, want 8", st.DocCount)
	}
}

// conflicted makes doc id with two leaves: 2-<own> (through the normal
// path) and a sibling written with new_edits=false. It returns both.
func conflicted(t *testing.T, db *kivik.DB, id string) (winner, loser string) {
	t.Helper()
	rev1, err := db.Put(ctx(t), id, map[string]any{"v": 1})
	must(t, "Put", err)
	rev2, err := db.Put(ctx(t), id, map[string]any{"_rev": rev1, "v": 2})
	must(t, "Put 2", err)
	hash1 := strings.SplitN(rev1, "-", 2)[1]
	sib := "2-00000000000000000000000000000001" // sorts below any other 2- hash
	_, err = db.BulkDocs(ctx(t), []any{map[string]any{
		"_id": id, "_rev": sib, "v": "sibling",
		"_revisions": map[string]any{"start": 2, "ids": []string{strings.SplitN(sib, "-", 2)[1], hash1}},
	}}, kivik.Param("new_edits", false))
	must(t, "BulkDocs new_edits=false", err)
	return rev2, sib
}

func testGetOptions(t *testing.T, e *env) {
	db := e.newDB(t, "getopts")
	winner, loser := conflicted(t, db, "c")
	rev1, err := db.Put(ctx(t), "plain", map[string]any{"v": 1})
	must(t, "Put plain", err)
	rev2, err := db.Put(ctx(t), "plain", map[string]any{"_rev": rev1, "v": 2})
	must(t, "Put plain 2", err)

	var withConflicts struct {
		Rev       string   `json:"_rev"`
		V         any      `json:"v"`
		Conflicts []string `json:"_conflicts"`
	}
	must(t, "Get conflicts=true", db.Get(ctx(t), "c", kivik.Param("conflicts", true)).ScanDoc(&withConflicts))
	if withConflicts.Rev != winner || !slices.Equal(withConflicts.Conflicts, []string{loser}) {
		t.Errorf("Get conflicts=true = %+v, want winner %s, conflicts [%s]", withConflicts, winner, loser)
	}
	var noConflicts map[string]any
	must(t, "Get", db.Get(ctx(t), "c").ScanDoc(&noConflicts))
	if _, ok := noConflicts["_conflicts"]; ok {
		t.Errorf("Get without conflicts=true has _conflicts: %v", noConflicts)
	}

	var withRevs struct {
		Revisions struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		} `json:"_revisions"`
	}
	must(t, "Get revs=true", db.Get(ctx(t), "plain", kivik.Param("revs", true)).ScanDoc(&withRevs))
	wantIDs := []string{strings.SplitN(rev2, "-", 2)[1], strings.SplitN(rev1, "-", 2)[1]}
	if withRevs.Revisions.Start != 2 || !slices.Equal(withRevs.Revisions.IDs, wantIDs) {
		t.Errorf("Get revs=true _revisions = %+v, want start 2 ids %v", withRevs.Revisions, wantIDs)
	}

	var withRevsInfo struct {
		RevsInfo []struct {
			Rev    string `json:"rev"`
			Status string `json:"status"`
		} `json:"_revs_info"`
	}
	must(t, "Get revs_info=true", db.Get(ctx(t), "plain", kivik.Param("revs_info", true)).ScanDoc(&withRevsInfo))
	if len(withRevsInfo.RevsInfo) != 2 || withRevsInfo.RevsInfo[0].Rev != rev2 || withRevsInfo.RevsInfo[0].Status != "available" || withRevsInfo.RevsInfo[1].Rev != rev1 {
		t.Errorf("Get revs_info=true _revs_info = %+v, want [%s available, %s …]", withRevsInfo.RevsInfo, rev2, rev1)
	}

	var deletedConflicts struct {
		DeletedConflicts []string `json:"_deleted_conflicts"`
	}
	_, err = db.Delete(ctx(t), "c", loser)
	must(t, "Delete the losing leaf", err)
	must(t, "Get deleted_conflicts=true", db.Get(ctx(t), "c", kivik.Param("deleted_conflicts", true)).ScanDoc(&deletedConflicts))
	if len(deletedConflicts.DeletedConflicts) != 1 || revGen(t, deletedConflicts.DeletedConflicts[0]) != 3 {
		t.Errorf("Get deleted_conflicts=true = %+v, want one 3- rev", deletedConflicts)
	}

	var meta map[string]json.RawMessage
	must(t, "Get meta=true", db.Get(ctx(t), "c", kivik.Param("meta", true)).ScanDoc(&meta))
	for _, k := range []string{"_revs_info", "_deleted_conflicts"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("Get meta=true lacks %s: %s", k, meta)
		}
	}
}

func testOpenRevs(t *testing.T, e *env) {
	db := e.newDB(t, "openrevs")
	winner, loser := conflicted(t, db, "c")

	// kivik sends open_revs as a JSON list (["all"] is a bad rev on
	// CouchDB too), so a kivik user names the leaves
	rs := db.OpenRevs(ctx(t), "c", []string{winner, loser})
	got := map[string]any{}
	for rs.Next() {
		rev, err := rs.Rev()
		must(t, "OpenRevs row Rev", err)
		var doc map[string]any
		must(t, "OpenRevs row ScanDoc", rs.ScanDoc(&doc))
		got[rev] = doc["v"]
	}
	must(t, "OpenRevs both leaves", rs.Err())
	if len(got) != 2 || got[winner] != float64(2) || got[loser] != "sibling" {
		t.Errorf("OpenRevs both leaves = %v, want %s: 2 and %s: sibling", got, winner, loser)
	}

	rs = db.OpenRevs(ctx(t), "c", []string{loser}, kivik.Param("revs", true))
	n := 0
	for rs.Next() {
		n++
		var doc struct {
			Rev       string `json:"_rev"`
			Revisions struct {
				Start int `json:"start"`
			} `json:"_revisions"`
		}
		must(t, "ScanDoc", rs.ScanDoc(&doc))
		if doc.Rev != loser || doc.Revisions.Start != 2 {
			t.Errorf("OpenRevs [%s] revs=true = %+v", loser, doc)
		}
	}
	must(t, "OpenRevs one", rs.Err())
	if n != 1 {
		t.Errorf("OpenRevs [%s]: %d rows, want 1", loser, n)
	}

	// a rev the doc does not have, or a doc that does not exist: CouchDB
	// answers 200 with a "missing" row, which kivik reports as the row's
	// error
	wantStatus(t, "OpenRevs of a missing rev", openRevsErr(db, t, "c", "9-00000000000000000000000000000009"), http.StatusNotFound, "")
	wantStatus(t, "OpenRevs of a missing doc", openRevsErr(db, t, "nobody", winner), http.StatusNotFound, "")
}

// openRevsErr is the first error a kivik user meets reading open_revs=[rev].
func openRevsErr(db *kivik.DB, t *testing.T, id, rev string) error {
	rs := db.OpenRevs(ctx(t), id, []string{rev})
	defer rs.Close()
	for rs.Next() {
		var doc map[string]any
		if err := rs.ScanDoc(&doc); err != nil {
			return err
		}
	}
	return rs.Err()
}

func testCopy(t *testing.T, e *env) {
	db := e.newDB(t, "copy")
	src1, err := db.Put(ctx(t), "src", animal{Kind: "ant", Legs: 6})
	must(t, "Put src", err)
	src2, err := db.Put(ctx(t), "src", animal{Rev: src1, Kind: "ant", Legs: 5})
	must(t, "Put src 2", err)

	rev, err := db.Copy(ctx(t), "dst", "src")
	must(t, "Copy", err)
	var dst animal
	must(t, "Get dst", db.Get(ctx(t), "dst").ScanDoc(&dst))
	if dst.Rev != rev || dst.Kind != "ant" || dst.Legs != 5 || revGen(t, rev) != 1 {
		t.Errorf("copy = %+v (rev %s), want the ant with 5 legs at 1-", dst, rev)
	}

	// copy an old rev of the source
	_, err = db.Copy(ctx(t), "dst-old", "src", kivik.Rev(src1))
	must(t, "Copy rev 1", err)
	must(t, "Get dst-old", db.Get(ctx(t), "dst-old").ScanDoc(&dst))
	if dst.Legs != 6 {
		t.Errorf("copy of rev 1 = %+v, want 6 legs", dst)
	}

	// onto an existing doc: the target's rev goes in the Destination
	_, err = db.Copy(ctx(t), "dst", "src")
	wantStatus(t, "Copy onto an existing doc without its rev", err, http.StatusConflict, "Document update conflict.")
	rev2, err := db.Copy(ctx(t), "dst?rev="+rev, "src")
	must(t, "Copy onto dst at its rev", err)
	if revGen(t, rev2) != 2 {
		t.Errorf("Copy onto dst: rev %s, want 2-", rev2)
	}

	_, err = db.Copy(ctx(t), "x", "nobody")
	wantStatus(t, "Copy a missing doc", err, http.StatusNotFound, "missing")
	_ = src2
}
