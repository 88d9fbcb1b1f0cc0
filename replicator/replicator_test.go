package replicator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

func call(t *testing.T, s *testserver.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var b any
	switch v := body.(type) {
	case nil:
	case string:
		b = v
	default:
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b = j
	}
	resp := s.Do(t, method, path, b)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	} else {
		out = map[string]any{"_raw": string(raw)}
	}
	return resp.StatusCode, out
}

func must(t *testing.T, s *testserver.Server, method, path string, body any, want ...int) map[string]any {
	t.Helper()
	st, out := call(t, s, method, path, body)
	for _, w := range want {
		if st == w {
			return out
		}
	}
	t.Fatalf("%s %s: status %d: %v", method, path, st, out)
	return nil
}

// dbURL is a database URL with the admin's credentials.
func dbURL(s *testserver.Server, db string) string {
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(testserver.AdminUser, testserver.AdminPassword)
	u.Path = "/" + db
	return u.String()
}

// leaves returns id -> sorted leaf revs (with a deleted marker) of a db.
func leaves(t *testing.T, s *testserver.Server, db string) map[string]string {
	t.Helper()
	out := must(t, s, "GET", "/"+db+"/_changes?style=all_docs", nil, 200)
	m := map[string]string{}
	for _, r := range out["results"].([]any) {
		row := r.(map[string]any)
		var revs []string
		for _, c := range row["changes"].([]any) {
			revs = append(revs, c.(map[string]any)["rev"].(string))
		}
		sort.Strings(revs)
		v := strings.Join(revs, ",")
		if row["deleted"] == true {
			v += " deleted"
		}
		m[row["id"].(string)] = v
	}
	return m
}

func sameLeaves(t *testing.T, a *testserver.Server, adb string, b *testserver.Server, bdb string) {
	t.Helper()
	la, lb := leaves(t, a, adb), leaves(t, b, bdb)
	if fmt.Sprint(la) != fmt.Sprint(lb) {
		t.Fatalf("leaves differ:\n%s: %v\n%s: %v", adb, la, bdb, lb)
	}
}

// ndocs counts a db's changes rows; -1 while the db does not exist.
func ndocs(t *testing.T, s *testserver.Server, db string) int {
	t.Helper()
	st, out := call(t, s, "GET", "/"+db+"/_changes", nil)
	if st != 200 {
		return -1
	}
	return len(out["results"].([]any))
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if f() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func loadDocs(t *testing.T, s *testserver.Server, db string, from, n int, extra string) {
	t.Helper()
	var docs []string
	for i := from; i < from+n; i++ {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%03d","n":%d,"type":"%s"%s}`, i, i, []string{"odd", "even"}[(i+1)%2], extra))
	}
	must(t, s, "POST", "/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, 201)
}

func history0(t *testing.T, res map[string]any) map[string]any {
	t.Helper()
	h, ok := res["history"].([]any)
	if !ok || len(h) == 0 {
		t.Fatalf("no history in %v", res)
	}
	return h[0].(map[string]any)
}

// TestOneShotConflictsDeletionsIncremental replicates over HTTP into a
// local target on another server, then again from the checkpoint.
func TestOneShotConflictsDeletionsIncremental(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 30, "")
	// a conflict on d001 and a deleted doc
	must(t, a, "POST", "/src/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"d001","_rev":"1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","x":1}]}`, 201)
	d2 := must(t, a, "GET", "/src/d002", nil, 200)
	must(t, a, "DELETE", "/src/d002?rev="+d2["_rev"].(string), nil, 200)

	res := must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": "tgt", "create_target": true}, 200)
	if res["ok"] != true || res["session_id"] == nil || res["source_last_seq"] == nil {
		t.Fatalf("answer %v", res)
	}
	h := history0(t, res)
	if h["docs_written"].(float64) != 31 || h["docs_read"].(float64) != 31 {
		t.Fatalf("history %v", h)
	}
	sameLeaves(t, a, "src", b, "tgt")
	d1 := must(t, b, "GET", "/tgt/d001?conflicts=true", nil, 200)
	if c, _ := d1["_conflicts"].([]any); len(c) != 1 {
		t.Fatalf("conflict lost: %v", d1)
	}
	must(t, b, "GET", "/tgt/d002", nil, 404)

	// incremental: only new docs are read; the counters count every
	// session since the first, as CouchDB's (31 + 5)
	loadDocs(t, a, "src", 30, 5, "")
	res = must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": "tgt"}, 200)
	if h := history0(t, res); h["docs_read"].(float64) != 36 || h["missing_checked"].(float64) != 36 || h["docs_written"].(float64) != 36 {
		t.Fatalf("incremental history %v", h)
	}
	if hs := res["history"].([]any); len(hs) != 2 {
		t.Fatalf("want 2 sessions in history, got %d", len(hs))
	}
	sameLeaves(t, a, "src", b, "tgt")
	// the checkpoint is on both ends in CouchDB's format
	for _, s := range []*testserver.Server{a, b} {
		db := map[*testserver.Server]string{a: "src", b: "tgt"}[s]
		all := must(t, s, "GET", "/"+db+"/_local_docs", nil, 200)
		rows := all["rows"].([]any)
		if len(rows) != 1 {
			t.Fatalf("local docs %v", all)
		}
		ck := must(t, s, "GET", "/"+db+"/"+rows[0].(map[string]any)["id"].(string), nil, 200)
		if ck["replication_id_version"].(float64) != 4 || ck["source_last_seq"] == nil || ck["session_id"] != res["session_id"] {
			t.Fatalf("checkpoint %v", ck)
		}
	}
	// nothing new: nothing read
	res = must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": "tgt"}, 200)
	if res["no_changes"] != true {
		t.Fatalf("no-op history %v", h)
	}
}

func TestFilteredAndAttachments(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "")
	must(t, a, "PUT", "/src/att", `{"_attachments":{"hello.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ="}}}`, 201)

	res := must(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "ids", "create_target": true,
		"doc_ids": []string{"d003", "d007", "att"}}, 200)
	got := leaves(t, a, "ids")
	if len(got) != 3 || got["d003"] == "" || got["d007"] == "" {
		t.Fatalf("doc_ids: %v (%v)", got, res)
	}
	// the direct path sends attachments in identity encoding (text is
	// stored gzipped): the copy serves the bytes that were written
	resp := a.Do(t, "GET", "/ids/att/hello.txt", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello world" {
		t.Fatalf("attachment over the direct path: %d %q", resp.StatusCode, body)
	}
	must(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "sel", "create_target": true,
		"selector": map[string]any{"type": "even", "n": map[string]any{"$gte": 10}}}, 200)
	got = leaves(t, a, "sel")
	if len(got) != 5 || got["d010"] == "" || got["d011"] != "" {
		t.Fatalf("selector: %v", got)
	}

	// attachments over HTTP, then an update that keeps the attachment as a stub
	b := testserver.Start(t)
	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": dbURL(b, "tgt"), "create_target": true}, 200)
	resp = b.Do(t, "GET", "/tgt/att/hello.txt", nil)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello world" {
		t.Fatalf("attachment: %d %q", resp.StatusCode, body)
	}
	doc := must(t, a, "GET", "/src/att", nil, 200)
	doc["more"] = true
	must(t, a, "PUT", "/src/att", doc, 201)
	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": dbURL(b, "tgt")}, 200)
	sameLeaves(t, a, "src", b, "tgt")
	resp = b.Do(t, "GET", "/tgt/att/hello.txt", nil)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello world" {
		t.Fatalf("attachment after update: %q", body)
	}
}

