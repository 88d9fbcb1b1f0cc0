package crashtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKillDuringCompaction edits a database many times, kills settee with
// SIGKILL while it compacts (twice, at different points), and checks after
// each restart that every doc reads at its latest revision with its
// history, then that a compaction run again completes and drops the old
// bodies.
func TestKillDuringCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real settee process; skipped in -short mode")
	}
	s := newServer(t)
	s.start()
	c := newClient(s.baseURL())
	defer c.close()
	const db, docs, rounds = "compactcrash", 150, 30
	c.mustJSON(t, http.MethodPut, "/"+db, nil, 201, nil)
	latest := map[string]string{}
	first := map[string]string{}
	pad := strings.Repeat("y", 2000)
	for r := 0; r <= rounds; r++ {
		var b strings.Builder
		b.WriteString(`{"docs":[`)
		for i := range docs {
			id := fmt.Sprintf("d%03d", i)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"_id":%q,"round":%d,"pad":%q`, id, r, pad)
			if rev := latest[id]; rev != "" {
				fmt.Fprintf(&b, `,"_rev":%q`, rev)
			}
			b.WriteByte('}')
		}
		b.WriteString("]}")
		var res []struct {
			ID, Rev, Error string
		}
		c.mustJSON(t, http.MethodPost, "/"+db+"/_bulk_docs", []byte(b.String()), 201, &res)
		for _, x := range res {
			if x.Error != "" {
				t.Fatalf("round %d: %s: %s", r, x.ID, x.Error)
			}
			latest[x.ID] = x.Rev
			if r == 0 {
				first[x.ID] = x.Rev
			}
		}
	}

	check := func(label string) {
		t.Helper()
		for id, rev := range latest {
			var doc struct {
				Rev       string `json:"_rev"`
				Round     int    `json:"round"`
				Revisions struct {
					Start int      `json:"start"`
					IDs   []string `json:"ids"`
				} `json:"_revisions"`
			}
			c.mustJSON(t, http.MethodGet, "/"+db+"/"+id+"?revs=true", nil, 200, &doc)
			if doc.Rev != rev || doc.Round != rounds || doc.Revisions.Start != rounds+1 || len(doc.Revisions.IDs) != rounds+1 {
				t.Fatalf("%s: %s is %s round %d with %d revs, want %s round %d with %d", label, id, doc.Rev, doc.Round,
					len(doc.Revisions.IDs), rev, rounds, rounds+1)
			}
		}
		var info struct {
			DocCount int `json:"doc_count"`
		}
		c.mustJSON(t, http.MethodGet, "/"+db, nil, 200, &info)
		if info.DocCount != docs {
			t.Fatalf("%s: doc_count %d, want %d", label, info.DocCount, docs)
		}
	}
	running := func() bool {
		var info struct {
			CompactRunning bool `json:"compact_running"`
		}
		c.mustJSON(t, http.MethodGet, "/"+db, nil, 200, &info)
		return info.CompactRunning
	}

	// kill right after the request, then once the walk has made progress
	for cycle, wait := range []func(){
		func() { time.Sleep(20 * time.Millisecond) },
		func() {
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				var tasks []map[string]any
				c.mustJSON(t, http.MethodGet, "/_active_tasks", nil, 200, &tasks)
				for _, tk := range tasks {
					if tk["type"] == "database_compaction" {
						if n, _ := tk["changes_done"].(float64); n > 0 {
							return
						}
					}
				}
				if !running() {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		},
	} {
		c.mustJSON(t, http.MethodPost, "/"+db+"/_compact", []byte("{}"), 202, nil)
		wait()
		s.kill()
		s.start()
		check(fmt.Sprintf("after kill #%d", cycle+1))
	}

	c.mustJSON(t, http.MethodPost, "/"+db+"/_compact", []byte("{}"), 202, nil)
	deadline := time.Now().Add(60 * time.Second)
	for running() {
		if time.Now().After(deadline) {
			t.Fatal("compaction still running after 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	check("after compaction")
	st, b, err := c.do(http.MethodGet, "/"+db+"/d007?rev="+first["d007"], nil)
	var e map[string]string
	_ = json.Unmarshal(b, &e)
	if err != nil || st != 404 || e["error"] != "not_found" {
		t.Fatalf("old rev after compaction: %d %s %v", st, b, err)
	}
}
