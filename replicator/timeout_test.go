package replicator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
	"github.com/settee/settee/replicator"
)

// connection_timeout: a peer that sends nothing for that long fails the
// request (retried per retries_per_request), then the job, which crashes
// and retries with backoff; a peer that keeps sending, or a healthy idle
// source, is never cut.

// testConnTimeout is short for the tests, yet long enough that a healthy
// request through the proxies answers within it on a loaded machine.
const testConnTimeout = 300 * time.Millisecond

// timedOut waits for the job to crash with a timeout and checks how soon
// the first crash came and what the error names.
func timedOut(t *testing.T, fp *faultPair, id string, since time.Time, names string) map[string]any {
	t.Helper()
	d := crashing(t, fp.b, id, "timeout: no answer from ", 1)
	// a crash comes after retries_per_request+1 silent attempts and the
	// backoff between them; the rest is the scheduler and a loaded machine
	if took := time.Since(since); took > 8*time.Second {
		t.Fatalf("the first crash took %v with connection_timeout %v", took, testConnTimeout)
	}
	msg := fmt.Sprint(d["info"])
	if !strings.Contains(msg, names) || !strings.Contains(msg, "for "+testConnTimeout.String()) || strings.Contains(msg, testserver.AdminPassword) {
		t.Fatalf("the error should name %s and %v, without the password: %s", names, testConnTimeout, msg)
	}
	// it keeps retrying, with backoff
	return crashing(t, fp.b, id, "timeout: no answer from ", 2)
}

// TestTimeoutSilentPeer: a peer that takes requests and never answers,
// as the source or as the target, crashes the job with a timeout; once it
// answers the job completes.
func TestTimeoutSilentPeer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		onSrc bool
		// nodeDefault: the timeout comes from the node's configuration,
		// not from the replication
		nodeDefault bool
	}{
		{"source", true, false},
		{"target", false, false},
		{"target, node default", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fp := newFaultPair(t, 30, func(cfg *node.Config) {
				if c.nodeDefault {
					cfg.ReplicatorConnectionTimeout = testConnTimeout
				}
			})
			p, name := fp.pb, fp.pb.URL+"/tgt/"
			if c.onSrc {
				p, name = fp.pa, fp.pa.URL+"/src/"
			}
			p.set(&fault{kind: silent, match: "*"})
			doc := fp.repDoc(map[string]any{"connection_timeout": testConnTimeout.Milliseconds()})
			if c.nodeDefault {
				delete(doc, "connection_timeout")
			}
			start := time.Now()
			must(t, fp.b, "PUT", "/_replicator/silent", doc, 201)
			timedOut(t, fp, "silent", start, strings.TrimPrefix(name, "http://"))
			if n := ndocs(t, fp.b, "tgt"); n > 0 {
				t.Fatalf("%d docs written while a peer was silent", n)
			}
			p.set(nil)
			completed(t, fp.b, "silent")
			sameLeaves(t, fp.a, "src", fp.b, "tgt")
		})
	}
}

// TestTimeoutStall: a peer that stops in the middle of an answer (or
// never answers one it acted on) after some batches went through. The job
// crashes with a timeout; what the target did not acknowledge is not
// counted; once the peer is back the job resumes from its checkpoint, not
// from 0, and converges.
func TestTimeoutStall(t *testing.T) {
	t.Parallel()
	const total = 200
	cases := []struct {
		name  string
		onSrc bool
		f     fault
		// resumes: a checkpoint is taken before the fault (not so when
		// the fault is in the checkpoint itself)
		resumes bool
	}{
		{"bulk_get stalls mid-body", true, fault{kind: stall, match: "POST _bulk_get", after: 6, cut: 0.5}, true},
		// the first _changes is the pending count (limit=0); the feed is
		// the second, and each retry of it stalls halfway again
		{"changes stalls mid-body", true, fault{kind: stall, match: "GET _changes", after: 1, cut: 0.5}, true},
		{"bulk_docs never answered", false, fault{kind: silentAfter, match: "POST _bulk_docs", after: 6}, true},
		{"checkpoint never answered", false, fault{kind: silent, match: "PUT _local"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fp := newFaultPair(t, total)
			p := fp.pb
			if c.onSrc {
				p = fp.pa
			}
			f := c.f
			p.set(&f)
			start := time.Now()
			must(t, fp.b, "PUT", "/_replicator/stall", fp.repDoc(map[string]any{"connection_timeout": testConnTimeout.Milliseconds()}), 201)
			timedOut(t, fp, "stall", start, c.f.match[strings.Index(c.f.match, " ")+1:])

			// nothing unacknowledged is counted
			ck := checkpoint(t, fp.b, "tgt")
			rest := total
			if c.resumes {
				if ck == nil {
					t.Fatal("no checkpoint on the target")
				}
				if rest = changesSince(t, fp.a, "src", ck["source_last_seq"]); rest >= total {
					t.Fatalf("checkpoint at %v leaves all %d changes", ck["source_last_seq"], total)
				}
				noUnackedWrites(t, fp, ck)
			}

			p.set(nil)
			completed(t, fp.b, "stall")
			sameLeaves(t, fp.a, "src", fp.b, "tgt")
			if !c.resumes {
				return
			}
			// the last session started at a checkpoint, not at 0
			final := checkpoint(t, fp.b, "tgt")
			h := final["history"].([]any)
			last := h[0].(map[string]any)
			left := changesSince(t, fp.a, "src", last["start_last_seq"])
			if len(h) < 2 || left > rest || left == total {
				t.Fatalf("the last session started at %v (%d changes left; %d at the checkpoint read before): %v", last["start_last_seq"], left, rest, h)
			}
		})
	}
}

