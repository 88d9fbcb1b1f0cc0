package couchrepl_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// TestRestartMidway restarts settee in the middle of a replication with
// CouchDB, on each side of it: while CouchDB's replicator pulls from it,
// and while its own replicator pulls from CouchDB (the job must then
// resume from its checkpoint, not from the start). Both end with the
// same docs as the source. Then CouchDB is killed (SIGKILL) and started
// again on its data, on each side too: while its replicator pulls from
// settee, and while settee's pulls from it.
func TestRestartMidway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	cs := testcouch.Start(t, "")
	ss := testserver.Start(t)
	settee, couch := setteeServer(ss), couchServer(cs)
	sc := fill(t, settee, "src", docs)
	cc := fill(t, couch, "src", docs)
	count := func(s server, db string) float64 { return docCount(t, s, db) }
	restart := func() {
		t.Helper()
		ss.Restart(t) // down for as long as a node takes to close and open
	}

	t.Run("settee restarts while CouchDB pulls from it", func(t *testing.T) {
		couch.must(t, "PUT", "/_replicator/pull", map[string]any{"source": settee.dbURL("src"), "target": couch.dbURL("pulled"),
			"create_target": true, "continuous": true, "checkpoint_interval": 500}, 201)
		src := count(settee, "src")
		waitFor(t, 2*time.Minute, "the replication to be under way", func() bool { return count(couch, "pulled") >= 300 })
		if n := count(couch, "pulled"); n >= src {
			t.Logf("the replication was done (%v docs) before the restart", n)
		}
		restart()
		// CouchDB's job crashes on its checkpoint's _ensure_full_commit
		// to the source that is down, and its scheduler starts it again
		// after a backoff (about 40 s here)
		waitFor(t, 3*time.Minute, "the replication to catch up after the restart", func() bool { return caughtUp(t, settee, "src", couch, "pulled") })
		same(t, settee, "src", couch, "pulled", sc)
		rev := couch.must(t, "GET", "/_replicator/pull", nil)["_rev"].(string)
		couch.must(t, "DELETE", "/_replicator/pull?rev="+rev, nil, 200)
	})

	t.Run("settee restarts while it pulls from CouchDB", func(t *testing.T) {
		settee.must(t, "PUT", "/_replicator/pull", map[string]any{"source": couch.dbURL("src"), "target": settee.dbURL("spulled"),
			"create_target": true, "continuous": true, "checkpoint_interval": 200, "worker_batch_size": 100}, 201)
		src := count(couch, "src")
		var before float64
		waitFor(t, 2*time.Minute, "a checkpoint under way", func() bool {
			before = count(settee, "spulled")
			st, out := settee.do(t, "GET", "/spulled/_local_docs", "", nil)
			var ld struct{ Rows []any }
			return st == 200 && json.Unmarshal(out, &ld) == nil && len(ld.Rows) == 1 && before >= 200
		})
		if before >= src {
			t.Skipf("the replication was done (%v docs) before the restart could come", before)
		}
		restart()
		waitFor(t, 3*time.Minute, "the job to catch up after the restart", func() bool { return caughtUp(t, couch, "src", settee, "spulled") })
		same(t, couch, "src", settee, "spulled", cc)
		// a second session, which started where a checkpoint of the
		// first left it
		var ck map[string]any
		waitFor(t, 30*time.Second, "the second session's checkpoint", func() bool {
			ck = nil
			var ld struct{ Rows []struct{ ID string } }
			if json.Unmarshal(settee.getRaw(t, "/spulled/_local_docs"), &ld) != nil || len(ld.Rows) != 1 {
				return false
			}
			ck = settee.must(t, "GET", "/spulled/"+ld.Rows[0].ID, nil)
			h, _ := ck["history"].([]any)
			return len(h) >= 2
		})
		h := ck["history"].([]any)
		last := h[0].(map[string]any)
		if fmt.Sprint(last["start_last_seq"]) == "0" {
			t.Fatalf("the job started again from 0 after the restart: %v", h)
		}
		rev := settee.must(t, "GET", "/_replicator/pull", nil)["_rev"].(string)
		settee.must(t, "DELETE", "/_replicator/pull?rev="+rev, nil, 200)
	})

	// checkpoint is the replication checkpoint on db, its only _local doc
	checkpoint := func(t *testing.T, s server, db string) map[string]any {
		var ld struct{ Rows []struct{ ID string } }
		st, out := s.do(t, "GET", "/"+db+"/_local_docs", "", nil)
		if st != 200 || json.Unmarshal(out, &ld) != nil || len(ld.Rows) != 1 {
			return nil
		}
		return s.must(t, "GET", "/"+db+"/"+ld.Rows[0].ID, nil)
	}
	// underway waits for db to have min docs and a checkpoint, and skips t
	// when the replication was done before a restart could come; it
	// answers the checkpoint's session
	underway := func(t *testing.T, s server, db string, min, src float64) string {
		t.Helper()
		var n float64
		var ck map[string]any
		waitFor(t, 2*time.Minute, "a checkpoint under way on "+db, func() bool {
			n = count(s, db)
			ck = checkpoint(t, s, db)
			return ck != nil && n >= min
		})
		if n >= src {
			t.Skipf("the replication was done (%v docs) before the restart could come", n)
		}
		return fmt.Sprint(ck["session_id"])
	}
	// resumed waits for the checkpoint on db to name a session other than
	// before, and fails when that session started from 0. A job may also
	// ride through a restart of its peer, when its requests' retries span
	// it: then the checkpoint keeps naming the first session.
	resumed := func(t *testing.T, s server, db, before string, mustRestart bool) {
		t.Helper()
		var ck map[string]any
		// called once the docs are all there: a new session has
		// checkpointed by then, or does within its checkpoint_interval
		deadline := time.Now().Add(10 * time.Second)
		for {
			if ck = checkpoint(t, s, db); ck != nil && fmt.Sprint(ck["session_id"]) != before {
				break
			}
			if time.Now().After(deadline) {
				if mustRestart {
					t.Fatalf("no second session's checkpoint on %s: %v", db, ck)
				}
				t.Logf("the job's session %s outlived the restart", before)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		h, _ := ck["history"].([]any)
		if len(h) < 2 {
			t.Fatalf("a new session's checkpoint on %s without the first one's history: %v", db, ck)
		}
		if last := h[0].(map[string]any); fmt.Sprint(last["start_last_seq"]) == "0" {
			t.Fatalf("the replication started again from 0 after the restart: %v", h)
		}
	}

	// CouchDB restarts on each side of a replication: the _replicator
	// doc's job on CouchDB starts again with the node, from its
	// checkpoint; settee's job fails on the source that is gone and is
	// retried with the scheduler's backoff, or rides through
	for _, tc := range []struct {
		name        string
		on, from    server // the replicator's server, the source's
		c           *corpus
		target      string
		mustRestart bool
	}{
		{"CouchDB restarts while it pulls from settee", couch, settee, sc, "cpulled", true},
		{"CouchDB restarts while settee pulls from it", settee, couch, cc, "cspulled", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.on.must(t, "PUT", "/_replicator/cpull", map[string]any{"source": tc.from.dbURL("src"), "target": tc.on.dbURL(tc.target),
				"create_target": true, "continuous": true, "checkpoint_interval": 200, "worker_batch_size": 50}, 201)
			src := count(tc.from, "src")
			before := underway(t, tc.on, tc.target, 200, src)
			cs.Restart(t)
			waitFor(t, 3*time.Minute, "the replication to catch up after CouchDB's restart", func() bool { return caughtUp(t, tc.from, "src", tc.on, tc.target) })
			same(t, tc.from, "src", tc.on, tc.target, tc.c)
			resumed(t, tc.on, tc.target, before, tc.mustRestart)
			rev := tc.on.must(t, "GET", "/_replicator/cpull", nil)["_rev"].(string)
			tc.on.must(t, "DELETE", "/_replicator/cpull?rev="+rev, nil, 200)
		})
	}
}