// TestLocalVsHTTP replicates a database of a node into two new ones, once
// through its own HTTP API and once through the coordinator directly.
func TestLocalVsHTTP(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 40, `,"nested":{"a":[1,2,{"b":"c"}]}`)
	must(t, a, "POST", "/src/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"d005","_rev":"1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","x":1}]}`, 201)
	// attachments, one stored gzipped and one not
	must(t, a, "PUT", "/src/att", `{"_attachments":{"hello.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ="},`+
		`"b.bin":{"content_type":"application/octet-stream","data":"AAECAw=="}}}`, 201)
	must(t, a, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": dbURL(a, "viahttp"), "create_target": true}, 200)
	// small batches: each worker takes many, out of order
	must(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "direct", "create_target": true,
		"worker_batch_size": 3, "worker_processes": 3}, 200)
	sameLeaves(t, a, "src", a, "viahttp")
	sameLeaves(t, a, "viahttp", a, "direct")
	x := must(t, a, "GET", "/viahttp/_all_docs?include_docs=true&conflicts=true", nil, 200)
	y := must(t, a, "GET", "/direct/_all_docs?include_docs=true&conflicts=true", nil, 200)
	if fmt.Sprint(x["rows"]) != fmt.Sprint(y["rows"]) {
		t.Fatalf("bodies differ")
	}
	const q = "/att?attachments=true&att_encoding_info=true&revs=true"
	if x, y := must(t, a, "GET", "/viahttp"+q, nil, 200), must(t, a, "GET", "/direct"+q, nil, 200); fmt.Sprint(x) != fmt.Sprint(y) {
		t.Fatalf("attachments differ:\n%v\n%v", x, y)
	}
}

func schedDoc(t *testing.T, s *testserver.Server, id string) map[string]any {
	t.Helper()
	_, out := call(t, s, "GET", "/_scheduler/docs/_replicator/"+id, nil)
	return out
}

