package replicator

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/settee/settee/proto"
)

func mustParse(t *testing.T, body string) *Rep {
	t.Helper()
	r, err := ParseRep([]byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return r
}

// TestReplicationID: the id covers what decides which changes go where
// (the endpoints without their passwords, the headers but not
// Authorization, the filter, since_seq), as CouchDB's v4 ids, so a restart
// or a run with other tuning resumes the checkpoint; continuous and
// create_target are suffixes of the full id only.
func TestReplicationID(t *testing.T) {
	const uuid = "0123456789abcdef0123456789abcdef"
	base := `{"source":"http://u:pw@h:5984/a","target":"b"`
	id := func(rest string) string { return mustParse(t, base+rest+"}").BaseID(uuid) }
	want := id("")
	for _, same := range []string{
		``,
		`,"continuous":true`,
		`,"create_target":true`,
		`,"worker_processes":2,"worker_batch_size":7,"checkpoint_interval":5,"connection_timeout":1000,"retries_per_request":1`,
	} {
		if got := id(same); got != want {
			t.Errorf("%s changed the id", same)
		}
	}
	for _, src := range []string{
		`{"source":"http://u:other@h:5984/a","target":"b"}`, // another password
		`{"source":"http://u:pw@h/a/","target":"b"}`,        // the default port, a trailing slash
		`{"source":{"url":"http://h:5984/a","auth":{"basic":{"username":"u","password":"pw"}}},"target":"b"}`,
		`{"source":{"url":"http://u:pw@h:5984/a","headers":{"Authorization":"Basic eA=="}},"target":"b"}`,
	} {
		if got := mustParse(t, src).BaseID(uuid); got != want {
			t.Errorf("%s changed the id", src)
		}
	}
	seen := map[string]string{want: "base"}
	for _, other := range []string{
		`{"source":"http://v:pw@h:5984/a","target":"b"}`,
		`{"source":"http://u:pw@h:5985/a","target":"b"}`,
		`{"source":"http://u:pw@g:5984/a","target":"b"}`,
		`{"source":"http://u:pw@h:5984/c","target":"b"}`,
		`{"source":"http://u:pw@h:5984/a","target":"c"}`,
		`{"source":{"url":"http://u:pw@h:5984/a","headers":{"X-Tenant":"1"}},"target":"b"}`,
		base + `,"doc_ids":["x"]}`,
		base + `,"doc_ids":["x","y"]}`,
		base + `,"selector":{"type":"a"}}`,
		base + `,"selector":{"type":"b"}}`,
		base + `,"since_seq":"5-g1"}`,
	} {
		got := mustParse(t, other).BaseID(uuid)
		if prev, ok := seen[got]; ok {
			t.Errorf("%s has the id of %s", other, prev)
		}
		seen[got] = other
	}
	// a selector's spacing and key order do not matter
	if id(`,"selector":{"a":1,"b":{"$gt":2}}`) != id(`,"selector":{ "b":{"$gt":2}, "a":1 }`) {
		t.Error("selector formatting changed the id")
	}
	if mustParse(t, base+"}").BaseID("another server") == want {
		t.Error("the server uuid is not in the id")
	}
	full := mustParse(t, base+`,"continuous":true,"create_target":true}`).FullID(uuid)
	if full != want+"+continuous+create_target" {
		t.Errorf("full id %s", full)
	}
}

// TestRetryBackoff: a crashed _replicator job waits RetryBase, doubling
// per consecutive crash up to RetryMax; reaching running does not start
// the count again, a crash after HealthThreshold of running does.
func TestRetryBackoff(t *testing.T) {
	s := &Scheduler{cfg: Config{RetryBase: time.Second, RetryMax: 10 * time.Second, HealthThreshold: time.Minute},
		byID: map[string]*entry{}, byDoc: map[string]*entry{}}
	e := &entry{repID: "r", docID: "d", rep: mustParse(t, `{"source":"a","target":"b"}`), stats: &pb.RepStats{}}
	s.byID["r"], s.byDoc["d"] = e, e
	crash := func(ranFor time.Duration) time.Duration {
		t.Helper()
		e.gen++
		e.runSince = time.Now().Add(-ranFor)
		s.onEvent(e, e.gen, JobEvent{Kind: "running"})
		before := time.Now()
		s.onEvent(e, e.gen, JobEvent{Kind: "failed", Err: errors.New("peer down")})
		if e.state != "crashing" || e.errMsg != "peer down" {
			t.Fatalf("state %s %q", e.state, e.errMsg)
		}
		return e.nextStart.Sub(before).Round(time.Second)
	}
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		if got := crash(time.Second); got != want*time.Second || e.errCount != i+1 {
			t.Fatalf("crash %d: retry in %v (error_count %d), want %v", i+1, got, e.errCount, want*time.Second)
		}
	}
	if got := crash(2 * time.Minute); got != time.Second || e.errCount != 1 {
		t.Fatalf("after a healthy run: retry in %v, error_count %d", got, e.errCount)
	}
	info := s.docJSON(e)
	if !strings.Contains(info["info"].(map[string]any)["error"].(string), "peer down") || info["error_count"] != 1 {
		t.Fatalf("scheduler doc %v", info)
	}
}

// TestRepDefaults: the options a request leaves out take CouchDB's
// defaults.
func TestRepDefaults(t *testing.T) {
	r := mustParse(t, `{"source":"a","target":"http://h/b"}`)
	if r.WorkerProcesses != 4 || r.WorkerBatchSize != 500 || r.CheckpointMillis != 30000 || r.Continuous || r.CreateTarget {
		t.Fatalf("defaults %+v", r)
	}
	if e := NewHTTPEndpoint(r.Target); e.Retries != 4 || e.Timeout != 30*time.Second {
		t.Fatalf("endpoint retries %d, timeout %v", e.Retries, e.Timeout)
	}
	if !r.Source.Local || r.Target.Local {
		t.Fatalf("a bare name is local, a URL is not: %+v %+v", r.Source, r.Target)
	}
}
