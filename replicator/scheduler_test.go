package replicator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// TestStoppedJobCheckpoints: a job stopped from outside (its node shutting
// down, its doc deleted) checkpoints what it wrote, as CouchDB's does, so
// the next run resumes there rather than up to checkpoint_interval back.
func TestStoppedJobCheckpoints(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "")
	// no checkpoint for 10 minutes: only stopping writes one
	must(t, a, "PUT", "/_replicator/cont", map[string]any{"source": "src", "target": "tgt", "create_target": true,
		"continuous": true, "checkpoint_interval": 600000}, 201)
	waitFor(t, 10*time.Second, "sync", func() bool { return ndocs(t, a, "tgt") == 20 })
	if ck := checkpoint(t, a, "tgt"); ck != nil {
		t.Fatalf("a checkpoint before the interval: %v", ck)
	}

	a.Restart(t)
	ck := checkpoint(t, a, "tgt")
	if ck == nil {
		t.Fatal("no checkpoint after the node stopped")
	}
	if n := changesSince(t, a, "src", ck["source_last_seq"]); n != 0 {
		t.Fatalf("the shutdown checkpoint leaves %d changes", n)
	}
	if sck := checkpoint(t, a, "src"); sck == nil || sck["session_id"] != ck["session_id"] {
		t.Fatalf("source checkpoint %v, target's %v", sck, ck)
	}

	waitFor(t, 10*time.Second, "running after restart", func() bool { return schedDoc(t, a, "cont")["state"] == "running" })
	loadDocs(t, a, "src", 20, 5, "")
	waitFor(t, 10*time.Second, "new docs", func() bool { return ndocs(t, a, "tgt") == 25 })
	d := must(t, a, "GET", "/_replicator/cont", nil, 200)
	must(t, a, "DELETE", "/_replicator/cont?rev="+d["_rev"].(string), nil, 200)
	var last map[string]any
	waitFor(t, 10*time.Second, "checkpoint of the deleted doc's job", func() bool {
		ck := checkpoint(t, a, "tgt")
		if ck == nil || changesSince(t, a, "src", ck["source_last_seq"]) != 0 {
			return false
		}
		last = ck["history"].([]any)[0].(map[string]any)
		return true
	})
	// the session after the restart started from the shutdown checkpoint
	// and checked only the 5 new docs: its counters, which count every
	// session as CouchDB's, are the first session's 20 and those 5
	if fmt.Sprint(last["start_last_seq"]) != fmt.Sprint(ck["source_last_seq"]) || last["missing_checked"] != 25.0 || last["docs_written"] != 25.0 {
		t.Fatalf("last session %v; shutdown checkpoint at %v", last, ck["source_last_seq"])
	}
}

// TestMaxJobsRotation: with max_jobs 1, one of three continuous jobs runs
// and the others wait as pending; every interval the running one makes
// way, so each gets its turn and every target converges, new docs too.
func TestMaxJobsRotation(t *testing.T) {
	t.Parallel()
	a := testserver.Start(t, func(c *node.Config) {
		c.ReplicatorMaxJobs = 1
		c.ReplicatorInterval = 200 * time.Millisecond
	})
	const jobs = 3
	for i := range jobs {
		must(t, a, "PUT", fmt.Sprintf("/s%d", i), nil, 201)
		loadDocs(t, a, fmt.Sprintf("s%d", i), 0, 5, "")
		must(t, a, "PUT", fmt.Sprintf("/_replicator/r%d", i), map[string]any{"source": fmt.Sprintf("s%d", i),
			"target": fmt.Sprintf("t%d", i), "create_target": true, "continuous": true}, 201)
	}
	ran := map[string]bool{}
	converged := func(n int) func() bool {
		return func() bool {
			states := map[string]int{}
			for _, d := range must(t, a, "GET", "/_scheduler/docs", nil, 200)["docs"].([]any) {
				d := d.(map[string]any)
				states[d["state"].(string)]++
				if d["state"] == "running" {
					ran[d["doc_id"].(string)] = true
				}
			}
			if states["running"]+states["initializing"] > 1 {
				t.Fatalf("more than max_jobs run: %v", states)
			}
			for i := range jobs {
				if ndocs(t, a, fmt.Sprintf("t%d", i)) != n {
					return false
				}
			}
			return len(ran) == jobs
		}
	}
	waitFor(t, 30*time.Second, "every job ran in turn and its target converged", converged(5))
	pending := 0
	for _, j := range must(t, a, "GET", "/_scheduler/jobs", nil, 200)["jobs"].([]any) {
		if j.(map[string]any)["state"] == "pending" {
			pending++
		}
	}
	if pending != jobs-1 {
		t.Fatalf("%d jobs pending, want %d", pending, jobs-1)
	}
	for i := range jobs {
		loadDocs(t, a, fmt.Sprintf("s%d", i), 5, 3, "")
	}
	clear(ran)
	waitFor(t, 30*time.Second, "new docs reach every target", converged(8))
}

// TestInitializingState: a job whose start waits on its peer (here a
// source that does not answer GET /db) is initializing, then completes
// once the peer answers.
func TestInitializingState(t *testing.T) {
	t.Parallel()
	fp := newFaultPair(t, 10)
	fp.pa.set(&fault{kind: silent, match: "GET db"})
	must(t, fp.b, "PUT", "/_replicator/init", fp.repDoc(map[string]any{"connection_timeout": 2000}), 201)
	waitFor(t, 5*time.Second, "initializing", func() bool { return schedDoc(t, fp.b, "init")["state"] == "initializing" })
	if d := schedDoc(t, fp.b, "init"); d["error_count"] != 0.0 {
		t.Fatalf("scheduler doc %v", d)
	}
	fp.pa.set(nil)
	completed(t, fp.b, "init")
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
}