// TestTimeoutSlowButSteady: connection_timeout is a limit on silence, not
// on a request's length: a source whose every answer takes several
// timeouts to arrive, but never pauses for one, is not cut.
func TestTimeoutSlowButSteady(t *testing.T) {
	t.Parallel()
	const ct = 600 * time.Millisecond
	fp := newFaultPair(t, 30)
	// each answer takes 5/4 of the timeout, in pauses of a quarter
	fp.pa.set(&fault{kind: trickle, match: "*", pieces: 4, pause: ct / 4})
	must(t, fp.b, "PUT", "/_replicator/slow", fp.repDoc(map[string]any{"connection_timeout": ct.Milliseconds(),
		"checkpoint_interval": 60000}), 201)
	// every source request takes a second or so: more time than completed gives
	waitFor(t, 40*time.Second, "slow completed", func() bool {
		// until the scheduler has the doc, it has no error_count
		d := schedDoc(t, fp.b, "slow")
		if n, _ := d["error_count"].(float64); n != 0 {
			t.Fatalf("crashed: %v", d)
		}
		return d["state"] == "completed"
	})
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
}

// TestTimeoutIdleContinuous: a continuous job on a healthy idle source
// with a short connection_timeout stays running: its longpolls ask the
// source to answer well within the timeout. It still takes new docs.
func TestTimeoutIdleContinuous(t *testing.T) {
	t.Parallel()
	const ct = 600 * time.Millisecond
	fp := newFaultPair(t, 5)
	must(t, fp.b, "PUT", "/_replicator/idle", fp.repDoc(map[string]any{"continuous": true, "connection_timeout": ct.Milliseconds()}), 201)
	waitFor(t, 15*time.Second, "initial sync", func() bool { return ndocs(t, fp.b, "tgt") == 5 })

	polls := func() int {
		fp.pa.mu.Lock()
		defer fp.pa.mu.Unlock()
		n := 0
		for _, q := range fp.pa.changesQ {
			if q.Get("feed") != "longpoll" {
				continue
			}
			n++
			if ms, err := strconv.Atoi(q.Get("timeout")); err != nil || time.Duration(ms)*time.Millisecond >= ct {
				t.Errorf("a longpoll asks for timeout=%q, not below connection_timeout %v", q.Get("timeout"), ct)
			}
		}
		return n
	}
	before := polls()
	for end := time.Now().Add(6 * ct); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		d := schedDoc(t, fp.b, "idle")
		if n, _ := d["error_count"].(float64); d["state"] != "running" || n != 0 {
			t.Fatalf("an idle continuous job should stay running: %v", d)
		}
	}
	// the source answered empty longpolls all along
	if n := polls() - before; n < 3 {
		t.Fatalf("%d longpolls in %v", n, 6*ct)
	}
	must(t, fp.a, "PUT", "/src/late", `{"x":1}`, 201)
	waitFor(t, 15*time.Second, "late doc", func() bool { st, _ := call(t, fp.b, "GET", "/tgt/late", nil); return st == 200 })
	if d := schedDoc(t, fp.b, "idle"); d["state"] != "running" || d["error_count"] != float64(0) {
		t.Fatalf("after the new doc: %v", d)
	}
}

