package replicator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// replicationTask returns the first replication task of /_active_tasks.
func replicationTask(t *testing.T, s *testserver.Server) map[string]any {
	t.Helper()
	resp := s.Do(t, "GET", "/_active_tasks", nil)
	defer resp.Body.Close()
	var tasks []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&tasks); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task["type"] == "replication" {
			return task
		}
	}
	return nil
}

func jobCount(t *testing.T, s *testserver.Server) int {
	t.Helper()
	return int(must(t, s, "GET", "/_scheduler/jobs", nil, 200)["total_rows"].(float64))
}

// TestReplicateContinuousCancel: a continuous POST /_replicate answers 202
// with its id at once, runs as a transient job (in /_scheduler/jobs, not
// /_scheduler/docs), checkpoints every checkpoint_interval though it never
// ends, shows its progress in /_active_tasks, and stops on cancel: by the
// same body, by replication_id, or by CouchDB's aliases _local_id and id.
func TestReplicateContinuousCancel(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 10, "")
	body := map[string]any{"source": "src", "target": "copy", "create_target": true, "continuous": true, "checkpoint_interval": 200}
	st, res := call(t, a, "POST", "/_replicate", body)
	id, _ := res["_local_id"].(string)
	if st != 202 || res["ok"] != true || !strings.HasSuffix(id, "+continuous+create_target") {
		t.Fatalf("continuous answer %d %v", st, res)
	}
	waitFor(t, 10*time.Second, "initial sync", func() bool { return ndocs(t, a, "copy") == 10 })
	jobs := must(t, a, "GET", "/_scheduler/jobs", nil, 200)["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("jobs %v", jobs)
	}
	if j := jobs[0].(map[string]any); j["id"] != id || j["database"] != nil || j["doc_id"] != nil || j["source"] != "src" {
		t.Fatalf("job %v", j)
	}
	if docs := must(t, a, "GET", "/_scheduler/docs", nil, 200); docs["total_rows"].(float64) != 0 {
		t.Fatalf("a transient job in /_scheduler/docs: %v", docs)
	}

	var task map[string]any
	waitFor(t, 10*time.Second, "a checkpoint past every change, shown in _active_tasks", func() bool {
		ck := checkpoint(t, a, "copy")
		if ck == nil || changesSince(t, a, "src", ck["source_last_seq"]) != 0 {
			return false
		}
		task = replicationTask(t, a)
		return task != nil && fmt.Sprint(task["checkpointed_source_seq"]) == fmt.Sprint(ck["source_last_seq"])
	})
	if task["replication_id"] != id || task["continuous"] != true || task["docs_read"] != 10.0 || task["docs_written"] != 10.0 ||
		task["changes_pending"] != 0.0 || task["source"] != "src" || task["target"] != "copy" || task["database"] != nil || task["doc_id"] != nil {
		t.Fatalf("active task %v", task)
	}
	must(t, a, "PUT", "/src/live", `{"x":1}`, 201)
	waitFor(t, 5*time.Second, "live doc", func() bool { st, _ := call(t, a, "GET", "/copy/live", nil); return st == 200 })

	body["cancel"] = true
	res = must(t, a, "POST", "/_replicate", body, 200)
	if res["ok"] != true || res["_local_id"] != id {
		t.Fatalf("cancel answer %v", res)
	}
	if n := jobCount(t, a); n != 0 {
		t.Fatalf("%d jobs after cancel", n)
	}
	// the job stops (and checkpoints) after the answer
	waitFor(t, 10*time.Second, "the task gone", func() bool { return replicationTask(t, a) == nil })
	must(t, a, "PUT", "/src/after", `{"x":1}`, 201)
	time.Sleep(1500 * time.Millisecond)
	if st, _ := call(t, a, "GET", "/copy/after", nil); st != 404 {
		t.Fatalf("a doc written after cancel was replicated: %d", st)
	}
	if st, res := call(t, a, "POST", "/_replicate", body); st != 404 {
		t.Fatalf("cancel of a stopped replication: %d %v", st, res)
	}

	for _, key := range []string{"replication_id", "_local_id", "id"} {
		// written while no job runs: the restarted one brings it
		doc := "/src/while-" + key
		must(t, a, "PUT", doc, `{"x":1}`, 201)
		delete(body, "cancel")
		must(t, a, "POST", "/_replicate", body, 202)
		waitFor(t, 10*time.Second, "running again", func() bool {
			st, _ := call(t, a, "GET", strings.Replace(doc, "/src/", "/copy/", 1), nil)
			return st == 200
		})
		res := must(t, a, "POST", "/_replicate", map[string]any{key: id, "cancel": true}, 200)
		if res["_local_id"] != id {
			t.Fatalf("cancel by %s: %v", key, res)
		}
		if n := jobCount(t, a); n != 0 {
			t.Fatalf("cancel by %s: %d jobs left", key, n)
		}
	}
}

