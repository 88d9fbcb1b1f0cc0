package node_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/settee/settee/internal/testserver"
)

// libraryGoroutines are goroutines of libraries that outlive any one node
// by design, started once per process: they are not the node's to stop.
var libraryGoroutines = []goleak.Option{
	// protoactor's dead-letter log throttle: a message sent to an actor
	// that has stopped (a reply to a request that gave up, a tick at
	// shutdown) starts a timer goroutine that resets the throttle after
	// its interval and ends by itself; the library offers no way to stop
	// it sooner
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
}

// Nothing a node started outlives its Close: after a workload that touches
// every long-lived part (shards, feeds, the replicator, compaction, the
// auto-compactor), Close returns with no goroutine of settee's left.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, append(libraryGoroutines, goleak.IgnoreCurrent())...)
	s := testserver.Start(t)
	exercise(t, s)
	s.Stop(t)
}

// A node closed while its compactions walk and reclaim closes as soon as
// they notice, leaving nothing behind. Before, a compaction batch sent
// just as its shard stopped was dropped unanswered and held Close for
// the batch's 5-minute timeout (CI's ~300 s stalls).
func TestCloseDuringCompaction(t *testing.T) {
	defer goleak.VerifyNone(t, append(libraryGoroutines, goleak.IgnoreCurrent())...)
	defer http.DefaultClient.CloseIdleConnections()
	for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond} {
		s := testserver.Start(t)
		for _, db := range []string{"c1", "c2"} {
			r := s.Do(t, "PUT", "/"+db+"?q=4", nil)
			if b := readAll(t, r); r.StatusCode != 201 {
				t.Fatalf("PUT /%s: %d %s", db, r.StatusCode, b)
			}
			for round := range 3 {
				var b strings.Builder
				b.WriteString(`{"docs":[`)
				for i := range 2000 {
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `{"_id":"d%d","round":%d,"pad":"%s"}`, i+round*500, round, strings.Repeat("x", 1000))
				}
				b.WriteString(`]}`)
				r := s.Do(t, "POST", "/"+db+"/_bulk_docs", b.String())
				if b := readAll(t, r); r.StatusCode != 201 {
					t.Fatalf("_bulk_docs: %d %.200s", r.StatusCode, b)
				}
			}
			req := s.NewRequest(t, "POST", "/"+db+"/_compact", "{}")
			req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 202 {
				t.Fatalf("_compact: %d %s", resp.StatusCode, readAll(t, resp))
			}
			resp.Body.Close()
		}
		time.Sleep(delay)
		// not a speed figure: a watchdog for the hang, far above any close
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Stop(t)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("Close during compaction (after %v) still waits after 2 minutes", delay)
		}
	}
}

// exercise runs a short workload against s.
func exercise(t *testing.T, s *testserver.Server) {
	t.Helper()
	expect := func(resp *http.Response, want ...int) {
		t.Helper()
		defer resp.Body.Close()
		for _, w := range want {
			if resp.StatusCode == w {
				return
			}
		}
		t.Fatalf("%s %s: status %d, want %v", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want)
	}
	for _, db := range []string{"leak-a", "leak-b"} {
		expect(s.Do(t, "PUT", "/"+db, nil), 201)
	}
	for i := range 20 {
		expect(s.Do(t, "PUT", fmt.Sprintf("/leak-a/doc%d", i), `{"n":1}`), 201)
	}
	expect(s.Do(t, "GET", "/leak-a/_changes?feed=longpoll&since=now&timeout=100", nil), 200)
	expect(s.Do(t, "GET", "/_db_updates?feed=longpoll&since=now&timeout=100", nil), 200)
	expect(s.Do(t, "GET", "/leak-a/_all_docs?include_docs=true", nil), 200)
	req := s.NewRequest(t, "POST", "/_replicate", `{"source":"leak-a","target":"leak-b"}`)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expect(resp, 200)
	// a continuous one still running at Close
	expect(s.Do(t, "PUT", "/_replicator/leak-cont", `{"source":"leak-a","target":"leak-b","continuous":true}`), 201)
	req = s.NewRequest(t, "POST", "/leak-a/_compact", "{}")
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	expect(resp, 202)
	resp = s.Do(t, "GET", "/_active_tasks", nil)
	if b := readAll(t, resp); !strings.HasPrefix(b, "[") {
		t.Fatalf("_active_tasks: %s", b)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
