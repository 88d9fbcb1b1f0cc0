package couchrepl_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// server is one end of a replication, settee or CouchDB, spoken to over
// HTTP as the admin.
type server struct {
	name, url, user, pw string
}

func setteeServer(s *testserver.Server) server {
	return server{name: "settee", url: s.URL, user: testserver.AdminUser, pw: testserver.AdminPassword}
}

func couchServer(s *testcouch.Server) server {
	return server{name: "CouchDB", url: s.URL, user: s.User, pw: s.Password}
}

// dbURL is db's URL with the admin's credentials, as a replication's
// source or target.
func (s server) dbURL(db string) string {
	u, _ := url.Parse(s.url)
	u.User = url.UserPassword(s.user, s.pw)
	return u.String() + "/" + url.PathEscape(db)
}

var client = &http.Client{Timeout: 5 * time.Minute}

func (s server) do(t *testing.T, method, path, ctype string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(s.user, s.pw)
	if ctype == "" {
		ctype = "application/json"
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", s.name, method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", s.name, method, path, err)
	}
	return resp.StatusCode, out
}

// must sends body (nil, a string, []byte or a value to marshal) and wants
// one of the statuses (any 2xx when none is given); it returns the answer
// decoded.
func (s server) must(t *testing.T, method, path string, body any, want ...int) map[string]any {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	st, out := s.do(t, method, path, "", b)
	if len(want) == 0 && st/100 != 2 || len(want) > 0 && !slices.Contains(want, st) {
		t.Fatalf("%s: %s %s: %d %s, want %v", s.name, method, path, st, out, want)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m
}

func (s server) getRaw(t *testing.T, path string) []byte {
	t.Helper()
	st, out := s.do(t, "GET", path, "", nil)
	if st != 200 {
		t.Fatalf("%s: GET %s: %d %s", s.name, path, st, out)
	}
	return out
}

// waitFor polls f until it reports true.
func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// corpus is what fill wrote: the attachments' bytes by doc and name, to
// check on the far side of a replication.
type corpus struct {
	atts map[string]map[string][]byte
}

// fill writes what a replication must carry to db on s: n plain docs,
// docs edited many times, conflicts (a deleted one among them),
// deletions, attachments of every size from 1 KB to 10 MB, inline,
// uploaded on their own and in a multipart/related PUT, binary and text
// (which CouchDB and settee store gzipped), a design doc with a filter,
// and a _local doc, which must not travel.
func fill(t *testing.T, s server, db string, n int) *corpus {
	t.Helper()
	c := &corpus{atts: map[string]map[string][]byte{}}
	s.must(t, "PUT", "/"+db, nil, 201)
	r := rand.New(rand.NewPCG(uint64(n), 18))
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`{"_id":"doc-%05d","n":%d,"type":%q,"text":"%s","f":%d.5,"nested":{"a":[%d,"x",null]}}`,
			i, i, []string{"even", "odd"}[i%2], []string{"plain", "caf\u00e9 \u4e2d\u6587 \U0001F600", "a\\\"b\\n"}[i%3], i, i%300))
		if len(docs) == 500 || i == n-1 {
			s.must(t, "POST", "/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, 201)
			docs = docs[:0]
		}
	}
	// edited four times: five revisions
	for i := range 40 {
		id := fmt.Sprintf("doc-%05d", i*7)
		rev := s.must(t, "GET", "/"+db+"/"+id, nil)["_rev"].(string)
		for e := range 4 {
			rev = s.must(t, "PUT", "/"+db+"/"+id, fmt.Sprintf(`{"_rev":%q,"n":%d,"edit":%d,"type":"edited"}`, rev, i*7, e+1), 201)["rev"].(string)
		}
	}
	// conflicts: a second branch on a written doc, a third on some, and
	// one of them deleted
	for i := range 20 {
		id := fmt.Sprintf("doc-%05d", 1+i*11)
		rev := s.must(t, "GET", "/"+db+"/"+id, nil)["_rev"].(string)
		_, hash, _ := strings.Cut(rev, "-")
		branches := []string{fmt.Sprintf("%032x", r.Uint64())}
		if i%3 == 0 {
			branches = append(branches, fmt.Sprintf("%032x", r.Uint64()))
		}
		var bd []string
		for k, b := range branches {
			deleted := ""
			if k == 1 && i%2 == 0 {
				deleted = `,"_deleted":true`
			}
			bd = append(bd, fmt.Sprintf(`{"_id":%q,"_rev":"2-%s","_revisions":{"start":2,"ids":[%q,%q]},"branch":%d%s}`, id, b, b, hash, k, deleted))
		}
		s.must(t, "POST", "/"+db+"/_bulk_docs", `{"new_edits":false,"docs":[`+strings.Join(bd, ",")+`]}`, 201)
	}
	// deletions
	var dels []string
	for i := range 100 {
		id := fmt.Sprintf("doc-%05d", n-1-i*3)
		rev := s.must(t, "GET", "/"+db+"/"+id, nil)["_rev"].(string)
		dels = append(dels, fmt.Sprintf(`{"_id":%q,"_rev":%q,"_deleted":true}`, id, rev))
	}
	s.must(t, "POST", "/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(dels, ",")+`]}`, 201)

	// attachments
	data := func(size int, text bool) []byte {
		b := make([]byte, size)
		for i := range b {
			if text {
				b[i] = "abcdefghij klmnopqrstuvwxyz\n"[r.IntN(28)]
			} else {
				b[i] = byte(r.Uint32())
			}
		}
		return b
	}
	keep := func(id, name string, b []byte) {
		if c.atts[id] == nil {
			c.atts[id] = map[string][]byte{}
		}
		c.atts[id][name] = b
	}
	inline := map[string][]byte{"small.txt": []byte("hello, world"), "small.bin": {0, 1, 2, 255}, "k1.bin": data(1024, false), "k64.txt": data(64<<10, true)}
	var parts []string
	for _, name := range []string{"small.txt", "small.bin", "k1.bin", "k64.txt"} {
		ct := "application/octet-stream"
		if strings.HasSuffix(name, ".txt") {
			ct = "text/plain"
		}
		parts = append(parts, fmt.Sprintf(`%q:{"content_type":%q,"data":%q}`, name, ct, base64.StdEncoding.EncodeToString(inline[name])))
		keep("att-inline", name, inline[name])
	}
	s.must(t, "PUT", "/"+db+"/att-inline", `{"kind":"inline","_attachments":{`+strings.Join(parts, ",")+`}}`, 201)
	rev := ""
	for _, a := range []struct {
		name, ct string
		size     int
		text     bool
	}{{"m1.bin", "application/octet-stream", 1 << 20, false}, {"m1.txt", "text/plain", 1 << 20, true}, {"m10.bin", "image/png", 10 << 20, false}} {
		b := data(a.size, a.text)
		path := "/" + db + "/att-big/" + a.name
		if rev != "" {
			path += "?rev=" + rev
		}
		st, out := s.do(t, "PUT", path, a.ct, b)
		if st != 201 {
			t.Fatalf("%s: PUT %s: %d %s", s.name, path, st, out)
		}
		var res struct{ Rev string }
		_ = json.Unmarshal(out, &res)
		rev = res.Rev
		keep("att-big", a.name, b)
	}
	// multipart/related: the JSON, then each attachment that follows
	mp := map[string][]byte{"p.bin": data(300<<10, false), "p.txt": data(20<<10, true)}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	doc := fmt.Sprintf(`{"_id":"att-mp","kind":"multipart","_attachments":{"p.bin":{"follows":true,"content_type":"application/octet-stream","length":%d},"p.txt":{"follows":true,"content_type":"text/plain","length":%d}}}`,
		len(mp["p.bin"]), len(mp["p.txt"]))
	pw, _ := w.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/json"}})
	_, _ = pw.Write([]byte(doc))
	for _, name := range []string{"p.bin", "p.txt"} {
		pw, _ = w.CreatePart(textproto.MIMEHeader{})
		_, _ = pw.Write(mp[name])
		keep("att-mp", name, mp[name])
	}
	_ = w.Close()
	st, out := s.do(t, "PUT", "/"+db+"/att-mp", "multipart/related; boundary="+w.Boundary(), body.Bytes())
	if st != 201 {
		t.Fatalf("%s: multipart PUT: %d %s", s.name, st, out)
	}
	// an attachment edited: a second revision of the doc keeps the first
	// one as a stub
	rev = s.must(t, "GET", "/"+db+"/att-inline", nil)["_rev"].(string)
	st, out = s.do(t, "PUT", "/"+db+"/att-inline/later.bin?rev="+rev, "application/octet-stream", []byte("added later"))
	if st != 201 {
		t.Fatalf("%s: PUT later.bin: %d %s", s.name, st, out)
	}
	keep("att-inline", "later.bin", []byte("added later"))

	s.must(t, "PUT", "/"+db+"/_design/f", `{"filters":{"even":"function(doc, req) { return doc.type == 'even'; }"},"views":{"v":{"map":"function(doc) { emit(doc.n, null); }"}}}`, 201)
	s.must(t, "PUT", "/"+db+"/_local/keep", `{"here":true}`, 201)
	return c
}

