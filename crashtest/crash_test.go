package crashtest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/settee/settee/internal/testbin"
	"github.com/settee/settee/internal/testport"
)

const (
	adminUser = "admin"
	adminPass = "pw"
	dbName    = "crash"
)

// ---------------------------------------------------------------------------
// building the binary

// bin builds ./cmd/settee once per test binary run (CRASHTEST_RACE: with
// the race detector).
var bin = testbin.Builder{Race: os.Getenv("CRASHTEST_RACE") != ""}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	bin.Remove()
	os.Exit(code)
}

// setteeBinary is the built binary's path.
func setteeBinary(t *testing.T) string { return bin.Settee(t) }

// ---------------------------------------------------------------------------
// the server process

type server struct {
	t       *testing.T
	bin     string
	dataDir string
	logDir  string
	addr    string // host:port, kept across restarts
	starts  int
	extra   []string // more serve flags (cluster tests)

	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when cmd.Wait returns
	waitErr error         // valid after exited is closed
}

func newServer(t *testing.T) *server {
	t.Helper()
	base := t.TempDir()
	s := &server{t: t, bin: setteeBinary(t), dataDir: filepath.Join(base, "data"), logDir: base}
	t.Cleanup(func() {
		if s.running() {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			s.dumpLogs()
		}
	})
	return s
}

func (s *server) baseURL() string { return "http://" + s.addr }

