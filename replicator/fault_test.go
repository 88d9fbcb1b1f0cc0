package replicator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// Faults are injected by a reverse proxy in front of a real settee: while
// a fault is set, the requests it names get garbage, a status, or a
// connection closed under them; everything else goes through.

// faultKind is what the proxy does to a request the fault names.
type faultKind int

const (
	passThrough faultKind = iota
	garbage               // answer 200 with the fault's body
	status                // answer the fault's status and body
	dropBefore            // close the connection without forwarding
	dropAfter             // forward, let the peer do the work, close before answering
	silent                // take the request, answer nothing
	silentAfter           // forward, let the peer do the work, answer nothing
	stall                 // forward, send the headers and the first cut of the body, then nothing
	trickle               // forward, send the headers and the body in pieces, pausing before each
)

type fault struct {
	kind  faultKind
	match string // "POST _bulk_docs", "GET _changes", "PUT doc", "*" ...
	body  string
	code  int
	after int       // the first `after` matching requests go through
	then  faultKind // what the hits after the first faulty one get (0: the same)
	cut   float64   // stall: the part of the body sent
	// trickle: the pieces of the body, and the pause before the headers
	// and each piece
	pieces int
	pause  time.Duration
}

// proxy is a reverse proxy in front of a settee server.
type proxy struct {
	*httptest.Server
	t  *testing.T
	rp *httputil.ReverseProxy

	mu     sync.Mutex
	fault  *fault
	seen   map[string]int // requests by key
	hit    int            // requests the fault matched
	docsIn int            // docs in _bulk_docs bodies answered 201 to the client
	puts   int            // multipart PUTs answered 201 to the client
	// changesQ are the queries of the _changes requests, in order.
	changesQ []url.Values
	// reqs are all the requests, in order.
	reqs []seenReq
	// more are faults besides fault, each applied to every request it
	// names that fault leaves alone (after, then and cut are ignored).
	more []*fault
	// quit ends the handlers that hold a request unanswered, so the
	// server can close even when the client never gives up.
	quit chan struct{}
}

// seenReq is a request the proxy saw.
type seenReq struct {
	key    string
	query  url.Values
	header http.Header
	size   int64  // the body's Content-Length
	body   []byte // the body of a POST _changes
}

// requests returns the requests seen with key k ("*": all).
func (p *proxy) requests(k string) []seenReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenReq
	for _, r := range p.reqs {
		if k == "*" || r.key == k {
			out = append(out, r)
		}
	}
	return out
}

// also adds a fault applied besides the one set.
func (p *proxy) also(f *fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.more = append(p.more, f)
}

func newProxy(t *testing.T, s *testserver.Server) *proxy {
	t.Helper()
	u, _ := url.Parse(s.URL)
	p := &proxy{t: t, rp: httputil.NewSingleHostReverseProxy(u), seen: map[string]int{}, quit: make(chan struct{})}
	p.rp.ErrorLog = log.New(io.Discard, "", 0)
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		close(p.quit)
		p.Close()
	})
	return p
}

// hold keeps a request unanswered until the client goes away.
func (p *proxy) hold(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-p.quit:
	}
}

// key names a request by method and what it asks for, without the db:
// "POST _bulk_docs", "GET _changes", "PUT _local", "PUT doc", "GET db".
func key(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) < 2:
		return r.Method + " db"
	case strings.HasPrefix(parts[1], "_"):
		return r.Method + " " + parts[1]
	}
	return r.Method + " doc"
}

func (p *proxy) set(f *fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.hit = f, 0
}