// docState is what a replication must make the same on both sides: the
// leaves, the winner's body, its conflicts and attachment stubs.
type docState struct {
	leaves    []string
	winner    map[string]any
	conflicts []string
}

// diffStates is what differs between two databases' states, a line each.
func diffStates(a map[string]docState, aname string, b map[string]docState, bname string) []string {
	var out []string
	if len(a) != len(b) {
		out = append(out, fmt.Sprintf("%s has %d docs, %s %d", aname, len(a), bname, len(b)))
	}
	for id, x := range a {
		y, ok := b[id]
		if !ok {
			out = append(out, fmt.Sprintf("%s missing on %s", id, bname))
			continue
		}
		if !slices.Equal(x.leaves, y.leaves) || !slices.Equal(x.conflicts, y.conflicts) || !reflect.DeepEqual(x.winner, y.winner) {
			out = append(out, fmt.Sprintf("%s differs:\n %s: %v %v %v\n %s: %v %v %v", id, aname, x.leaves, x.conflicts, x.winner, bname, y.leaves, y.conflicts, y.winner))
		}
	}
	return out
}

func states(t *testing.T, s server, db string) map[string]docState {
	t.Helper()
	out := map[string]docState{}
	var ch struct {
		Results []struct {
			ID      string
			Changes []struct{ Rev string }
		}
	}
	if err := json.Unmarshal(s.getRaw(t, "/"+db+"/_changes?style=all_docs"), &ch); err != nil {
		t.Fatal(err)
	}
	for _, r := range ch.Results {
		var revs []string
		for _, c := range r.Changes {
			revs = append(revs, c.Rev)
		}
		sort.Strings(revs)
		out[r.ID] = docState{leaves: revs}
	}
	var all struct {
		Rows []struct {
			ID  string
			Doc map[string]any
		}
	}
	if err := json.Unmarshal(s.getRaw(t, "/"+db+"/_all_docs?include_docs=true&conflicts=true"), &all); err != nil {
		t.Fatal(err)
	}
	for _, r := range all.Rows {
		st := out[r.ID]
		if c, ok := r.Doc["_conflicts"].([]any); ok {
			for _, x := range c {
				st.conflicts = append(st.conflicts, x.(string))
			}
			sort.Strings(st.conflicts)
			delete(r.Doc, "_conflicts")
		}
		st.winner = r.Doc
		out[r.ID] = st
	}
	return out
}