func (s *server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start launches the binary and waits for GET /_up. The first start picks
// a free port (another one if it collides); later starts reuse it.
func (s *server) start() {
	s.t.Helper()
	first := s.addr == ""
	if first {
		s.addr = testport.Addr(s.t)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		err := s.launch()
		if err == nil {
			return
		}
		lastErr = err
		if s.running() {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if !strings.Contains(s.logTail(4096), "address already in use") {
			break
		}
		if first {
			s.addr = testport.Addr(s.t)
		} else {
			time.Sleep(200 * time.Millisecond) // someone holds our port; wait for it
		}
	}
	s.t.Fatalf("settee did not start (start #%d, %s, data %s): %v\n--- log %s ---\n%s",
		s.starts, s.addr, s.dataDir, lastErr, s.logPath, s.logTail(8192))
}

func (s *server) launch() error {
	s.starts++
	s.logPath = filepath.Join(s.logDir, fmt.Sprintf("settee-%02d.log", s.starts))
	logf, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	args := append([]string{"serve", "--data-dir", s.dataDir, "--http", s.addr,
		"--admin", adminUser + ":" + adminPass, "--memory-mb", "64"}, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=0")
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited, s.waitErr = cmd, make(chan struct{}), nil
	go func(exited chan struct{}) {
		err := cmd.Wait()
		s.waitErr = err
		close(exited)
	}(s.exited)
	return s.waitUp(60 * time.Second) // generous: a loaded machine or a -race build starts slowly
}

func (s *server) waitUp(timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("process exited before /_up answered: %v", s.waitErr)
		default:
		}
		resp, err := c.Get(s.baseURL() + "/_up")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("GET /_up not 200 after %v (last: %s)", timeout, last)
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatalf("kill settee: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("settee still running 10s after SIGKILL")
	}
}

func (s *server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (s *server) dumpLogs() {
	for i := 1; i <= s.starts; i++ {
		p := filepath.Join(s.logDir, fmt.Sprintf("settee-%02d.log", i))
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = append([]byte("...\n"), b[len(b)-6000:]...)
		}
		s.t.Logf("--- settee log, start #%d (%s) ---\n%s", i, p, b)
	}
}

// ---------------------------------------------------------------------------
// HTTP

type client struct {
	base string
	hc   *http.Client
}

func newClient(base string) *client {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// do sends a request as the admin and reads the whole reply; err is a
// transport error (including a truncated body).
func (c *client) do(method, path string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(adminUser, adminPass)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, b, fmt.Errorf("read reply: %w", err)
	}
	return resp.StatusCode, b, nil
}

// mustJSON sends a request that must succeed with want and decodes the reply.
func (c *client) mustJSON(t *testing.T, method, path string, body []byte, want int, out any) {
	t.Helper()
	st, b, err := c.do(method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if st != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, clip(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: corrupt reply: %v: %s", method, path, err, clip(b))
		}
	}
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// the model: what the server acknowledged

type docState struct {
	rev string // latest acknowledged rev (or the rev seen after a restart)
	val int64  // body "v" written with rev
}

type body struct {
	ID  string `json:"_id,omitempty"`
	Rev string `json:"_rev,omitempty"`
	W   int    `json:"w"`
	V   int64  `json:"v"`
	Pad string `json:"pad,omitempty"`
}

func revGen(rev string) (int, string, bool) {
	g, h, ok := strings.Cut(rev, "-")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(g)
	if err != nil || n < 1 || len(h) == 0 {
		return 0, "", false
	}
	return n, h, true
}

// nextGen is the generation an edit of rev gets (1 for a new doc).
func nextGen(rev string) int {
	g, _, _ := revGen(rev)
	return g + 1
}

var valSeq atomic.Int64 // unique body values

// ackCount counts acknowledged writes (tests do not run in parallel).
var ackCount atomic.Int64

// waitFirstAck waits until the load has had a write acknowledged after
// since, so the signal lands in a running load even on a slow machine.
func waitFirstAck(t *testing.T, since int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for ackCount.Load() == since {
		if time.Now().After(deadline) {
			t.Fatalf("no write acknowledged within %v of starting the load", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const padChars = "abcdefghijklmnopqrstuvwxyz0123456789"

// writer owns a set of docs: only it updates them, so it always knows the
// current rev and never conflicts.
type writer struct {
	id    int
	rng   *rand.Rand
	docs  map[string]*docState
	owned []string
	next  int // new doc counter

	// stats, per cycle
	ackNew, ackUpd  int
	singles, bulks  int
	lateAcks        int // acks read after SIGKILL was sent
	transportErrors int
	unexpected      []string
}

func newWriter(id int, seed uint64) *writer {
	return &writer{id: id, rng: rand.New(rand.NewPCG(seed, uint64(id))), docs: map[string]*docState{}}
}

func (w *writer) resetStats() {
	w.ackNew, w.ackUpd, w.singles, w.bulks, w.lateAcks, w.transportErrors = 0, 0, 0, 0, 0, 0
	w.unexpected = nil
}

func (w *writer) newBody(id, rev string) ([]byte, int64) {
	v := valSeq.Add(1)
	n := w.rng.IntN(200)
	if w.rng.IntN(5) == 0 { // some bodies above badger's 1 KB value threshold
		n = 1100 + w.rng.IntN(1000)
	}
	pad := make([]byte, n)
	for i := range pad {
		pad[i] = padChars[(int(v)+i)%len(padChars)]
	}
	b, _ := json.Marshal(body{ID: id, Rev: rev, W: w.id, V: v, Pad: string(pad)})
	return b, v
}

func (w *writer) newID(cycle int) string {
	w.next++
	return fmt.Sprintf("c%d-w%02d-%06d", cycle, w.id, w.next)
}

func (w *writer) ack(id, rev string, v int64, killed bool) {
	st := w.docs[id]
	if st == nil {
		st = &docState{}
		w.docs[id] = st
		w.owned = append(w.owned, id)
		w.ackNew++
	} else {
		w.ackUpd++
	}
	st.rev, st.val = rev, v
	ackCount.Add(1)
	if killed {
		w.lateAcks++
	}
}

// failure records a reply or error; it returns true when the writer should
// stop (the server is gone).
func (w *writer) failure(what string, st int, b []byte, err error, killed *atomic.Bool) bool {
	if err != nil {
		if killed.Load() {
			w.transportErrors++
			return true
		}
		w.unexpected = append(w.unexpected, fmt.Sprintf("%s: transport error before the kill: %v", what, err))
		return true
	}
	w.unexpected = append(w.unexpected, fmt.Sprintf("%s: status %d: %s", what, st, clip(b)))
	return false
}

// run writes until stop is closed or the server goes away.
func (w *writer) run(c *client, cycle int, stop <-chan struct{}, killed *atomic.Bool) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		var done bool
		if w.rng.IntN(10) < 4 {
			done = w.single(c, cycle, killed)
		} else {
			done = w.bulk(c, cycle, killed)
		}
		if done || len(w.unexpected) > 20 {
			return
		}
	}
}

func (w *writer) single(c *client, cycle int, killed *atomic.Bool) bool {
	w.singles++
	var id, rev string
	if len(w.owned) > 0 && w.rng.IntN(2) == 0 {
		id = w.owned[w.rng.IntN(len(w.owned))]
		rev = w.docs[id].rev
	} else {
		id = w.newID(cycle)
	}
	b, v := w.newBody("", rev)
	st, reply, err := c.do(http.MethodPut, "/"+dbName+"/"+url.PathEscape(id), b)
	if err != nil || (st != 201 && st != 202) {
		return w.failure("PUT "+id, st, reply, err, killed)
	}
	var r struct {
		OK  bool   `json:"ok"`
		ID  string `json:"id"`
		Rev string `json:"rev"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || !r.OK || r.ID != id {
		w.unexpected = append(w.unexpected, fmt.Sprintf("PUT %s: %d with a bad reply (%v): %s", id, st, err, clip(reply)))
		return false
	}
	if g, _, ok := revGen(r.Rev); !ok || g != nextGen(rev) {
		w.unexpected = append(w.unexpected, fmt.Sprintf("PUT %s (rev %q): acknowledged rev %q", id, rev, r.Rev))
		return false
	}
	w.ack(id, r.Rev, v, killed.Load())
	return false
}

func (w *writer) bulk(c *client, cycle int, killed *atomic.Bool) bool {
	w.bulks++
	const n = 50
	type item struct {
		id, rev string
		v       int64
	}
	items := make([]item, 0, n)
	seen := map[string]bool{}
	var buf bytes.Buffer
	buf.WriteString(`{"docs":[`)
	for i := 0; i < n; i++ {
		var it item
		if len(w.owned) > 0 && w.rng.IntN(10) < 3 {
			id := w.owned[w.rng.IntN(len(w.owned))]
			if seen[id] { // one edit per doc per batch
				id = ""
			}
			if id != "" {
				it.id, it.rev = id, w.docs[id].rev
			}
		}
		if it.id == "" {
			it.id = w.newID(cycle)
		}
		seen[it.id] = true
		var b []byte
		b, it.v = w.newBody(it.id, it.rev)
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
		items = append(items, it)
	}
	buf.WriteString(`]}`)
	st, reply, err := c.do(http.MethodPost, "/"+dbName+"/_bulk_docs", buf.Bytes())
	if err != nil || (st != 201 && st != 202) {
		return w.failure("POST _bulk_docs", st, reply, err, killed)
	}
	var rows []struct {
		ID     string `json:"id"`
		Rev    string `json:"rev"`
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(reply, &rows); err != nil || len(rows) != len(items) {
		w.unexpected = append(w.unexpected, fmt.Sprintf("_bulk_docs: %d with a bad reply (%v, %d rows for %d docs): %s",
			st, err, len(rows), len(items), clip(reply)))
		return false
	}
	late := killed.Load()
	for i, r := range rows {
		it := items[i]
		if r.ID != it.id {
			w.unexpected = append(w.unexpected, fmt.Sprintf("_bulk_docs row %d: id %q, sent %q", i, r.ID, it.id))
			continue
		}
		if r.Error != "" {
			w.unexpected = append(w.unexpected, fmt.Sprintf("_bulk_docs %s (rev %q): %s: %s", it.id, it.rev, r.Error, r.Reason))
			continue
		}
		if g, _, ok := revGen(r.Rev); !ok || g != nextGen(it.rev) {
			w.unexpected = append(w.unexpected, fmt.Sprintf("_bulk_docs %s (rev %q): acknowledged rev %q", it.id, it.rev, r.Rev))
			continue
		}
		w.ack(it.id, r.Rev, it.v, late)
	}
	return false
}

// ---------------------------------------------------------------------------
// checking the database against the model

type verifyStats struct {
	docs, acked int // docs in the database, docs in the model
	later       int // current rev is a descendant of the acknowledged one
	extra       int // docs present that were never acknowledged
	changesRows int
}

type allDocsReply struct {
	TotalRows *int64 `json:"total_rows"`
	Rows      []struct {
		ID    string `json:"id"`
		Key   string `json:"key"`
		Value struct {
			Rev     string `json:"rev"`
			Deleted bool   `json:"deleted"`
		} `json:"value"`
		Doc   *body  `json:"doc"`
		Error string `json:"error"`
	} `json:"rows"`
}

type changesReply struct {
	Results []struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
		Changes []struct {
			Rev string `json:"rev"`
		} `json:"changes"`
	} `json:"results"`
	LastSeq json.RawMessage `json:"last_seq"`
}

// verify checks every acknowledged doc and the database's own consistency,
// then moves the model to what the server holds (so the next load updates
// from current revs) and adopts docs that committed without an ack.
func verify(t *testing.T, c *client, writers []*writer, label string) verifyStats {
	t.Helper()
	var vs verifyStats
	model := map[string]*docState{}
	owner := map[string]*writer{}
	for _, w := range writers {
		for id, st := range w.docs {
			model[id], owner[id] = st, w
		}
	}
	vs.acked = len(model)

	var info struct {
		DocCount    *int64 `json:"doc_count"`
		DocDelCount int64  `json:"doc_del_count"`
	}
	c.mustJSON(t, http.MethodGet, "/"+dbName, nil, 200, &info)
	if info.DocCount == nil {
		t.Fatalf("%s: GET /%s has no doc_count", label, dbName)
	}

	var ad allDocsReply
	c.mustJSON(t, http.MethodGet, "/"+dbName+"/_all_docs?include_docs=true", nil, 200, &ad)
	if ad.TotalRows == nil {
		t.Fatalf("%s: _all_docs has no total_rows", label)
	}
	vs.docs = len(ad.Rows)
	if int64(len(ad.Rows)) != *ad.TotalRows || *ad.TotalRows != *info.DocCount {
		t.Errorf("%s: counts disagree: doc_count %d, _all_docs total_rows %d, _all_docs rows %d",
			label, *info.DocCount, *ad.TotalRows, len(ad.Rows))
	}
	if info.DocDelCount != 0 {
		t.Errorf("%s: doc_del_count %d, nothing was deleted", label, info.DocDelCount)
	}
	type cur struct {
		rev string
		val int64
	}
	onDisk := make(map[string]cur, len(ad.Rows))
	prev := ""
	for i, r := range ad.Rows {
		if r.Error != "" || r.Doc == nil {
			t.Errorf("%s: _all_docs row %d (%q): error %q, doc %v", label, i, r.ID, r.Error, r.Doc != nil)
			continue
		}
		if i > 0 && r.ID <= prev {
			t.Errorf("%s: _all_docs out of order or duplicated: %q after %q", label, r.ID, prev)
		}
		prev = r.ID
		if r.Key != r.ID || r.Doc.ID != r.ID || r.Doc.Rev != r.Value.Rev || r.Value.Deleted {
			t.Errorf("%s: _all_docs row %q inconsistent: key %q, doc._id %q, value.rev %q, doc._rev %q, deleted %v",
				label, r.ID, r.Key, r.Doc.ID, r.Value.Rev, r.Doc.Rev, r.Value.Deleted)
		}
		onDisk[r.ID] = cur{r.Value.Rev, r.Doc.V}
	}

	var lost, rolledBack, corrupt []string
	for id, st := range model {
		sv, ok := onDisk[id]
		if !ok {
			lost = append(lost, id+"@"+st.rev)
			continue
		}
		if sv.rev == st.rev {
			if sv.val != st.val {
				corrupt = append(corrupt, fmt.Sprintf("%s@%s: body v=%d, wrote v=%d", id, st.rev, sv.val, st.val))
			}
			continue
		}
		ag, ah, _ := revGen(st.rev)
		sg, _, ok := revGen(sv.rev)
		if !ok || sg <= ag {
			rolledBack = append(rolledBack, fmt.Sprintf("%s: acknowledged %s, server has %s", id, st.rev, sv.rev))
			continue
		}
		// a later edit committed without its ack: the acked rev must be an
		// ancestor, and its body must still be readable
		vs.later++
		var d struct {
			Revisions struct {
				Start int      `json:"start"`
				IDs   []string `json:"ids"`
			} `json:"_revisions"`
		}
		c.mustJSON(t, http.MethodGet, "/"+dbName+"/"+url.PathEscape(id)+"?revs=true", nil, 200, &d)
		k := d.Revisions.Start - ag
		if k < 0 || k >= len(d.Revisions.IDs) || d.Revisions.IDs[k] != ah {
			rolledBack = append(rolledBack, fmt.Sprintf("%s: acknowledged %s is not an ancestor of %s (_revisions %+v)",
				id, st.rev, sv.rev, d.Revisions))
			continue
		}
		var old body
		c.mustJSON(t, http.MethodGet, "/"+dbName+"/"+url.PathEscape(id)+"?rev="+st.rev, nil, 200, &old)
		if old.V != st.val || old.Rev != st.rev {
			corrupt = append(corrupt, fmt.Sprintf("%s?rev=%s: _rev %q v=%d, wrote v=%d", id, st.rev, old.Rev, old.V, st.val))
		}
	}
	report := func(what string, l []string) {
		if len(l) == 0 {
			return
		}
		show := l
		if len(show) > 15 {
			show = show[:15]
		}
		t.Errorf("%s: %d acknowledged writes %s (of %d acknowledged docs), e.g.:\n  %s",
			label, len(l), what, len(model), strings.Join(show, "\n  "))
	}
	report("LOST after restart", lost)
	report("ROLLED BACK (older or unrelated rev)", rolledBack)
	report("with WRONG BODY", corrupt)

	var ch changesReply
	c.mustJSON(t, http.MethodGet, "/"+dbName+"/_changes", nil, 200, &ch)
	vs.changesRows = len(ch.Results)
	inChanges := make(map[string]int, len(ch.Results))
	var dupes, badRev []string
	for _, r := range ch.Results {
		inChanges[r.ID]++
		if inChanges[r.ID] == 2 {
			dupes = append(dupes, r.ID)
		}
		if sv, ok := onDisk[r.ID]; !ok || len(r.Changes) != 1 || r.Changes[0].Rev != sv.rev || r.Deleted {
			badRev = append(badRev, fmt.Sprintf("%s: changes %+v deleted=%v, _all_docs rev %q", r.ID, r.Changes, r.Deleted, sv.rev))
		}
	}
	var missing []string
	for id := range model {
		if inChanges[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d acknowledged docs missing from _changes, e.g. %v", label, len(missing), missing[:min(10, len(missing))])
	}
	if len(dupes) > 0 {
		t.Errorf("%s: %d ids listed more than once in _changes, e.g. %v", label, len(dupes), dupes[:min(10, len(dupes))])
	}
	if len(badRev) > 0 {
		t.Errorf("%s: %d _changes rows disagree with _all_docs, e.g.:\n  %s", label, len(badRev), strings.Join(badRev[:min(10, len(badRev))], "\n  "))
	}
	if int64(len(ch.Results)) != *info.DocCount {
		t.Errorf("%s: _changes has %d rows, doc_count is %d (no deletes, each doc once)", label, len(ch.Results), *info.DocCount)
	}
	if len(ch.LastSeq) == 0 {
		t.Errorf("%s: _changes has no last_seq", label)
	}

	// move the model to the server's state; adopt unacknowledged docs
	byID := map[int]*writer{}
	for _, w := range writers {
		byID[w.id] = w
	}
	for id, sv := range onDisk {
		if st, ok := model[id]; ok {
			st.rev, st.val = sv.rev, sv.val
			continue
		}
		vs.extra++
		var cy, wid, n int
		if _, err := fmt.Sscanf(id, "c%d-w%d-%d", &cy, &wid, &n); err == nil && byID[wid] != nil {
			w := byID[wid]
			w.docs[id] = &docState{rev: sv.rev, val: sv.val}
			w.owned = append(w.owned, id)
		}
	}
	return vs
}

// writeAfterRestart checks the restarted server takes new writes: a new doc
// and an update of an existing one.
func writeAfterRestart(t *testing.T, c *client, w *writer, cycle int) {
	t.Helper()
	id := fmt.Sprintf("c%d-w%02d-after-restart", cycle, w.id)
	b, v := w.newBody("", "")
	var r struct {
		OK  bool   `json:"ok"`
		Rev string `json:"rev"`
	}
	c.mustJSON(t, http.MethodPut, "/"+dbName+"/"+id, b, 201, &r)
	if !r.OK || !strings.HasPrefix(r.Rev, "1-") {
		t.Fatalf("PUT %s after restart: reply %+v", id, r)
	}
	w.docs[id] = &docState{rev: r.Rev, val: v}
	w.owned = append(w.owned, id)
	var got body
	c.mustJSON(t, http.MethodGet, "/"+dbName+"/"+id, nil, 200, &got)
	if got.Rev != r.Rev || got.V != v {
		t.Fatalf("GET %s after restart: _rev %q v=%d, wrote %q v=%d", id, got.Rev, got.V, r.Rev, v)
	}
	for _, old := range w.owned {
		if old == id {
			continue
		}
		st := w.docs[old]
		b, v := w.newBody("", st.rev)
		c.mustJSON(t, http.MethodPut, "/"+dbName+"/"+url.PathEscape(old), b, 201, &r)
		st.rev, st.val = r.Rev, v
		break
	}
}

// load runs writers until stop is closed; it returns when all have returned.
func load(c *client, writers []*writer, cycle int, stop <-chan struct{}, killed *atomic.Bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, w := range writers {
		w.resetStats()
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(c, cycle, stop, killed)
		}()
	}
	return &wg
}

func checkUnexpected(t *testing.T, writers []*writer, label string) {
	t.Helper()
	var all []string
	for _, w := range writers {
		for _, u := range w.unexpected {
			all = append(all, fmt.Sprintf("writer %d: %s", w.id, u))
		}
	}
	if len(all) > 0 {
		t.Errorf("%s: %d unexpected replies during the load, e.g.:\n  %s", label, len(all), strings.Join(all[:min(15, len(all))], "\n  "))
	}
}

func createDB(t *testing.T, c *client) {
	t.Helper()
	var r struct {
		OK bool `json:"ok"`
	}
	c.mustJSON(t, http.MethodPut, "/"+dbName, nil, 201, &r)
	if !r.OK {
		t.Fatalf("PUT /%s: not ok", dbName)
	}
}

// ---------------------------------------------------------------------------
// tests

func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real settee process; skipped in -short mode")
	}
	const (
		cycles   = 3
		nWriters = 8
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1<<62))
	setteeBinary(t)
	begin := time.Now() // after the build

	s := newServer(t)
	s.start()
	c := newClient(s.baseURL())
	createDB(t, c)

	writers := make([]*writer, nWriters)
	for i := range writers {
		writers[i] = newWriter(i, seed)
	}
	totalAcked, totalChecked := 0, 0
	for cycle := 1; cycle <= cycles; cycle++ {
		label := fmt.Sprintf("cycle %d", cycle)
		stop := make(chan struct{})
		var killed atomic.Bool
		loadStart := time.Now()
		acks0 := ackCount.Load()
		wg := load(c, writers, cycle, stop, &killed)
		waitFirstAck(t, acks0, 30*time.Second)
		killAfter := 300*time.Millisecond + time.Duration(rng.Int64N(int64(2000*time.Millisecond)))
		time.Sleep(killAfter) // the random moment of the crash
		killed.Store(true)
		s.kill()
		close(stop)
		wg.Wait()
		c.close()
		loadDur := time.Since(loadStart)

		var acks, news, upds, singles, bulks, late, terr int
		for _, w := range writers {
			news += w.ackNew
			upds += w.ackUpd
			singles += w.singles
			bulks += w.bulks
			late += w.lateAcks
			terr += w.transportErrors
		}
		acks = news + upds
		totalAcked += acks
		checkUnexpected(t, writers, label)

		restartAt := time.Now()
		s.start()
		restartDur := time.Since(restartAt)
		c = newClient(s.baseURL())
		v0 := time.Now()
		vs := verify(t, c, writers, label)
		totalChecked += vs.acked
		t.Logf("%s: SIGKILL %v after the first ack (load %v): %d writes acknowledged (%d new docs, %d updates; %d single PUTs, %d _bulk_docs sent; %d acks read after the kill; %d writers cut off); restart took %v; %d acknowledged docs checked in %v: %d docs in the db, %d at a later rev than acknowledged, %d committed without ack, %d _changes rows",
			label, killAfter.Round(time.Millisecond), loadDur.Round(time.Millisecond), acks, news, upds, singles, bulks, late, terr,
			restartDur.Round(time.Millisecond), vs.acked, time.Since(v0).Round(time.Millisecond), vs.docs, vs.later, vs.extra, vs.changesRows)
		if t.Failed() {
			t.Fatalf("%s: acknowledged writes did not survive SIGKILL (seed %d); data dir %s", label, seed, s.dataDir)
		}
		writeAfterRestart(t, c, writers[0], cycle)
	}
	// the last post-restart writes are in the model too: check them once more
	vs := verify(t, c, writers, "final")
	t.Logf("summary: %d kill/restart cycles, %d writes acknowledged, %d doc checks (%d docs at the end), %v",
		cycles, totalAcked, totalChecked+vs.acked, vs.docs, time.Since(begin).Round(time.Millisecond))
	c.close()
}

func TestSIGTERMGraceful(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real settee process; skipped in -short mode")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s := newServer(t)
	s.start()
	c := newClient(s.baseURL())
	createDB(t, c)

	// a known set first, then a load that SIGTERM interrupts
	writers := []*writer{newWriter(0, seed), newWriter(1, seed), newWriter(2, seed), newWriter(3, seed)}
	var never atomic.Bool
	for i := 0; i < 3; i++ {
		writers[0].bulk(c, 0, &never)
	}
	for i := 0; i < 20; i++ {
		writers[0].single(c, 0, &never)
	}
	checkUnexpected(t, writers, "before SIGTERM")
	if t.Failed() {
		t.FailNow()
	}
	stop := make(chan struct{})
	var signalled atomic.Bool
	acks0 := ackCount.Load()
	wg := load(c, writers[1:], 1, stop, &signalled)
	waitFirstAck(t, acks0, 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	signalled.Store(true)
	sent := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		close(stop)
		t.Fatalf("settee still running 10s after SIGTERM\n--- log ---\n%s", s.logTail(4096))
	}
	took := time.Since(sent)
	close(stop)
	wg.Wait()
	c.close()
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("settee exited with status %d after SIGTERM (%v), want 0\n--- log ---\n%s", code, s.waitErr, s.logTail(4096))
	}
	// during a graceful shutdown the only acceptable failures are the ones
	// of requests the closed listener refused
	checkUnexpected(t, writers, "SIGTERM load")
	acks := 0
	for _, w := range writers {
		acks += len(w.docs)
	}

	s.start()
	c = newClient(s.baseURL())
	vs := verify(t, c, writers, "after SIGTERM")
	if vs.later != 0 || vs.extra != 0 {
		t.Errorf("after a graceful shutdown every committed write was answered, yet %d docs are at a later rev than acknowledged and %d docs were never acknowledged", vs.later, vs.extra)
	}
	writeAfterRestart(t, c, writers[0], 1)
	t.Logf("SIGTERM: exit 0 after %v; %d docs acknowledged, %d checked after restart (%d in the db)",
		took.Round(time.Millisecond), acks, vs.acked, vs.docs)
	c.close()
}