func (p *proxy) count(k string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[k]
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	k := key(r)
	var body []byte
	if k == "POST _changes" {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.mu.Lock()
	p.seen[k]++
	if k == "GET _changes" {
		p.changesQ = append(p.changesQ, r.URL.Query())
	}
	p.reqs = append(p.reqs, seenReq{key: k, query: r.URL.Query(), header: r.Header.Clone(), size: r.ContentLength, body: body})
	f := p.fault
	act := passThrough
	if f != nil && (f.match == "*" || f.match == k) {
		p.hit++
		switch {
		case p.hit == f.after+1 || p.hit > f.after && f.then == passThrough:
			act = f.kind
		case p.hit > f.after:
			act = f.then
		}
	}
	if act == passThrough {
		for _, m := range p.more {
			if m.match == "*" || m.match == k {
				act, f = m.kind, m
				break
			}
		}
	}
	p.mu.Unlock()
	switch act {
	case garbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, f.body)
		return
	case status:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.code)
		_, _ = io.WriteString(w, f.body)
		return
	case dropBefore:
		p.hang(w)
		return
	case dropAfter:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		p.hang(w)
		return
	case silent:
		_, _ = io.Copy(io.Discard, r.Body)
		p.hold(r)
		return
	case silentAfter:
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
		p.hold(r)
		return
	case stall:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		for h, v := range rec.Header() {
			w.Header()[h] = v
		}
		w.WriteHeader(rec.Code)
		b := rec.Body.Bytes()
		_, _ = w.Write(b[:int(float64(len(b))*f.cut)])
		w.(http.Flusher).Flush()
		p.hold(r)
		return
	case trickle:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		time.Sleep(f.pause)
		for h, v := range rec.Header() {
			w.Header()[h] = v
		}
		w.WriteHeader(rec.Code)
		w.(http.Flusher).Flush()
		b := rec.Body.Bytes()
		for i := range f.pieces {
			time.Sleep(f.pause)
			_, _ = w.Write(b[len(b)*i/f.pieces : len(b)*(i+1)/f.pieces])
			w.(http.Flusher).Flush()
		}
		return
	}
	if k == "POST _bulk_docs" || k == "PUT doc" {
		// count what the client is told was written
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		if rec.Code == 201 {
			p.mu.Lock()
			if k == "PUT doc" {
				p.puts++
			} else {
				var bd struct{ Docs []json.RawMessage }
				_ = json.Unmarshal(body, &bd)
				p.docsIn += len(bd.Docs)
			}
			p.mu.Unlock()
		}
		for h, v := range rec.Header() {
			w.Header()[h] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	p.rp.ServeHTTP(w, r)
}

// hang closes the client's connection without an answer.
func (p *proxy) hang(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		p.t.Error("proxy: cannot hijack")
		return
	}
	c, _, err := hj.Hijack()
	if err == nil {
		c.Close()
	}
}

// dbURL is the proxy's URL for db with the admin's credentials.
func (p *proxy) dbURL(db string) string {
	u, _ := url.Parse(p.URL)
	u.User = url.UserPassword(testserver.AdminUser, testserver.AdminPassword)
	u.Path = "/" + db
	return u.String()
}

// fastRetry makes crashed jobs retry within a test's time.
func fastRetry(c *node.Config) { c.ReplicatorRetryBase = 200 * time.Millisecond }

