// Package couchrepl_test proves settee against Apache CouchDB 3.5.2's own
// replicator and CouchDB against settee's: each pulls from and pushes to
// the other, one-shot through _replicate and continuous through the
// _replicator database, with a corpus of docs, edits, conflicts,
// deletions and attachments (helpers_test.go), filtered by doc_ids, by a
// selector and by a JavaScript filter, and incrementally. After each run
// both sides hold the same docs, revisions, conflicts and attachment
// bytes, the checkpoint is on both ends in CouchDB's format, and the
// history's counters add up across sessions as CouchDB's do. The tests
// skip, with a message, where ../shared/couchdb is absent.
package couchrepl_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// docs is the corpus's plain doc count.
const docs = 2000

func start(t *testing.T) (settee, couch server) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	cs := testcouch.Start(t, "")
	return setteeServer(testserver.Start(t)), couchServer(cs)
}

// replicate runs a one-shot replication through on's _replicate and
// checks its answer.
func replicate(t *testing.T, on server, body map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var st int
	var out []byte
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		st, out = on.do(t, "POST", "/_replicate", "application/json", b)
		// a CouchDB cluster node learns of a database made through
		// another a little after the others do (its _dbs copy): its
		// replicator answers 401 "unauthorized to access or create
		// database" meanwhile, and nothing was replicated
		if st != http.StatusUnauthorized || !bytes.Contains(out, []byte("unauthorized to access or create database")) || time.Now().After(deadline) {
			break
		}
		t.Logf("%s: _replicate: %d %s; again", on.name, st, out)
	}
	var res map[string]any
	if st != http.StatusOK || json.Unmarshal(out, &res) != nil || res["ok"] != true || res["session_id"] == nil {
		t.Fatalf("%s: _replicate %v: %d %s", on.name, body, st, out)
	}
	return res
}

// TestOneShot: each replicator pulls from and pushes to the other, then
// both run again after new writes on the source and count every session.
func TestOneShot(t *testing.T) {
	t.Parallel()
	settee, couch := start(t)
	sc := fill(t, settee, "src", docs)
	cc := fill(t, couch, "src", docs)
	runs := []struct {
		name     string
		on       server // whose replicator
		from, to server
		fromDB   string
		toDB     string
		c        *corpus
	}{
		{"CouchDB pulls from settee", couch, settee, couch, "src", "pulled", sc},
		{"CouchDB pushes to settee", couch, couch, settee, "src", "pushed", cc},
		{"settee pulls from CouchDB", settee, couch, settee, "src", "spulled", cc},
		{"settee pushes to CouchDB", settee, settee, couch, "src", "spushed", sc},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			body := map[string]any{"source": r.from.dbURL(r.fromDB), "target": r.to.dbURL(r.toDB), "create_target": true}
			res := replicate(t, r.on, body)
			h := history0(t, res)
			same(t, r.from, r.fromDB, r.to, r.toDB, r.c)
			checkpoints(t, r.from, r.fromDB, r.to, r.toDB, res["session_id"].(string))
			first := h["docs_written"].(float64)
			if first < docs {
				t.Fatalf("docs_written %v, want at least %d", first, docs)
			}

			// 100 new docs and an edit: the next session reads them only,
			// and its counters go on from the first session's
			var more []string
			for i := range 100 {
				more = append(more, fmt.Sprintf(`{"_id":"more-%s-%03d","i":%d}`, strings.ReplaceAll(r.toDB, " ", ""), i, i))
			}
			r.from.must(t, "POST", "/"+r.fromDB+"/_bulk_docs", `{"docs":[`+strings.Join(more, ",")+`]}`, 201)
			delete(body, "create_target")
			res = replicate(t, r.on, body)
			h2 := history0(t, res)
			if h2["docs_written"].(float64) != first+100 || h2["docs_read"].(float64) != h["docs_read"].(float64)+100 {
				t.Fatalf("second session %v; the first %v: want its counters plus 100", h2, h)
			}
			if fmt.Sprint(h2["start_last_seq"]) == "0" || len(res["history"].([]any)) != 2 {
				t.Fatalf("second session did not resume: %v", res)
			}
			same(t, r.from, r.fromDB, r.to, r.toDB, r.c)
			checkpoints(t, r.from, r.fromDB, r.to, r.toDB, res["session_id"].(string))
			// and a third with nothing new
			if res = replicate(t, r.on, body); res["no_changes"] != true {
				t.Fatalf("nothing new: %v", res)
			}
		})
	}
}

