package kivik_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	kivik "github.com/go-kivik/kivik/v4"
)

func testMaintenance(t *testing.T, e *env) {
	db := e.newDB(t, "maint")
	rev1, err := db.Put(ctx(t), "a", map[string]any{"v": 1})
	must(t, "Put a", err)
	rev2, err := db.Put(ctx(t), "a", map[string]any{"_rev": rev1, "v": 2})
	must(t, "Put a 2", err)
	revDel, err := db.Put(ctx(t), "gone", map[string]any{"v": 1})
	must(t, "Put gone", err)
	revDel, err = db.Delete(ctx(t), "gone", revDel)
	must(t, "Delete gone", err)

	must(t, "Flush", db.Flush(ctx(t)))

	// revs_diff: what a replicator asks
	rs := db.RevsDiff(ctx(t), map[string][]string{
		"a":    {rev2, "3-00000000000000000000000000000003"},
		"none": {"1-00000000000000000000000000000001"},
	})
	diffs := map[string]kivik.RevDiff{}
	for rs.Next() {
		id, err := rs.ID()
		must(t, "RevsDiff ID", err)
		var d kivik.RevDiff
		must(t, "RevsDiff ScanValue", rs.ScanValue(&d))
		diffs[id] = d
	}
	must(t, "RevsDiff", rs.Err())
	if len(diffs) != 2 || !slices.Equal(diffs["a"].Missing, []string{"3-00000000000000000000000000000003"}) ||
		!slices.Equal(diffs["a"].PossibleAncestors, []string{rev2}) ||
		!slices.Equal(diffs["none"].Missing, []string{"1-00000000000000000000000000000001"}) {
		t.Errorf("RevsDiff = %+v", diffs)
	}

	// purge: the doc is gone, its tombstone too
	res, err := db.Purge(ctx(t), map[string][]string{"gone": {revDel}})
	must(t, "Purge", err)
	if !slices.Equal(res.Purged["gone"], []string{revDel}) {
		t.Errorf("Purge = %+v, want gone: [%s]", res, revDel)
	}
	wantStatus(t, "Get a purged doc", db.Get(ctx(t), "gone", kivik.Rev(revDel)).Err(), 404, "missing")
	st, err := db.Stats(ctx(t))
	must(t, "Stats", err)
	if st.DocCount != 1 || st.DeletedCount != 0 {
		t.Errorf("Stats after purge: %d docs %d deleted, want 1 and 0", st.DocCount, st.DeletedCount)
	}
}

// testCompact compacts while the other scenarios create, write and destroy
// their databases, as a busy server does.
func testCompact(t *testing.T, e *env) {
	db := e.newDB(t, "compact")
	rev1, err := db.Put(ctx(t), "a", map[string]any{"v": 1})
	must(t, "Put a", err)
	rev2, err := db.Put(ctx(t), "a", map[string]any{"_rev": rev1, "v": 2})
	must(t, "Put a 2", err)
	must(t, "Compact", db.Compact(ctx(t)))
	eventually(t, 30*time.Second, "compaction ends", func() error {
		st, err := db.Stats(ctx(t))
		if err != nil {
			return err
		}
		if st.CompactRunning {
			return fmt.Errorf("compact_running")
		}
		return nil
	})
	if r, err := db.GetRev(ctx(t), "a"); err != nil || r != rev2 {
		t.Errorf("GetRev a after compaction = %q %v, want %s", r, err, rev2)
	}
	st, err := db.Stats(ctx(t))
	must(t, "Stats", err)
	if st.DocCount != 1 {
		t.Errorf("doc count after compaction %d, want 1", st.DocCount)
	}
}

// testNotImplemented is what a kivik user reaches for that settee does not
// have (docs/api.md, "Not implemented"); the steps run on CouchDB.
func testNotImplemented(t *testing.T, e *env) {
	t.Run("DBUpdates", func(t *testing.T) {
		name := e.dbName("updates")
		must(t, "CreateDB", e.admin.CreateDB(ctx(t), name))
		t.Cleanup(func() { _ = e.admin.DestroyDB(ctx(t), name) })
		eventually(t, 30*time.Second, "the create shows in _db_updates", func() error {
			u := e.admin.DBUpdates(ctx(t), kivik.Param("feed", "normal"), kivik.Param("since", "")) // kivik defaults to since=now
			defer u.Close()
			for u.Next() {
				if u.DBName() == name && (u.Type() == "created" || u.Type() == "updated") {
					return nil
				}
			}
			if err := u.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%s not seen", name)
		})
	})
	t.Run("Find", func(t *testing.T) {
		e.skipSettee(t, `settee: POST /db/_find {"selector":{"kind":"cat"}} (kivik's Find) answers 400 {"error":"illegal_docid","reason":"Only reserved document ids may start with underscore."}; CouchDB 3.5.2 answers 200 {"docs":[…],"bookmark":…,"warning":"No matching index found…"} (Mango not implemented, docs/api.md)`)
		db := e.newDB(t, "find")
		for i, kind := range []string{"cat", "dog", "cat"} {
			_, err := db.Put(ctx(t), fmt.Sprintf("pet-%d", i), animal{Kind: kind, Legs: 4})
			must(t, "Put", err)
		}
		rs := db.Find(ctx(t), map[string]any{"selector": map[string]any{"kind": "cat"}})
		var got []string
		for rs.Next() {
			var a animal
			must(t, "Find ScanDoc", rs.ScanDoc(&a))
			got = append(got, a.ID)
		}
		must(t, "Find", rs.Err())
		slices.Sort(got)
		if !slices.Equal(got, []string{"pet-0", "pet-2"}) {
			t.Errorf("Find kind=cat = %v", got)
		}
	})
}