// crashing waits until the doc's job is crashing with an error that
// contains want, and has crashed at least n times.
func crashing(t *testing.T, s *testserver.Server, id, want string, n int) map[string]any {
	t.Helper()
	var d map[string]any
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		d = schedDoc(t, s, id)
		count, _ := d["error_count"].(float64)
		info, _ := d["info"].(map[string]any)
		if d["state"] == "crashing" && int(count) >= n && info != nil && strings.Contains(fmt.Sprint(info["error"]), want) {
			t.Logf("crashing %v times: %v", count, info["error"])
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("want crashing with %q at least %d times, got %v", want, n, d)
	return nil
}

// completed waits until a one-shot _replicator doc is completed and
// returns its recorded stats.
func completed(t *testing.T, s *testserver.Server, id string) map[string]any {
	t.Helper()
	var d map[string]any
	waitFor(t, 12*time.Second, id+" completed", func() bool {
		d = must(t, s, "GET", "/_replicator/"+id, nil, 200)
		return d["_replication_state"] == "completed"
	})
	st, _ := d["_replication_stats"].(map[string]any)
	return st
}

// checkpoint reads the replication's checkpoint doc on a server.
func checkpoint(t *testing.T, s *testserver.Server, db string) map[string]any {
	t.Helper()
	all := must(t, s, "GET", "/"+db+"/_local_docs", nil, 200)
	rows := all["rows"].([]any)
	if len(rows) != 1 {
		return nil
	}
	return must(t, s, "GET", "/"+db+"/"+rows[0].(map[string]any)["id"].(string), nil, 200)
}

// changesSince counts the source's changes after seq.
func changesSince(t *testing.T, s *testserver.Server, db string, seq any) int {
	t.Helper()
	b, _ := json.Marshal(seq)
	q := strings.Trim(string(b), `"`)
	out := must(t, s, "GET", "/"+db+"/_changes?since="+url.QueryEscape(q), nil, 200)
	return len(out["results"].([]any))
}

// faultPair is a source and a target server, each behind a proxy; jobs
// run on the target's node.
type faultPair struct {
	a, b   *testserver.Server
	pa, pb *proxy
}

func newFaultPair(t *testing.T, ndocs int, opts ...testserver.Option) *faultPair {
	t.Helper()
	fp := &faultPair{a: testserver.Start(t), b: testserver.Start(t, append([]testserver.Option{fastRetry}, opts...)...)}
	fp.pa, fp.pb = newProxy(t, fp.a), newProxy(t, fp.b)
	must(t, fp.a, "PUT", "/src", nil, 201)
	loadDocs(t, fp.a, "src", 0, ndocs, "")
	return fp
}

// repDoc is a one-shot replication through both proxies.
func (fp *faultPair) repDoc(extra map[string]any) map[string]any {
	m := map[string]any{"source": fp.pa.dbURL("src"), "target": fp.pb.dbURL("tgt"), "create_target": true,
		"retries_per_request": 1, "worker_processes": 1, "worker_batch_size": 10, "checkpoint_interval": 100}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestFaultGarbage: a peer answering garbage (not JSON, or JSON of the
// wrong shape) to _changes, _revs_diff or _bulk_get crashes the job with
// an error naming the request; once the peer answers properly the job
// resumes and converges.
func TestFaultGarbage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		onSrc  bool
		match  string
		body   string
		werror string
	}{
		{"changes not json", true, "GET _changes", "<html>502 Bad Gateway</html>", "bad _changes answer"},
		{"changes wrong shape", true, "GET _changes", `{"results":{"id":"x"}}`, "bad _changes answer"},
		{"changes without results", true, "GET _changes", `{"last_seq":"99"}`, "bad _changes answer"},
		{"revs_diff not json", false, "POST _revs_diff", "oops", "bad _revs_diff answer"},
		{"revs_diff wrong shape", false, "POST _revs_diff", `[{"missing":["1-a"]}]`, "bad _revs_diff answer"},
		{"bulk_get not json", true, "POST _bulk_get", "\x00\x01garbage", "bad _bulk_get answer"},
		{"bulk_get wrong shape", true, "POST _bulk_get", `{"results":[{"id":"d000","docs":{"ok":1}}]}`, "bad _bulk_get answer"},
		{"bulk_get answers nothing", true, "POST _bulk_get", `{"results":[]}`, "bad _bulk_get answer"},
		{"bulk_docs not json", false, "POST _bulk_docs", "<html>502 Bad Gateway</html>", "bad _bulk_docs answer"},
		{"bulk_docs wrong shape", false, "POST _bulk_docs", `{"ok":true}`, "bad _bulk_docs answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fp := newFaultPair(t, 30)
			p := fp.pb
			if c.onSrc {
				p = fp.pa
			}
			p.set(&fault{kind: garbage, match: c.match, body: c.body})
			must(t, fp.b, "PUT", "/_replicator/g", fp.repDoc(nil), 201)
			crashing(t, fp.b, "g", c.werror, 2)
			if n := ndocs(t, fp.b, "tgt"); n > 0 {
				t.Fatalf("%d docs written while the peer answered garbage", n)
			}
			p.set(nil)
			st := completed(t, fp.b, "g")
			sameLeaves(t, fp.a, "src", fp.b, "tgt")
			if st["docs_written"].(float64) != 30 {
				t.Fatalf("stats %v", st)
			}
		})
	}
}