// same checks that tdb on to holds what sdb on from holds, every doc's
// leaves, winner and conflicts and every attachment's bytes, and no
// _local doc of the source.
func same(t *testing.T, from server, sdb string, to server, tdb string, c *corpus) {
	t.Helper()
	// a CouchDB cluster's _changes is read from one copy of each range,
	// which may not have a just-replicated doc that _all_docs (a quorum
	// read) already has: what differs is asked again for a while
	var diffs []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		diffs = diffStates(states(t, from, sdb), from.name, states(t, to, tdb), to.name)
		if len(diffs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for i, d := range diffs {
		if i < 10 {
			t.Error(d)
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%d docs differ", len(diffs))
	}
	si, ti := from.must(t, "GET", "/"+sdb, nil), to.must(t, "GET", "/"+tdb, nil)
	if ti["doc_count"] != si["doc_count"] || ti["doc_del_count"] != si["doc_del_count"] {
		t.Fatalf("doc_count %v/%v on %s, %v/%v on %s", si["doc_count"], si["doc_del_count"], from.name, ti["doc_count"], ti["doc_del_count"], to.name)
	}
	if st, _ := to.do(t, "GET", "/"+tdb+"/_local/keep", "", nil); st != 404 {
		t.Errorf("the source's _local doc is on %s: %d", to.name, st)
	}
	if c == nil {
		return
	}
	for id, atts := range c.atts {
		doc := to.must(t, "GET", "/"+tdb+"/"+id, nil)
		stubs, _ := doc["_attachments"].(map[string]any)
		if len(stubs) != len(atts) {
			t.Fatalf("%s on %s: attachments %v, want %d", id, to.name, stubs, len(atts))
		}
		src := from.must(t, "GET", "/"+sdb+"/"+id, nil)["_attachments"].(map[string]any)
		for name, want := range atts {
			got := to.getRaw(t, "/"+tdb+"/"+id+"/"+name)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s/%s on %s: %d bytes, not the %d written (md5 %x, want %x)", id, name, to.name, len(got), len(want), md5.Sum(got), md5.Sum(want))
			}
			stub, _ := stubs[name].(map[string]any)
			ss, _ := src[name].(map[string]any)
			if stub["digest"] != ss["digest"] || stub["length"] != ss["length"] || stub["content_type"] != ss["content_type"] {
				t.Fatalf("%s/%s: stub %v on %s, %v on %s", id, name, stub, to.name, ss, from.name)
			}
		}
	}
}

// historyKeys are the members of a checkpoint history entry, as CouchDB
// 3.5.2 writes them.
var historyKeys = []string{"session_id", "start_time", "end_time", "start_last_seq", "end_last_seq", "recorded_seq",
	"missing_checked", "missing_found", "docs_read", "docs_written", "doc_write_failures", "bulk_get_docs", "bulk_get_attempts"}

// checkpoints checks that the replication's checkpoint doc is on both
// ends, the same, in CouchDB's format, and returns it.
func checkpoints(t *testing.T, src server, sdb string, tgt server, tdb string, session string) map[string]any {
	t.Helper()
	find := func(s server, db string) map[string]any {
		var ld struct{ Rows []struct{ ID string } }
		if err := json.Unmarshal(s.getRaw(t, "/"+db+"/_local_docs"), &ld); err != nil {
			t.Fatal(err)
		}
		for _, r := range ld.Rows {
			if r.ID == "_local/keep" {
				continue
			}
			d := s.must(t, "GET", "/"+db+"/"+r.ID, nil)
			if d["session_id"] == session {
				return d
			}
		}
		t.Fatalf("no checkpoint of session %s on %s/%s (%v)", session, s.name, db, ld.Rows)
		return nil
	}
	a, b := find(src, sdb), find(tgt, tdb)
	if a["_id"] != b["_id"] || fmt.Sprint(a["source_last_seq"]) != fmt.Sprint(b["source_last_seq"]) {
		t.Fatalf("checkpoints differ: %v on %s, %v on %s", a, src.name, b, tgt.name)
	}
	for _, d := range []map[string]any{a, b} {
		if d["replication_id_version"] != 4.0 || d["source_last_seq"] == nil {
			t.Fatalf("checkpoint %v", d)
		}
		h, _ := d["history"].([]any)
		if len(h) == 0 {
			t.Fatalf("checkpoint without history: %v", d)
		}
		for _, k := range historyKeys {
			if _, ok := h[0].(map[string]any)[k]; !ok {
				t.Fatalf("checkpoint history entry without %s: %v", k, h[0])
			}
		}
	}
	return a
}

func history0(t *testing.T, res map[string]any) map[string]any {
	t.Helper()
	h, _ := res["history"].([]any)
	if len(h) == 0 {
		t.Fatalf("no history in %v", res)
	}
	return h[0].(map[string]any)
}

// docCount is db's doc_count on s, -1 while it cannot be read (not
// created yet).
// caughtUp reports whether tdb on to counts the docs and the deleted
// docs sdb on from does: the live count alone is reached before the
// last tombstones have travelled.
func caughtUp(t *testing.T, from server, sdb string, to server, tdb string) bool {
	t.Helper()
	counts := func(s server, db string) (float64, float64, bool) {
		st, out := s.do(t, "GET", "/"+db, "", nil)
		var info struct {
			DocCount    float64 `json:"doc_count"`
			DocDelCount float64 `json:"doc_del_count"`
		}
		if st != 200 || json.Unmarshal(out, &info) != nil {
			return 0, 0, false
		}
		return info.DocCount, info.DocDelCount, true
	}
	a, ad, ok1 := counts(from, sdb)
	b, bd, ok2 := counts(to, tdb)
	return ok1 && ok2 && a == b && ad == bd
}

func docCount(t *testing.T, s server, db string) float64 {
	t.Helper()
	st, out := s.do(t, "GET", "/"+db, "", nil)
	if st != 200 {
		return -1
	}
	var info struct {
		DocCount float64 `json:"doc_count"`
	}
	_ = json.Unmarshal(out, &info)
	return info.DocCount
}