// TestConnectionTimeoutOption: connection_timeout is milliseconds, a
// positive integer (or a string of one, as CouchDB takes it); anything
// else is a bad request.
func TestConnectionTimeoutOption(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw   string // "" leaves it out
		want  time.Duration
		werr  bool
		wnote string
	}{
		{raw: "", want: 0},
		{raw: "null", want: 0},
		{raw: "30000", want: 30 * time.Second},
		{raw: "1", want: time.Millisecond},
		{raw: `"5000"`, want: 5 * time.Second},
		{raw: "86400000", want: 24 * time.Hour},
		{raw: "1000000000000", want: 24 * time.Hour, wnote: "capped at a day"},
		{raw: "99999999999999999999", want: 24 * time.Hour, wnote: "capped, not wrapped"},
		{raw: "0", werr: true},
		{raw: "-1", werr: true},
		{raw: "-99999999999999999999", werr: true},
		{raw: "1.5", werr: true},
		{raw: "3e4", werr: true},
		{raw: `"abc"`, werr: true},
		{raw: `""`, werr: true},
		{raw: "true", werr: true},
		{raw: "[30000]", werr: true},
		{raw: `{"ms":30000}`, werr: true},
	}
	for _, c := range cases {
		body := `{"source":"a","target":"b"`
		if c.raw != "" {
			body += `,"connection_timeout":` + c.raw
		}
		body += "}"
		r, err := replicator.ParseRep([]byte(body))
		switch {
		case c.werr && err == nil:
			t.Errorf("%s: accepted as %v", c.raw, r.ConnectionTimeout)
		case c.werr && !strings.Contains(err.Error(), "connection_timeout must be a positive integer"):
			t.Errorf("%s: error %q does not say what is wanted", c.raw, err)
		case !c.werr && err != nil:
			t.Errorf("%s: %v", c.raw, err)
		case !c.werr && r.ConnectionTimeout != c.want:
			t.Errorf("%s: %v, want %v %s", c.raw, r.ConnectionTimeout, c.want, c.wnote)
		}
	}

	// over HTTP: a 400 for POST /_replicate, a failed _replicator doc
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	st, out := call(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "x", "connection_timeout": -5})
	if st != 400 || out["error"] != "bad_request" || !strings.Contains(fmt.Sprint(out["reason"]), "connection_timeout") {
		t.Fatalf("bad connection_timeout: %d %v", st, out)
	}
	must(t, a, "PUT", "/_replicator/badct", map[string]any{"source": "src", "target": "x", "connection_timeout": "soon"}, 201)
	waitFor(t, 10*time.Second, "failed doc", func() bool {
		d := schedDoc(t, a, "badct")
		info, _ := d["info"].(map[string]any)
		return d["state"] == "failed" && strings.Contains(fmt.Sprint(info["error"]), "connection_timeout")
	})
	// a good one runs
	res := must(t, a, "POST", "/_replicate", map[string]any{"source": "src", "target": "x", "create_target": true, "connection_timeout": 5000}, 200)
	if res["ok"] != true {
		t.Fatalf("with connection_timeout: %v", res)
	}
}

// TestFeedHeldUnreadIsNotSilence: while the job holds a feed unread
// (backpressure: the page callback blocks), the source's silence is ours,
// so no timeout, however long; the feed is read in one request.
func TestFeedHeldUnreadIsNotSilence(t *testing.T) {
	t.Parallel()
	// many more rows than one read of the body takes
	s := &feedServer{n: 5000}
	e := feedEndpoint(t, s)
	e.Timeout, e.Retries = 200*time.Millisecond, 0
	rows, held := 0, false
	err := e.Feed(context.Background(), replicator.ChangesQuery{}, 100, func(p *replicator.ChangesPage) error {
		if !held {
			held = true
			time.Sleep(4 * e.Timeout)
		}
		rows += len(p.Rows)
		return nil
	})
	if err != nil || rows != s.n {
		t.Fatalf("%d rows of %d: %v", rows, s.n, err)
	}
	if len(s.feeds) != 1 {
		t.Fatalf("the feed was opened again (since %q): it timed out while held", s.feeds)
	}
}

// TestFeedSilentSource: a source that stops mid-feed fails it with a
// TimeoutError the caller can tell with errors.As.
func TestFeedSilentSource(t *testing.T) {
	t.Parallel()
	e := feedEndpoint(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("limit") == "0" {
			_, _ = io.WriteString(w, `{"results":[],"last_seq":"0","pending":3}`)
			return
		}
		_, _ = io.WriteString(w, `{"results":[{"seq":"1","id":"a","changes":[{"rev":"1-a"}]},`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	e.Timeout, e.Retries = 200*time.Millisecond, 1
	start := time.Now()
	err := e.Feed(context.Background(), replicator.ChangesQuery{}, 1, func(*replicator.ChangesPage) error { return nil })
	var te *replicator.TimeoutError
	if !errors.As(err, &te) || te.After != e.Timeout || !strings.Contains(err.Error(), "/db/_changes for 200ms") {
		t.Fatalf("want a timeout naming the request, got %v", err)
	}
	// two tries of 200 ms and a backoff between them; generous for load
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}