// TestFaultDropMidBatch: a peer that closes the connection in the middle
// of a batch, after some batches went through. The job crashes and
// retries with backoff; a batch the target wrote but never acknowledged
// is not counted; once the fault is gone the job resumes from its last
// checkpoint, reads only the rest, and converges.
func TestFaultDropMidBatch(t *testing.T) {
	t.Parallel()
	const total = 200
	cases := []struct {
		name  string
		onSrc bool
		f     fault
	}{
		// the target writes the batch, the answer never comes
		// (once: after that the target is cut off before writing)
		{"bulk_docs answer lost", false, fault{kind: dropAfter, match: "POST _bulk_docs", after: 6, then: dropBefore}},
		// the source's connection breaks while the batch is fetched
		{"bulk_get cut", true, fault{kind: dropBefore, match: "POST _bulk_get", after: 6}},
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
			must(t, fp.b, "PUT", "/_replicator/drop", fp.repDoc(nil), 201)
			d := crashing(t, fp.b, "drop", "EOF", 1)
			if !strings.Contains(fmt.Sprint(d["info"]), c.f.match[strings.Index(c.f.match, " ")+1:]) {
				t.Fatalf("the error does not name the request: %v", d["info"])
			}
			// it keeps retrying, and backs off: a second crash comes later
			crashing(t, fp.b, "drop", "EOF", 2)

			// the checkpoint on both ends is past the first batches
			ck := checkpoint(t, fp.b, "tgt")
			if ck == nil {
				t.Fatal("no checkpoint on the target")
			}
			if sck := checkpoint(t, fp.a, "src"); sck == nil || fmt.Sprint(sck["source_last_seq"]) != fmt.Sprint(ck["source_last_seq"]) {
				t.Fatalf("checkpoints differ: %v vs %v", sck, ck)
			}
			rest := changesSince(t, fp.a, "src", ck["source_last_seq"])
			if rest >= total || rest == 0 {
				t.Fatalf("checkpoint at %v leaves %d of %d changes", ck["source_last_seq"], rest, total)
			}
			noUnackedWrites(t, fp, ck)

			p.set(nil)
			st := completed(t, fp.b, "drop")
			sameLeaves(t, fp.a, "src", fp.b, "tgt")
			// resumed from the last checkpoint, not from zero: the last
			// session checked exactly the changes after where it started,
			// and read them less any batch the target already had
			final := checkpoint(t, fp.b, "tgt")
			h := final["history"].([]any)
			last := h[0].(map[string]any)
			left := changesSince(t, fp.a, "src", last["start_last_seq"])
			if len(h) < 2 || left > rest || left == total {
				t.Fatalf("the last session started at %v (%d changes left; %d at the checkpoint read before): %v", last["start_last_seq"], left, rest, h)
			}
			// the counters are cumulative: the last session's own are
			// what it adds to the session before
			prev := h[1].(map[string]any)
			checked := st["revisions_checked"].(float64) - prev["missing_checked"].(float64)
			read := st["docs_read"].(float64) - prev["docs_read"].(float64)
			if checked != float64(left) || read > float64(left) || read < float64(left-10) {
				t.Fatalf("after resume %v (the session before: %v), want the %d changes after the checkpoint", st, prev, left)
			}
		})
	}
}

// TestFaultTransientDrop: one dropped connection is retried within the
// request; the job does not even crash.
func TestFaultTransientDrop(t *testing.T) {
	t.Parallel()
	fp := newFaultPair(t, 50)
	fp.pb.set(&fault{kind: dropAfter, match: "POST _bulk_docs", after: 2})
	go func() {
		// the fault lasts for one request
		for fp.pb.count("POST _bulk_docs") < 3 {
			time.Sleep(5 * time.Millisecond)
		}
		fp.pb.set(nil)
	}()
	must(t, fp.b, "PUT", "/_replicator/t", fp.repDoc(map[string]any{"retries_per_request": 3}), 201)
	completed(t, fp.b, "t")
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
	if d := schedDoc(t, fp.b, "t"); d["error_count"] != float64(0) {
		t.Fatalf("crashed: %v", d)
	}
}

