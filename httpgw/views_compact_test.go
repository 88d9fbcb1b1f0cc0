//go:build !race

// Compaction runs badger's value-log GC, which races inside badger (see
// compact_test.go): these tests run without -race (the Makefile's second
// httpgw run).

package httpgw_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/storage"
)

type viewInfoT struct {
	ViewIndex struct {
		Sizes          struct{ Active, External, File int64 }
		CompactRunning bool `json:"compact_running"`
	} `json:"view_index"`
}

// A view whose rows are rewritten as its docs change leaves the old rows
// behind in the store; POST /db/_compact/{ddoc} gives their space back
// (a view_compaction task meanwhile), and the view answers as before.
// The database's own sizes count the index's bytes.
func TestViewCompaction(t *testing.T) {
	s := testserver.Start(t, smallVlog)
	mustCall(t, s, 201, "PUT", "/vc?q=2", nil, nil)
	// rows ten times their docs: the index's garbage is what there is
	ddoc := `{"views":{"big":{"map":"function (doc) { emit([doc.round, doc._id], Array(11).join(doc.pad)); }"}}}`
	mustCall(t, s, 201, "PUT", "/vc/_design/c", ddoc, nil)

	before := dbInfo(t, s, "vc")
	latest := map[string]string{}
	pad := strings.Repeat("y", 400)
	for round := range 12 {
		docs := make([]map[string]any, 100)
		for i := range docs {
			id := fmt.Sprintf("d%03d", i)
			docs[i] = map[string]any{"_id": id, "round": round, "pad": pad}
			if rev := latest[id]; rev != "" {
				docs[i]["_rev"] = rev
			}
		}
		var res []struct{ ID, Rev string }
		body, _ := json.Marshal(map[string]any{"docs": docs})
		mustCall(t, s, 201, "POST", "/vc/_bulk_docs", body, &res)
		for _, r := range res {
			latest[r.ID] = r.Rev
		}
		// the view is rebuilt after each round: each round's rows
		// replace the last round's
		var v struct {
			TotalRows int `json:"total_rows"`
		}
		mustCall(t, s, 200, "GET", "/vc/_design/c/_view/big?limit=1", nil, &v)
		if v.TotalRows != 100 {
			t.Fatalf("round %d: total_rows %d", round, v.TotalRows)
		}
	}

	var vi viewInfoT
	mustCall(t, s, 200, "GET", "/vc/_design/c/_info", nil, &vi)
	after := dbInfo(t, s, "vc")
	// 100 rows of some 4 KB values: in _info, and in the db's sizes
	if vi.ViewIndex.Sizes.Active < 100*4000 {
		t.Fatalf("_info sizes %+v, want 100 rows of 4 KB", vi.ViewIndex.Sizes)
	}
	if got := after.Sizes.Active - before.Sizes.Active; got < vi.ViewIndex.Sizes.Active {
		t.Errorf("db sizes.active grew by %d with the index, want at least its %d bytes", got, vi.ViewIndex.Sizes.Active)
	}
	if after.Sizes.File < vi.ViewIndex.Sizes.File {
		t.Errorf("db sizes.file %d, less than its index's %d", after.Sizes.File, vi.ViewIndex.Sizes.File)
	}

	// the index's old rows are 11 rounds of 400 KB: the data dir holds them
	disk := storage.AllocatedBytes(s.DataDir)
	mustCall(t, s, 202, "POST", "/vc/_compact/c", "{}", nil)
	seen := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ts []map[string]any
		mustCall(t, s, 200, "GET", "/_active_tasks", nil, &ts)
		running := false
		for _, tk := range ts {
			if tk["type"] == "view_compaction" && tk["design_document"] == "_design/c" {
				seen, running = true, true
				if db, _ := tk["database"].(string); !strings.HasPrefix(db, "shards/") || !strings.HasSuffix(db, "/vc") {
					t.Errorf("view_compaction task database %q", db)
				}
			}
		}
		mustCall(t, s, 200, "GET", "/vc/_design/c/_info", nil, &vi)
		if !running && !vi.ViewIndex.CompactRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("view compaction still running after 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := storage.AllocatedBytes(s.DataDir)
	t.Logf("data dir %d -> %d bytes (view_compaction task seen: %v)", disk, got, seen)
	if got*2 > disk {
		t.Errorf("data dir %d bytes after the view's compaction, want under half of %d", got, disk)
	}

	// the same answers, and a view that keeps building
	var v struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			Key []any `json:"key"`
		} `json:"rows"`
	}
	mustCall(t, s, 200, "GET", "/vc/_design/c/_view/big?limit=2", nil, &v)
	if v.TotalRows != 100 || len(v.Rows) != 2 || v.Rows[0].Key[0] != float64(11) {
		t.Fatalf("view after compaction: %+v", v)
	}
	mustCall(t, s, 201, "PUT", "/vc/new", `{"round":0,"pad":"z"}`, nil)
	mustCall(t, s, 200, "GET", "/vc/_design/c/_view/big?limit=1", nil, &v)
	if v.TotalRows != 101 || v.Rows[0].Key[0] != float64(0) {
		t.Fatalf("view after a write after compaction: %+v", v)
	}

	// bad input as CouchDB: a design doc that does not exist
	mustCall(t, s, 404, "POST", "/vc/_compact/nope", "{}", nil)
}