// TestFiltered: doc_ids, a selector and the source's JavaScript filter,
// each way.
func TestFiltered(t *testing.T) {
	t.Parallel()
	settee, couch := start(t)
	fill(t, settee, "src", 300)
	fill(t, couch, "src", 300)
	ids := []string{"doc-00001", "doc-00002", "att-big", "doc-00299", "no-such-doc"}
	filters := []struct {
		name string
		opts map[string]any
		want func(id string, doc map[string]any) bool
	}{
		{"doc_ids", map[string]any{"doc_ids": ids}, func(id string, _ map[string]any) bool {
			for _, x := range ids {
				if x == id {
					return true
				}
			}
			return false
		}},
		{"selector", map[string]any{"selector": map[string]any{"type": "odd", "n": map[string]any{"$lt": 100}}}, func(_ string, d map[string]any) bool {
			n, _ := d["n"].(float64)
			return d["type"] == "odd" && n < 100
		}},
		{"filter", map[string]any{"filter": "f/even"}, func(_ string, d map[string]any) bool { return d["type"] == "even" }},
	}
	for _, dir := range directions(settee, couch) {
		for _, f := range filters {
			t.Run(dir.name+"/"+f.name, func(t *testing.T) {
				tdb := "f-" + f.name + "-" + strings.ReplaceAll(strings.ToLower(dir.name), " ", "-")
				body := map[string]any{"source": dir.from.dbURL("src"), "target": dir.to.dbURL(tdb), "create_target": true}
				for k, v := range f.opts {
					body[k] = v
				}
				replicate(t, dir.on, body)
				src, got := states(t, dir.from, "src"), states(t, dir.to, tdb)
				n := 0
				for id, st := range src {
					_, has := got[id]
					want := st.winner != nil && f.want(id, st.winner)
					if st.winner == nil && f.name == "doc_ids" {
						want = f.want(id, nil) // deleted docs in doc_ids travel too
					}
					if has != want {
						t.Fatalf("%s: on the target %v, want %v (%v)", id, has, want, st.winner)
					}
					if has {
						n++
						if fmt.Sprint(st.leaves) != fmt.Sprint(got[id].leaves) {
							t.Fatalf("%s: leaves %v, want %v", id, got[id].leaves, st.leaves)
						}
					}
				}
				if n == 0 {
					t.Fatal("nothing replicated")
				}
			})
		}
	}
}

// TestContinuous: a _replicator doc on each side keeps a target current
// as the source is written, and stops when it is deleted.
func TestContinuous(t *testing.T) {
	t.Parallel()
	settee, couch := start(t)
	fill(t, settee, "src", 500)
	fill(t, couch, "src", 500)
	for _, dir := range directions(settee, couch) {
		t.Run(dir.name, func(t *testing.T) {
			tdb := "c-" + strings.ReplaceAll(strings.ToLower(dir.name), " ", "-")
			docID := "rep-" + tdb
			dir.on.must(t, "PUT", "/_replicator/"+docID, map[string]any{
				"source": dir.from.dbURL("src"), "target": dir.to.dbURL(tdb), "create_target": true, "continuous": true}, 201)
			count := func() float64 { return docCount(t, dir.to, tdb) }
			src := dir.from.must(t, "GET", "/src", nil)["doc_count"].(float64)
			waitFor(t, 2*time.Minute, "the first docs", func() bool { return count() == src })
			// written while it runs
			var more []string
			for i := range 50 {
				more = append(more, fmt.Sprintf(`{"_id":"live-%s-%02d"}`, tdb, i))
			}
			dir.from.must(t, "POST", "/src/_bulk_docs", `{"docs":[`+strings.Join(more, ",")+`]}`, 201)
			waitFor(t, time.Minute, "the live docs", func() bool { return count() == src+50 })
			same(t, dir.from, "src", dir.to, tdb, nil)
			sd := dir.on.must(t, "GET", "/_scheduler/docs/_replicator/"+docID, nil)
			if sd["state"] != "running" {
				t.Fatalf("scheduler doc %v", sd)
			}
			rev := dir.on.must(t, "GET", "/_replicator/"+docID, nil)["_rev"].(string)
			dir.on.must(t, "DELETE", "/_replicator/"+docID+"?rev="+rev, nil, 200)
			// gone from _scheduler/docs, and its job from _scheduler/jobs
			// (CouchDB drops the doc's entry before the job has stopped)
			waitFor(t, 30*time.Second, "the job to stop", func() bool {
				st, _ := dir.on.do(t, "GET", "/_scheduler/docs/_replicator/"+docID, "", nil)
				if st != 404 {
					return false
				}
				var jobs struct {
					Jobs []struct {
						DocID string `json:"doc_id"`
					}
				}
				if json.Unmarshal(dir.on.getRaw(t, "/_scheduler/jobs"), &jobs) != nil {
					return false
				}
				for _, j := range jobs.Jobs {
					if j.DocID == docID {
						return false
					}
				}
				return true
			})
			dir.from.must(t, "PUT", "/src/after-stop-"+tdb, `{}`, 201)
			time.Sleep(2 * time.Second)
			if st, _ := dir.to.do(t, "GET", "/"+tdb+"/after-stop-"+tdb, "", nil); st != 404 {
				t.Fatalf("a doc written after the job stopped was replicated: %d", st)
			}
		})
	}
}

// direction is one replication between the two: whose replicator runs
// it, from which to which.
type direction struct {
	name     string
	on       server
	from, to server
}

// directions are the four ways: each replicator pulls and pushes.
func directions(settee, couch server) []direction {
	return []direction{
		{"CouchDB pulls from settee", couch, settee, couch},
		{"settee pulls from CouchDB", settee, couch, settee},
		{"CouchDB pushes to settee", couch, couch, settee},
		{"settee pushes to CouchDB", settee, settee, couch},
	}
}