// TestFaultUnauthorized: a 401 from either end (a password that stopped
// working, or a wrong one) crashes the job with the peer's reason; it
// resumes once the credentials work again.
func TestFaultUnauthorized(t *testing.T) {
	t.Parallel()
	for _, onSrc := range []bool{true, false} {
		t.Run(map[bool]string{true: "source", false: "target"}[onSrc], func(t *testing.T) {
			t.Parallel()
			fp := newFaultPair(t, 20)
			p := fp.pb
			if onSrc {
				p = fp.pa
			}
			p.set(&fault{kind: status, match: "*", code: 401, body: `{"error":"unauthorized","reason":"Name or password is incorrect."}`})
			must(t, fp.b, "PUT", "/_replicator/auth", fp.repDoc(nil), 201)
			crashing(t, fp.b, "auth", "401 unauthorized: Name or password is incorrect.", 2)
			p.set(nil)
			completed(t, fp.b, "auth")
			sameLeaves(t, fp.a, "src", fp.b, "tgt")
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		a := testserver.Start(t, fastRetry)
		must(t, a, "PUT", "/src", nil, 201)
		u, _ := url.Parse(a.URL)
		u.User, u.Path = url.UserPassword(testserver.AdminUser, "wrong"), "/src"
		must(t, a, "PUT", "/_replicator/pw", map[string]any{"source": u.String(), "target": "tgt", "create_target": true}, 201)
		d := crashing(t, a, "pw", "401", 1)
		if strings.Contains(fmt.Sprint(d), "wrong") {
			t.Fatalf("the password shows: %v", d)
		}
	})
}

// TestFaultUnreachableThenBack: a target that is not listening, then is.
func TestFaultUnreachableThenBack(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t, fastRetry), testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	tgt := "http://" + testserver.AdminUser + ":" + testserver.AdminPassword + "@" + addr + "/tgt"
	must(t, a, "PUT", "/_replicator/far", map[string]any{"source": "src", "target": tgt, "create_target": true, "retries_per_request": 0}, 201)
	crashing(t, a, "far", "connection refused", 2)
	// the target comes up at that address
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	u, _ := url.Parse(b.URL)
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(u)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	completed(t, a, "far")
	sameLeaves(t, a, "src", b, "tgt")
}

// TestFaultMissingTarget: without create_target a missing target db is
// CouchDB's db_not_found, retried until the db exists.
func TestFaultMissingTarget(t *testing.T) {
	t.Parallel()
	fp := newFaultPair(t, 20)
	must(t, fp.b, "PUT", "/_replicator/nodb", fp.repDoc(map[string]any{"create_target": false}), 201)
	d := crashing(t, fp.b, "nodb", "db_not_found: could not open", 2)
	if !strings.Contains(fmt.Sprint(d["info"]), strings.TrimPrefix(fp.pb.URL, "http://")+"/tgt/") || strings.Contains(fmt.Sprint(d["info"]), testserver.AdminPassword) {
		t.Fatalf("the error names the db (and no password): %v", d["info"])
	}
	must(t, fp.b, "PUT", "/tgt", nil, 201)
	completed(t, fp.b, "nodb")
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
}

// noUnackedWrites checks that nothing unacknowledged is counted: what the
// checkpoint's history records as written never exceeds what the target
// answered 201 to.
func noUnackedWrites(t *testing.T, fp *faultPair, ck map[string]any) {
	t.Helper()
	// the newest session's counters count every session (as CouchDB's)
	recorded := ck["history"].([]any)[0].(map[string]any)["docs_written"].(float64)
	fp.pb.mu.Lock()
	acked := fp.pb.docsIn
	fp.pb.mu.Unlock()
	if recorded > float64(acked) {
		t.Fatalf("checkpoints count %v docs written, the target acknowledged %d", recorded, acked)
	}
}