// TestContinuousTargetRestart runs a continuous _replicator job whose
// target server goes away and comes back.
func TestContinuousTargetRestart(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 10, "")
	must(t, a, "PUT", "/_replicator/cont", map[string]any{"source": "src", "target": dbURL(b, "tgt"),
		"create_target": true, "continuous": true, "checkpoint_interval": 500}, 201)
	waitFor(t, 10*time.Second, "initial sync", func() bool { return ndocs(t, b, "tgt") == 10 })
	if d := schedDoc(t, a, "cont"); d["state"] != "running" {
		t.Fatalf("scheduler doc %v", d)
	}
	jobs := must(t, a, "GET", "/_scheduler/jobs", nil, 200)
	if jobs["total_rows"].(float64) != 1 {
		t.Fatalf("jobs %v", jobs)
	}
	all := must(t, a, "GET", "/_scheduler/docs", nil, 200)
	if all["total_rows"].(float64) != 1 {
		t.Fatalf("docs %v", all)
	}
	resp := a.Do(t, "GET", "/_active_tasks", nil)
	var tasks []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&tasks)
	resp.Body.Close()
	if len(tasks) != 1 || tasks[0]["type"] != "replication" || tasks[0]["docs_written"].(float64) != 10 {
		t.Fatalf("active tasks %v", tasks)
	}

	// a new doc shows up within seconds
	must(t, a, "PUT", "/src/live", `{"x":1}`, 201)
	waitFor(t, 5*time.Second, "live doc", func() bool { st, _ := call(t, b, "GET", "/tgt/live", nil); return st == 200 })

	b.Stop(t)
	loadDocs(t, a, "src", 10, 10, "")
	waitFor(t, 15*time.Second, "crashing state", func() bool { return schedDoc(t, a, "cont")["state"] == "crashing" })
	b.Restart(t)
	waitFor(t, 20*time.Second, "convergence", func() bool { return ndocs(t, b, "tgt") == 21 })
	sameLeaves(t, a, "src", b, "tgt")
	waitFor(t, 10*time.Second, "running again", func() bool { return schedDoc(t, a, "cont")["state"] == "running" })

	// deleting the doc stops the job
	d := must(t, a, "GET", "/_replicator/cont", nil, 200)
	must(t, a, "DELETE", "/_replicator/cont?rev="+d["_rev"].(string), nil, 200)
	waitFor(t, 5*time.Second, "job gone", func() bool {
		j := must(t, a, "GET", "/_scheduler/jobs", nil, 200)
		return j["total_rows"].(float64) == 0
	})
}

// TestReplicatorDocsSurviveRestart: a continuous job resumes after its node
// restarts, and a finished one-shot is not run again.
func TestReplicatorDocsSurviveRestart(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 10, "")
	must(t, a, "PUT", "/_replicator/once", map[string]any{"source": "src", "target": "once", "create_target": true}, 201)
	must(t, a, "PUT", "/_replicator/cont", map[string]any{"source": "src", "target": "cont", "create_target": true, "continuous": true}, 201)
	waitFor(t, 10*time.Second, "one-shot completed", func() bool {
		d := must(t, a, "GET", "/_replicator/once", nil, 200)
		return d["_replication_state"] == "completed"
	})
	if d := schedDoc(t, a, "once"); d["state"] != "completed" {
		t.Fatalf("once: %v", d)
	}
	waitFor(t, 10*time.Second, "continuous sync", func() bool { return ndocs(t, a, "cont") == 10 })
	a.Restart(t)
	waitFor(t, 10*time.Second, "continuous running after restart", func() bool { return schedDoc(t, a, "cont")["state"] == "running" })
	if d := schedDoc(t, a, "once"); d["state"] != "completed" {
		t.Fatalf("once after restart: %v", d)
	}
	must(t, a, "PUT", "/src/after", `{"x":1}`, 201)
	waitFor(t, 10*time.Second, "doc after restart", func() bool { st, _ := call(t, a, "GET", "/cont/after", nil); return st == 200 })
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	st, out := call(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "nope"})
	if st != 404 {
		t.Fatalf("missing target: %d %v", st, out)
	}
	st, out = call(t, a, "POST", "/_replicate", map[string]any{"source": "src"})
	if st != 400 {
		t.Fatalf("no target: %d %v", st, out)
	}
	st, _ = call(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "x", "selector": []int{1}})
	if st != 400 {
		t.Fatalf("bad selector: %d", st)
	}
	resp := a.Do(t, "GET", "/_scheduler/jobs", nil)
	resp.Body.Close()
	req := a.NewRequest(t, "GET", "/_scheduler/jobs", nil)
	if r, err := (&httpClient{}).do(req); err != nil || r != 401 {
		t.Fatalf("anonymous scheduler: %d %v", r, err)
	}

	must(t, a, "PUT", "/_replicator/down", map[string]any{"source": "http://127.0.0.1:1/nope", "target": "x", "create_target": true}, 201)
	waitFor(t, 15*time.Second, "two crashes", func() bool {
		d := schedDoc(t, a, "down")
		n, _ := d["error_count"].(float64)
		info, _ := d["info"].(map[string]any)
		return d["state"] == "crashing" && n >= 2 && info != nil && strings.Contains(fmt.Sprint(info["error"]), "127.0.0.1:1")
	})
	must(t, a, "PUT", "/_replicator/bad", map[string]any{"source": 12}, 201)
	waitFor(t, 5*time.Second, "failed doc", func() bool { return schedDoc(t, a, "bad")["state"] == "failed" })
}
