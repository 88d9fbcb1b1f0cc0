//go:build !race

// Compaction runs badger's value-log GC, and badger's GC reads the
// memtable's max version (DB.MaxVersion) while its own rewrite batches
// update it (memTable.Put) without a common lock: a race inside badger
// v4.9.6 that -race reports whatever settee does. These tests run in the
// second, race-free pass of make test.

package httpgw_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
	"github.com/settee/settee/storage"
)

// smallVlog makes badger's value-log files 1 MB, so that a test-sized
// database spans many of them (space comes back a file at a time).
func smallVlog(c *node.Config) { c.ValueLogFileMB = 1 }

// editMany writes n docs of about size bytes and updates each of them
// rounds times; it returns the docs' latest revs and the first revs.
func editMany(t *testing.T, s *testserver.Server, db string, n, rounds, size int) (latest, first map[string]string) {
	t.Helper()
	latest, first = map[string]string{}, map[string]string{}
	pad := strings.Repeat("x", size)
	for r := 0; r <= rounds; r++ {
		docs := make([]map[string]any, n)
		for i := range docs {
			id := fmt.Sprintf("doc%03d", i)
			docs[i] = map[string]any{"_id": id, "round": r, "pad": pad}
			if rev := latest[id]; rev != "" {
				docs[i]["_rev"] = rev
			}
		}
		for _, res := range bulkDocs(t, s, db, docs) {
			if res.Error != "" {
				t.Fatalf("bulk round %d: %s %s", r, res.ID, res.Error)
			}
			latest[res.ID] = res.Rev
			if r == 0 {
				first[res.ID] = res.Rev
			}
		}
	}
	return latest, first
}

type dbInfoT struct {
	DocCount       int    `json:"doc_count"`
	CompactRunning bool   `json:"compact_running"`
	PurgeSeq       string `json:"purge_seq"`
	Sizes          struct {
		File     int64 `json:"file"`
		External int64 `json:"external"`
		Active   int64 `json:"active"`
	} `json:"sizes"`
}

func dbInfo(t *testing.T, s *testserver.Server, db string) dbInfoT {
	t.Helper()
	var info dbInfoT
	mustCall(t, s, 200, "GET", "/"+db, nil, &info)
	return info
}

// compact starts a compaction and waits for its end (compact_running false).
func compactAndWait(t *testing.T, s *testserver.Server, db string) {
	t.Helper()
	mustCall(t, s, 202, "POST", "/"+db+"/_compact", "{}", nil)
	waitCompacted(t, s, db)
}