// TestOptionsAndIDs: options that filter what is replicated (doc_ids,
// selector, since_seq) give a replication id, hence a checkpoint, of their
// own, as in CouchDB; the others (worker_processes, worker_batch_size)
// resume the same checkpoint. since_seq starts after the given seq, every
// time (CouchDB's since_seq overrides the checkpoint too).
func TestOptionsAndIDs(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 10, "")
	seq := must(t, a, "GET", "/src", nil, 200)["update_seq"]
	loadDocs(t, a, "src", 10, 5, "")
	rep := func(target string, extra map[string]any) map[string]any {
		t.Helper()
		m := map[string]any{"source": "src", "target": target, "create_target": true}
		for k, v := range extra {
			m[k] = v
		}
		return must(t, a, "POST", "/_replicate", m, 200)
	}
	checked := func(res map[string]any) float64 {
		t.Helper()
		if res["no_changes"] == true {
			return 0
		}
		return history0(t, res)["missing_checked"].(float64)
	}

	if n := checked(rep("tgt", nil)); n != 15 {
		t.Fatalf("first run checked %v revs", n)
	}
	for _, extra := range []map[string]any{nil, {"worker_processes": 2, "worker_batch_size": 7}} {
		if res := rep("tgt", extra); res["no_changes"] != true {
			t.Fatalf("%v did not resume the checkpoint: %v", extra, res)
		}
	}
	// each filter starts from the beginning, not from the full run's checkpoint
	for _, c := range []struct {
		extra   map[string]any
		checked float64
	}{
		{map[string]any{"doc_ids": []string{"d001", "d002"}}, 2},
		{map[string]any{"doc_ids": []string{"d003"}}, 1},
		// a local source matches the selector in the coordinator: only
		// the 7 odd docs' changes are checked
		{map[string]any{"selector": map[string]any{"type": "odd"}}, 7},
	} {
		if n := checked(rep("tgt", c.extra)); n != c.checked {
			t.Fatalf("%v checked %v revs, want %v", c.extra, n, c.checked)
		}
		// and resumes its own checkpoint the next time
		if res := rep("tgt", c.extra); res["no_changes"] != true {
			t.Fatalf("%v did not resume its checkpoint: %v", c.extra, res)
		}
	}
	// since_seq starts the session there, and its counters, as CouchDB's,
	// from its checkpoint's: 5 more the second time
	for i := range 2 {
		if n := checked(rep("tgt", map[string]any{"since_seq": seq})); n != float64(5*(i+1)) {
			t.Fatalf("since_seq run %d checked %v revs, want %d", i+1, n, 5*(i+1))
		}
	}
	if rows := must(t, a, "GET", "/tgt/_local_docs", nil, 200)["rows"].([]any); len(rows) != 5 {
		t.Fatalf("%d checkpoints on the target, want 5", len(rows))
	}

	// since_seq: only the changes after it
	res := rep("since", map[string]any{"since_seq": seq})
	got := leaves(t, a, "since")
	if len(got) != 5 || got["d010"] == "" || got["d014"] == "" || got["d009"] != "" {
		t.Fatalf("since_seq copied %v", got)
	}
	h := history0(t, res)
	if fmt.Sprint(h["start_last_seq"]) != fmt.Sprint(seq) || h["docs_written"] != 5.0 {
		t.Fatalf("history %v, since_seq %v", h, seq)
	}

	// the answer and the checkpoint are CouchDB's: a session's history
	// entry has all its fields, times in RFC 1123
	for _, k := range []string{"session_id", "start_time", "end_time", "start_last_seq", "end_last_seq", "recorded_seq",
		"missing_checked", "missing_found", "docs_read", "docs_written", "doc_write_failures"} {
		if _, ok := h[k]; !ok {
			t.Fatalf("history entry without %s: %v", k, h)
		}
	}
	for _, k := range []string{"start_time", "end_time"} {
		if _, err := time.Parse(http.TimeFormat, h[k].(string)); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if res["ok"] != true || res["session_id"] != h["session_id"] || res["replication_id_version"] != 4.0 ||
		fmt.Sprint(res["source_last_seq"]) != fmt.Sprint(h["recorded_seq"]) {
		t.Fatalf("answer %v", res)
	}
	ck := checkpoint(t, a, "since")
	if ck == nil || ck["session_id"] != h["session_id"] || fmt.Sprint(ck["source_last_seq"]) != fmt.Sprint(res["source_last_seq"]) ||
		fmt.Sprint(ck["history"].([]any)[0]) != fmt.Sprint(h) || !strings.HasPrefix(ck["_id"].(string), "_local/") {
		t.Fatalf("checkpoint %v, answer %v", ck, res)
	}
}