func waitCompacted(t *testing.T, s *testserver.Server, db string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for dbInfo(t, s, db).CompactRunning {
		if time.Now().After(deadline) {
			t.Fatalf("compaction of %s still running after 30s", db)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCompactShrinksEditedDatabase(t *testing.T) {
	s := testserver.Start(t, smallVlog)
	mustCall(t, s, 201, "PUT", "/ed", nil, nil)
	latest, first := editMany(t, s, "ed", 100, 40, 4000)
	before := storage.AllocatedBytes(s.DataDir)
	infoBefore := dbInfo(t, s, "ed")
	if infoBefore.Sizes.File <= infoBefore.Sizes.Active {
		t.Errorf("before compaction: sizes.file %d <= sizes.active %d", infoBefore.Sizes.File, infoBefore.Sizes.Active)
	}

	compactAndWait(t, s, "ed")
	after := storage.AllocatedBytes(s.DataDir)
	infoAfter := dbInfo(t, s, "ed")
	t.Logf("data dir %d -> %d bytes; sizes before %+v after %+v", before, after, infoBefore.Sizes, infoAfter.Sizes)
	// the space came back by deleting value-log files nothing pointed
	// into, unread, not by badger's GC reading them all
	mfs := scrape(t, s, "_local")
	counter := func(name string) float64 {
		m := sample(mfs, name, nil)
		if m == nil {
			t.Fatalf("%s missing", name)
		}
		return m.GetCounter().GetValue()
	}
	dropped, rewritten := counter("settee_vlog_files_dropped_total"), counter("settee_vlog_files_rewritten_total")
	t.Logf("value-log files: %v deleted unread (%v bytes), %v rewritten", dropped, counter("settee_vlog_dropped_bytes_total"), rewritten)
	// the walk's rewritten doc records count as copied (the graphs'
	// compaction MB/s)
	if copied := counter("settee_compaction_copied_bytes_total"); copied < 100*50 {
		t.Errorf("settee_compaction_copied_bytes_total = %v after compacting 100 docs, want their records", copied)
	}
	if dropped < 10 || rewritten > 2 {
		t.Errorf("value-log files: %v deleted unread, %v rewritten; want at least 10 and at most 2", dropped, rewritten)
	}
	if after*4 > before {
		t.Errorf("data dir %d bytes after compaction, want < a quarter of %d", after, before)
	}
	if infoAfter.Sizes.File >= infoBefore.Sizes.File {
		t.Errorf("sizes.file %d after compaction, was %d", infoAfter.Sizes.File, infoBefore.Sizes.File)
	}
	if infoAfter.DocCount != 100 || infoAfter.Sizes.External != infoBefore.Sizes.External {
		t.Errorf("doc_count %d external %d after compaction, want 100 and %d", infoAfter.DocCount, infoAfter.Sizes.External, infoBefore.Sizes.External)
	}
	for id, rev := range latest {
		var doc map[string]any
		mustCall(t, s, 200, "GET", "/ed/"+id, nil, &doc)
		if doc["_rev"] != rev || doc["round"] != float64(40) {
			t.Fatalf("%s: got rev %v round %v, want %s round 40", id, doc["_rev"], doc["round"], rev)
		}
	}
	// old revision bodies are gone, their ids stay in the history
	var e map[string]string
	mustCall(t, s, 404, "GET", "/ed/doc007?rev="+first["doc007"], nil, &e)
	if e["error"] != "not_found" {
		t.Errorf("old rev: %v", e)
	}
	var doc struct {
		Revisions struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		} `json:"_revisions"`
		RevsInfo []struct {
			Rev    string `json:"rev"`
			Status string `json:"status"`
		} `json:"_revs_info"`
	}
	mustCall(t, s, 200, "GET", "/ed/doc007?revs=true&revs_info=true", nil, &doc)
	if doc.Revisions.Start != 41 || len(doc.Revisions.IDs) != 41 {
		t.Errorf("_revisions start %d with %d ids, want 41 and 41", doc.Revisions.Start, len(doc.Revisions.IDs))
	}
	if len(doc.RevsInfo) != 41 || doc.RevsInfo[0].Status != "available" || doc.RevsInfo[1].Status != "missing" {
		t.Errorf("_revs_info: %+v", doc.RevsInfo[:min(3, len(doc.RevsInfo))])
	}
	// and the database keeps working after a restart
	s.Restart(t)
	var d2 map[string]any
	mustCall(t, s, 200, "GET", "/ed/doc042", nil, &d2)
	if d2["_rev"] != latest["doc042"] {
		t.Errorf("after restart: %v", d2["_rev"])
	}
}

func TestCompactKeepsConcurrentWrites(t *testing.T) {
	s := testserver.Start(t, smallVlog)
	mustCall(t, s, 201, "PUT", "/cw", nil, nil)
	latest, _ := editMany(t, s, "cw", 60, 15, 2000)

	// writers update the edited docs and create new ones while the
	// database compacts; every acknowledged write must be there after
	var mu sync.Mutex
	created := map[string]string{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("doc%03d", (w*20+i)%60)
				mu.Lock()
				rev := latest[id]
				mu.Unlock()
				body := fmt.Sprintf(`{"_rev":%q,"w":%d,"i":%d}`, rev, w, i)
				var r bulkResult
				if st := call(t, s, "PUT", "/cw/"+id, body, &r); st != 201 {
					t.Errorf("PUT %s: %d %+v", id, st, r)
					return
				}
				nid := fmt.Sprintf("new-%d-%d", w, i)
				var r2 bulkResult
				if st := call(t, s, "PUT", "/cw/"+nid, `{"fresh":true}`, &r2); st != 201 {
					t.Errorf("PUT %s: %d", nid, st)
					return
				}
				mu.Lock()
				latest[id] = r.Rev
				created[nid] = r2.Rev
				mu.Unlock()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	mustCall(t, s, 202, "POST", "/cw/_compact", "{}", nil)
	var again map[string]any
	mustCall(t, s, 202, "POST", "/cw/_compact", "{}", &again)
	var tasks []map[string]any
	mustCall(t, s, 200, "GET", "/_active_tasks", nil, &tasks)
	waitCompacted(t, s, "cw")
	close(stop)
	wg.Wait()
	t.Logf("second _compact answered %v; tasks while running: %v", again, tasks)

	mu.Lock()
	defer mu.Unlock()
	for id, rev := range latest {
		var doc map[string]any
		mustCall(t, s, 200, "GET", "/cw/"+id, nil, &doc)
		if doc["_rev"] != rev {
			t.Errorf("%s: rev %v, want %s (an update was lost)", id, doc["_rev"], rev)
		}
	}
	for id, rev := range created {
		var doc map[string]any
		mustCall(t, s, 200, "GET", "/cw/"+id, nil, &doc)
		if doc["_rev"] != rev {
			t.Errorf("%s: rev %v, want %s", id, doc["_rev"], rev)
		}
	}
	// compacting again finds every doc in order
	compactAndWait(t, s, "cw")
	if info := dbInfo(t, s, "cw"); info.DocCount != 60+len(created) {
		t.Errorf("doc_count %d, want %d", info.DocCount, 60+len(created))
	}
}

func TestCompactBadInput(t *testing.T) {
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/bad", nil, nil)
	mustCall(t, s, 404, "POST", "/nosuchdb/_compact", "{}", nil)

	req := s.NewRequest(t, "POST", "/bad/_compact", nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 415 || e["error"] != "bad_content_type" {
		t.Errorf("no content type: %d %v", resp.StatusCode, e)
	}

	// anonymous and non-admin users
	resp, err = http.DefaultClient.Do(s.NewRequest(t, "POST", "/bad/_compact", "{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("anonymous: %d", resp.StatusCode)
	}
	mustCall(t, s, 201, "PUT", "/_users/org.couchdb.user:bob", `{"name":"bob","password":"pw","roles":[],"type":"user"}`, nil)
	mustCall(t, s, 200, "PUT", "/bad/_security", `{"members":{"names":["bob"]}}`, nil)
	req = s.NewRequest(t, "POST", "/bad/_compact", "{}")
	req.SetBasicAuth("bob", "pw")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 && resp.StatusCode != 403 {
		t.Errorf("non-admin member: %d", resp.StatusCode)
	}
	mustCall(t, s, 405, "GET", "/bad/_compact", nil, nil)
	// compacting an empty database works
	compactAndWait(t, s, "bad")
}

func TestPurge(t *testing.T) {
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/pu", nil, nil)
	var r1, r2 bulkResult
	mustCall(t, s, 201, "PUT", "/pu/a", `{"v":1}`, &r1)
	mustCall(t, s, 201, "PUT", "/pu/a", fmt.Sprintf(`{"_rev":%q,"v":2}`, r1.Rev), &r2)
	var rb bulkResult
	mustCall(t, s, 201, "PUT", "/pu/b", `{"v":1}`, &rb)
	// a conflict on c: purging one branch keeps the other
	var rc bulkResult
	mustCall(t, s, 201, "PUT", "/pu/c", `{"v":1}`, &rc)
	conflict := "1-0123456789abcdef0123456789abcdef"
	mustCall(t, s, 201, "POST", "/pu/_bulk_docs", fmt.Sprintf(`{"new_edits":false,"docs":[{"_id":"c","_rev":%q,"v":9}]}`, conflict), nil)

	body := fmt.Sprintf(`{"a":[%q,"9-nope"],"c":[%q],"zz":["1-abc"]}`, r2.Rev, conflict)
	var out struct {
		PurgeSeq any                 `json:"purge_seq"`
		Purged   map[string][]string `json:"purged"`
	}
	mustCall(t, s, 201, "POST", "/pu/_purge", body, &out)
	if out.PurgeSeq != nil || len(out.Purged["a"]) != 1 || out.Purged["a"][0] != r2.Rev ||
		len(out.Purged["c"]) != 1 || len(out.Purged["zz"]) != 0 {
		t.Fatalf("purge answer %+v", out)
	}
	mustCall(t, s, 404, "GET", "/pu/a", nil, nil)
	mustCall(t, s, 404, "GET", "/pu/a?rev="+r1.Rev, nil, nil)
	var c map[string]any
	mustCall(t, s, 200, "GET", "/pu/c?conflicts=true", nil, &c)
	if c["_rev"] != rc.Rev || c["_conflicts"] != nil {
		t.Errorf("c after purge: %v", c)
	}
	info := dbInfo(t, s, "pu")
	// three purge requests, zz's too (CouchDB counts every request)
	if info.DocCount != 2 || !strings.HasPrefix(info.PurgeSeq, "3") {
		t.Errorf("after purge: doc_count %d purge_seq %s", info.DocCount, info.PurgeSeq)
	}
	var ch changes
	mustCall(t, s, 200, "GET", "/pu/_changes", nil, &ch)
	for _, r := range ch.Results {
		if r.ID == "a" {
			t.Errorf("purged doc in _changes: %+v", r)
		}
	}
	// the id can be used again from scratch, and survives a restart
	var again bulkResult
	mustCall(t, s, 201, "PUT", "/pu/a", `{"v":3}`, &again)
	if !strings.HasPrefix(again.Rev, "1-") {
		t.Errorf("recreated a: rev %s", again.Rev)
	}
	s.Restart(t)
	mustCall(t, s, 404, "GET", "/pu/a?rev="+r2.Rev, nil, nil)

	// purged_infos_limit
	var limit int
	mustCall(t, s, 200, "GET", "/pu/_purged_infos_limit", nil, &limit)
	if limit != 1000 {
		t.Errorf("purged_infos_limit %d", limit)
	}
	mustCall(t, s, 200, "PUT", "/pu/_purged_infos_limit", "5", nil)
	mustCall(t, s, 200, "GET", "/pu/_purged_infos_limit", nil, &limit)
	if limit != 5 {
		t.Errorf("purged_infos_limit %d after PUT 5", limit)
	}
	mustCall(t, s, 400, "PUT", "/pu/_purged_infos_limit", `"x"`, nil)
	mustCall(t, s, 400, "POST", "/pu/_purge", `{"a":"1-x"}`, nil)
	mustCall(t, s, 400, "POST", "/pu/_purge", `[1]`, nil)
	mustCall(t, s, 404, "POST", "/nosuch/_purge", `{}`, nil)
}

func TestAutoCompaction(t *testing.T) {
	s := testserver.Start(t, smallVlog)
	var cfg map[string]string
	mustCall(t, s, 200, "GET", "/_node/_local/_config/smoosh", nil, &cfg)
	if cfg["threshold"] != "2.0" || cfg["enabled"] != "true" {
		t.Fatalf("smoosh defaults: %v", cfg)
	}
	mustCall(t, s, 201, "PUT", "/auto", nil, nil)
	editMany(t, s, "auto", 50, 30, 3000)
	before := dbInfo(t, s, "auto").Sizes
	if before.File < 2*before.Active {
		t.Fatalf("edited db not over the threshold: %+v", before)
	}
	var old string
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/smoosh/check_interval", `"0.2"`, &old)
	if old != "60" {
		t.Errorf("PUT answered old value %q, want \"60\"", old)
	}
	mustCall(t, s, 400, "PUT", "/_node/_local/_config/smoosh/threshold", `"0.5"`, nil)
	mustCall(t, s, 400, "PUT", "/_node/_local/_config/smoosh/min_file_size", `1024`, nil)
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/couchdb/max_dbs_open", `"10"`, nil) // stored, as CouchDB
	mustCall(t, s, 404, "GET", "/_node/_local/_config/smoosh/nope", nil, nil)
	// lowering the minimum size makes the daemon look at once
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/smoosh/min_file_size", `"1024"`, &old)
	deadline := time.Now().Add(30 * time.Second)
	for {
		after := dbInfo(t, s, "auto")
		if !after.CompactRunning && after.Sizes.File < 2*after.Sizes.Active {
			t.Logf("auto-compacted: sizes %+v -> %+v", before, after.Sizes)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no auto-compaction in 30s: sizes %+v", after.Sizes)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// settings survive a restart
	s.Restart(t)
	var v string
	mustCall(t, s, 200, "GET", "/_node/_local/_config/smoosh/min_file_size", nil, &v)
	if v != "1024" {
		t.Errorf("min_file_size after restart: %q", v)
	}
}
