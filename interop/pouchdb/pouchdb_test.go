// Package pouchdb tests that PouchDB 9, CouchDB's JavaScript client, syncs
// with settee: push, pull, two-way and live sync with attachments,
// conflicts and deletes, and checkpoints kept in _local docs. PouchDB runs
// in node (testdata/pouch.js, one scenario per run, printing what it saw as
// JSON); the test checks that and settee's side over HTTP. The same
// scenarios run against a real CouchDB 3.5.2 when internal/testcouch can
// start one, so the assertions are CouchDB's behaviour, not settee's.
//
// PouchDB comes from shared/clients/pouchdb (node_modules.tar.gz; or
// $SETTEE_POUCHDB_DIR); without it, or without node on PATH, the tests
// are skipped with a message.
package pouchdb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// nodeTimeout bounds every node process; pouch.js gives up by itself
// after 25 s.
const nodeTimeout = 40 * time.Second

// The same text and bytes as in testdata/pouch.js.
const attText = "hello, settee\nsecond line: ünïcødé ✓\n"

func binaryBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*31 + (i >> 8)) & 255)
	}
	return b
}

func digest(b []byte) string {
	s := md5.Sum(b)
	return "md5-" + base64.StdEncoding.EncodeToString(s[:])
}

// Dir is $SETTEE_POUCHDB_DIR, else shared/clients/pouchdb beside the
// repository or beside a directory above it (a git worktree); it may not
// exist.
func Dir() string {
	if d := os.Getenv("SETTEE_POUCHDB_DIR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	for d := filepath.Dir(repo); ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "shared", "clients", "pouchdb")
		if _, err := os.Stat(filepath.Join(cand, "node_modules.tar.gz")); err == nil {
			return cand
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return filepath.Join(filepath.Dir(repo), "shared", "clients", "pouchdb")
}

var (
	unpackDir  string // made by TestMain, removed after the tests
	unpackOnce sync.Once
	unpackErr  error
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "settee-pouchdb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	unpackDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// env is what running pouch.js needs.
type env struct {
	node, script, nodePath string
}

// pouch finds node and PouchDB, unpacking it once, or skips t.
func pouch(t *testing.T) env {
	t.Helper()
	dir := Dir()
	tgz := filepath.Join(dir, "node_modules.tar.gz")
	if _, err := os.Stat(tgz); err != nil {
		t.Skipf("no PouchDB to test with: %s not found (set SETTEE_POUCHDB_DIR or put shared/clients/pouchdb beside the repository)", tgz)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("no node on PATH to run PouchDB with: %v", err)
	}
	unpackOnce.Do(func() { unpackErr = untar(tgz, unpackDir) })
	if unpackErr != nil {
		t.Fatalf("unpack %s: %v", tgz, unpackErr)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "pouch.js"))
	if err != nil {
		t.Fatal(err)
	}
	return env{node: node, script: script, nodePath: filepath.Join(unpackDir, "node_modules")}
}

// untar unpacks a .tar.gz into dst: directories, regular files and
// symlinks that stay inside dst.
func untar(tgz, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q leaves the directory", h.Name)
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if filepath.IsAbs(h.Linkname) || !filepath.IsLocal(filepath.Join(filepath.Dir(name), h.Linkname)) {
				continue // only node_modules/.bin has links; nothing here needs them
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		}
	}
}

// target is a server PouchDB syncs with: settee or CouchDB.
type target struct {
	name, url, user, pw string
	client              *http.Client
}

func (tg *target) credURL() string {
	u, err := url.Parse(tg.url)
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword(tg.user, tg.pw)
	return u.String()
}

// do sends a request as the admin and returns the status and body.
func (tg *target) do(t *testing.T, method, path string, body any, contentType string) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
		if contentType == "" {
			contentType = "application/json"
		}
	}
	req, err := http.NewRequest(method, tg.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(tg.user, tg.pw)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := tg.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// json sends a request and decodes the JSON answer, failing t unless the
// status is want.
func (tg *target) json(t *testing.T, want int, method, path string, body any) map[string]any {
	t.Helper()
	st, b := tg.do(t, method, path, body, "")
	if st != want {
		t.Fatalf("%s: %s %s: %d %s, want %d", tg.name, method, path, st, b, want)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, b)
	}
	return m
}

func (tg *target) createDB(t *testing.T, db string) {
	t.Helper()
	tg.json(t, 201, "PUT", "/"+db, nil)
}

// run runs one scenario of pouch.js against db and decodes what it printed.
func (e env) run(t *testing.T, tg *target, scenario, db string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.node, e.script, scenario, tg.credURL(), db)
	cmd.Env = append(os.Environ(), "NODE_PATH="+e.nodePath)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: node pouch.js %s: %v in %s", tg.name, scenario, err, time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("%s: pouch.js %s killed after %s\nstderr: %s", tg.name, scenario, nodeTimeout, stderr.Bytes())
	}
	if err != nil {
		t.Fatalf("%s: pouch.js %s: %v\nstderr: %s\nstdout: %s", tg.name, scenario, err, stderr.Bytes(), clip(stdout.Bytes()))
	}
	if stderr.Len() > 0 {
		t.Logf("%s: pouch.js %s stderr:\n%s", tg.name, scenario, clip(stderr.Bytes()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s: pouch.js %s printed no JSON: %v\n%s", tg.name, scenario, err, clip(stdout.Bytes()))
	}
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return fmt.Sprintf("%s… (%d bytes)", b[:2000], len(b))
	}
	return string(b)
}

// The shapes pouch.js prints.
type replication struct {
	OK               bool            `json:"ok"`
	Status           string          `json:"status"`
	DocsRead         int             `json:"docs_read"`
	DocsWritten      int             `json:"docs_written"`
	DocWriteFailures int             `json:"doc_write_failures"`
	Errors           []string        `json:"errors"`
	LastSeq          json.RawMessage `json:"last_seq"`
}

type leaf struct {
	Deleted bool     `json:"deleted"`
	Revs    []string `json:"revs"`
}

// doc is a doc as PouchDB's get returned it, or _error.
type doc map[string]any

func (d doc) rev() string { s, _ := d["_rev"].(string); return s }

func (d doc) conflicts() []string {
	var out []string
	if cs, ok := d["_conflicts"].([]any); ok {
		for _, c := range cs {
			out = append(out, c.(string))
		}
	}
	return out
}

func (d doc) err() map[string]any { e, _ := d["_error"].(map[string]any); return e }

func checkRep(t *testing.T, what string, r replication, written int) {
	t.Helper()
	if !r.OK || r.Status != "complete" || r.DocWriteFailures != 0 || len(r.Errors) != 0 {
		t.Errorf("%s: replication %+v, want ok, complete, no failures", what, r)
	}
	if written >= 0 && r.DocsWritten != written {
		t.Errorf("%s: docs_written %d, want %d", what, r.DocsWritten, written)
	}
}

// TestPouchDBSettee runs every scenario against a settee node.
func TestPouchDBSettee(t *testing.T) {
	e := pouch(t)
	srv := testserver.Start(t)
	tg := &target{name: "settee", url: srv.URL, user: testserver.AdminUser, pw: testserver.AdminPassword,
		client: &http.Client{Timeout: 20 * time.Second}}
	scenarios(t, e, tg)
}

// TestPouchDBCouchDB runs the same scenarios against Apache CouchDB 3.5.2
// (skipped when internal/testcouch has none), proving the assertions are
// CouchDB's behaviour.
func TestPouchDBCouchDB(t *testing.T) {
	e := pouch(t)
	cs := testcouch.Start(t, "")
	tg := &target{name: "couchdb", url: cs.URL, user: cs.User, pw: cs.Password,
		client: &http.Client{Timeout: 20 * time.Second}}
	scenarios(t, e, tg)
}

func scenarios(t *testing.T, e env, tg *target) {
	for _, sc := range []struct {
		name string
		fn   func(*testing.T, env, *target, string)
	}{
		{"push", testPush},
		{"pull", testPull},
		{"checkpoint", testCheckpoint},
		{"sync", testSync},
		{"live", testLive},
		{"filtered", testFiltered},
		{"many", testMany},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			db := "pouch-" + sc.name
			tg.createDB(t, db)
			sc.fn(t, e, tg, db)
		})
	}
}

// stub is an attachment's stub as the server answers it.
type stub struct {
	ContentType string `json:"content_type"`
	Digest      string `json:"digest"`
	Length      int    `json:"length"`
	RevPos      int    `json:"revpos"`
	Stub        bool   `json:"stub"`
	Encoding    string `json:"encoding"`
	EncodedLen  int    `json:"encoded_length"`
	Data        string `json:"data"`
}

func stubs(t *testing.T, d map[string]any) map[string]stub {
	t.Helper()
	b, _ := json.Marshal(d["_attachments"])
	var m map[string]stub
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("_attachments %s: %v", b, err)
	}
	return m
}

// checkAttachment checks an attachment's stub and its bytes on the server.
func checkAttachment(t *testing.T, tg *target, db, id, name, ctype string, want []byte, revpos int) {
	t.Helper()
	d := tg.json(t, 200, "GET", "/"+db+"/"+id+"?att_encoding_info=true", nil)
	s, ok := stubs(t, d)[name]
	if !ok {
		t.Errorf("%s: %s has no attachment %s: %v", tg.name, id, name, d["_attachments"])
		return
	}
	if s.ContentType != ctype || s.Length != len(want) || !s.Stub || s.RevPos != revpos {
		t.Errorf("%s: %s/%s stub %+v, want content_type %s, length %d, revpos %d", tg.name, id, name, s, ctype, len(want), revpos)
	}
	if strings.HasPrefix(ctype, "text/") {
		// a compressible type is stored gzipped, and its digest is of the
		// gzipped bytes, which a client that accepts gzip gets as they are
		req, err := http.NewRequest("GET", tg.url+"/"+db+"/"+id+"/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(tg.user, tg.pw)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := tg.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		var plain []byte
		if err == nil {
			plain, err = io.ReadAll(zr)
		}
		if s.Encoding != "gzip" || s.EncodedLen != len(raw) || resp.Header.Get("Content-Encoding") != "gzip" || s.Digest != digest(raw) || err != nil || !bytes.Equal(plain, want) {
			t.Errorf("%s: %s/%s stub %+v; with Accept-Encoding gzip: Content-Encoding %q, %d bytes of md5 %s, gunzipped %v: %q; want encoding gzip, the digest of the gzipped bytes and %q",
				tg.name, id, name, s, resp.Header.Get("Content-Encoding"), len(raw), digest(raw), err, plain, want)
		}
	} else if s.Digest != digest(want) || s.Encoding != "" {
		t.Errorf("%s: %s/%s digest %s encoding %q, want %s (the md5 PouchDB computed) and none", tg.name, id, name, s.Digest, s.Encoding, digest(want))
	}
	st, b := tg.do(t, "GET", "/"+db+"/"+id+"/"+name, nil, "")
	if st != 200 || !bytes.Equal(b, want) {
		t.Errorf("%s: GET %s/%s: %d, %d bytes, want 200 and the %d bytes PouchDB wrote", tg.name, id, name, st, len(b), len(want))
	}
	// and inline, as a replicator reads it
	d = tg.json(t, 200, "GET", "/"+db+"/"+id+"?attachments=true", nil)
	if got, _ := base64.StdEncoding.DecodeString(stubs(t, d)[name].Data); !bytes.Equal(got, want) {
		t.Errorf("%s: GET %s?attachments=true: %s's data is not the bytes PouchDB wrote", tg.name, id, name)
	}
}

func checkTombstone(t *testing.T, tg *target, db, id, rev string) {
	t.Helper()
	m := tg.json(t, 404, "GET", "/"+db+"/"+url.PathEscape(id), nil)
	if m["error"] != "not_found" || m["reason"] != "deleted" {
		t.Errorf("%s: GET %s: %v, want not_found deleted", tg.name, id, m)
	}
	if rev == "" {
		return
	}
	d := tg.json(t, 200, "GET", "/"+db+"/"+url.PathEscape(id)+"?rev="+rev, nil)
	if d["_deleted"] != true || d["_rev"] != rev {
		t.Errorf("%s: GET %s?rev=%s: %v, want the tombstone", tg.name, id, rev, d)
	}
}

// 1. A memory PouchDB pushes docs, attachments and a tombstone.
func testPush(t *testing.T, e env, tg *target, db string) {
	var out struct {
		Replication replication     `json:"replication"`
		Local       map[string]leaf `json:"local"`
	}
	e.run(t, tg, "push", db, &out)
	checkRep(t, "push", out.Replication, 6)
	if len(out.Local) != 6 {
		t.Fatalf("PouchDB has %d docs, want 6: %v", len(out.Local), out.Local)
	}
	for id, l := range out.Local {
		if len(l.Revs) != 1 {
			t.Fatalf("PouchDB: %s has leaves %v", id, l.Revs)
		}
		if l.Deleted {
			continue
		}
		d := tg.json(t, 200, "GET", "/"+db+"/"+id, nil)
		if d["_rev"] != l.Revs[0] {
			t.Errorf("%s: %s is at %v, PouchDB wrote %s", tg.name, id, d["_rev"], l.Revs[0])
		}
	}
	d := tg.json(t, 200, "GET", "/"+db+"/plain", nil)
	delete(d, "_rev")
	want := map[string]any{"_id": "plain", "n": 1.0, "tags": []any{"a", "b"}, "nested": map[string]any{"x": nil, "y": 1.5}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("%s: plain is %v, want %v", tg.name, d, want)
	}
	d = tg.json(t, 200, "GET", "/"+db+"/text-att", nil)
	if d["title"] != "text, edited" {
		t.Errorf("%s: text-att is %v", tg.name, d)
	}
	checkAttachment(t, tg, db, "text-att", "hello.txt", "text/plain", []byte(attText), 1)
	checkAttachment(t, tg, db, "bin-att", "blob.bin", "application/octet-stream", binaryBytes(20000), 1)
	checkAttachment(t, tg, db, "bin-att", "small.bin", "image/png", binaryBytes(3), 1)
	d = tg.json(t, 200, "GET", "/"+db+"/edited?revs=true", nil)
	revs, _ := d["_revisions"].(map[string]any)
	if d["v"] != 3.0 || revs["start"] != 3.0 || len(revs["ids"].([]any)) != 3 {
		t.Errorf("%s: edited?revs=true is %v, want v 3 and three revisions", tg.name, d)
	}
	d = tg.json(t, 200, "GET", "/"+db+"/_design/app", nil)
	if !reflect.DeepEqual(d["views"], map[string]any{"by_n": map[string]any{"map": "function (doc) { emit(doc.n); }"}}) {
		t.Errorf("%s: _design/app is %v", tg.name, d)
	}
	checkTombstone(t, tg, db, "gone", out.Local["gone"].Revs[0])
	info := tg.json(t, 200, "GET", "/"+db, nil)
	if info["doc_count"] != 5.0 || info["doc_del_count"] != 1.0 {
		t.Errorf("%s: db info %v, want doc_count 5, doc_del_count 1", tg.name, info)
	}
	// the changes feed agrees with PouchDB's
	ch := tg.json(t, 200, "GET", "/"+db+"/_changes?style=all_docs", nil)
	got := map[string]leaf{}
	for _, r := range ch["results"].([]any) {
		r := r.(map[string]any)
		l := leaf{Deleted: r["deleted"] == true}
		for _, c := range r["changes"].([]any) {
			l.Revs = append(l.Revs, c.(map[string]any)["rev"].(string))
		}
		got[r["id"].(string)] = l
	}
	if !reflect.DeepEqual(got, out.Local) {
		t.Errorf("%s: _changes %v, PouchDB's %v", tg.name, got, out.Local)
	}
}

func rev(n int, c byte) string { return fmt.Sprintf("%d-%s", n, strings.Repeat(string(c), 32)) }

// 2. Docs written to the server over HTTP are pulled into memory.
func testPull(t *testing.T, e env, tg *target, db string) {
	tg.json(t, 201, "PUT", "/"+db+"/p-plain", map[string]any{"a": "b", "num": 42})
	r := tg.json(t, 201, "PUT", "/"+db+"/p-att", map[string]any{
		"kind": "attachments",
		"_attachments": map[string]any{"hello.txt": map[string]any{
			"content_type": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte(attText))}},
	})
	blob := binaryBytes(70000)
	st, b := tg.do(t, "PUT", "/"+db+"/p-att/blob.bin?rev="+r["rev"].(string), blob, "application/octet-stream")
	if st != 201 {
		t.Fatalf("%s: PUT p-att/blob.bin: %d %s", tg.name, st, b)
	}
	r = tg.json(t, 201, "PUT", "/"+db+"/p-gone", map[string]any{"v": 1})
	tg.json(t, 200, "DELETE", "/"+db+"/p-gone?rev="+r["rev"].(string), nil)
	tg.json(t, 201, "PUT", "/"+db+"/_design/p", map[string]any{"language": "javascript", "views": map[string]any{}})
	// two branches from one root, and a live doc with a deleted branch
	branch := func(id string, r2, r1 byte, body map[string]any) map[string]any {
		body["_id"] = id
		body["_rev"] = rev(2, r2)
		body["_revisions"] = map[string]any{"start": 2, "ids": []string{strings.Repeat(string(r2), 32), strings.Repeat(string(r1), 32)}}
		return body
	}
	st, b = tg.do(t, "POST", "/"+db+"/_bulk_docs", map[string]any{"new_edits": false, "docs": []any{
		branch("p-conflict", 'a', '1', map[string]any{"v": "branch a"}),
		branch("p-conflict", 'b', '1', map[string]any{"v": "branch b"}),
		branch("p-delconflict", 'e', '1', map[string]any{"v": "live"}),
		branch("p-delconflict", 'f', '1', map[string]any{"_deleted": true}),
	}}, "")
	if st != 201 {
		t.Fatalf("%s: _bulk_docs new_edits=false: %d %s", tg.name, st, b)
	}

	var out struct {
		Replication replication     `json:"replication"`
		Docs        map[string]doc  `json:"docs"`
		Leaves      map[string]leaf `json:"leaves"`
		DocCount    int             `json:"doc_count"`
	}
	e.run(t, tg, "pull", db, &out)
	checkRep(t, "pull", out.Replication, 8) // the two branches of each conflicted doc are two
	if out.DocCount != 5 {
		t.Errorf("PouchDB: doc_count %d, want 5", out.DocCount)
	}
	d := out.Docs["p-plain"]
	if d["a"] != "b" || d["num"] != 42.0 {
		t.Errorf("PouchDB: p-plain is %v", d)
	}
	d = out.Docs["p-att"]
	atts := stubs(t, d)
	for name, want := range map[string]struct {
		ctype string
		data  []byte
	}{"hello.txt": {"text/plain", []byte(attText)}, "blob.bin": {"application/octet-stream", blob}} {
		a := atts[name]
		got, err := base64.StdEncoding.DecodeString(a.Data)
		if err != nil || !bytes.Equal(got, want.data) || a.ContentType != want.ctype || a.Digest != digest(want.data) {
			t.Errorf("PouchDB: p-att/%s: content_type %q digest %q, %d bytes (%v), want %s %s and the %d bytes written", name, a.ContentType, a.Digest, len(got), err, want.ctype, digest(want.data), len(want.data))
		}
	}
	if e := out.Docs["p-gone"].err(); e == nil || e["status"] != 404.0 || e["reason"] != "deleted" {
		t.Errorf("PouchDB: p-gone is %v, want 404 deleted", out.Docs["p-gone"])
	}
	if l := out.Leaves["p-gone"]; !l.Deleted || len(l.Revs) != 1 || !strings.HasPrefix(l.Revs[0], "2-") {
		t.Errorf("PouchDB: p-gone's leaves %+v, want one tombstone at 2-", l)
	}
	d = out.Docs["p-conflict"]
	if d.rev() != rev(2, 'b') || d["v"] != "branch b" || !slices.Equal(d.conflicts(), []string{rev(2, 'a')}) {
		t.Errorf("PouchDB: p-conflict is %v, want %s winning over %s", d, rev(2, 'b'), rev(2, 'a'))
	}
	d = out.Docs["p-delconflict"]
	if d.rev() != rev(2, 'e') || d["v"] != "live" || d.conflicts() != nil {
		t.Errorf("PouchDB: p-delconflict is %v, want %s and no _conflicts (the deleted branch loses)", d, rev(2, 'e'))
	}
	if l := out.Leaves["p-delconflict"]; !slices.Equal(l.Revs, []string{rev(2, 'e'), rev(2, 'f')}) {
		t.Errorf("PouchDB: p-delconflict's leaves %v, want both branches", l.Revs)
	}
	if d := out.Docs["_design/p"]; d["language"] != "javascript" {
		t.Errorf("PouchDB: _design/p is %v", d)
	}
	// PouchDB and the server agree on every live doc's winner and conflicts
	for _, id := range []string{"p-plain", "p-att", "p-conflict", "p-delconflict", "_design/p"} {
		s := doc(tg.json(t, 200, "GET", "/"+db+"/"+id+"?conflicts=true", nil))
		if s.rev() != out.Docs[id].rev() || !slices.Equal(s.conflicts(), out.Docs[id].conflicts()) {
			t.Errorf("%s: %s is %s conflicts %v; PouchDB has %s conflicts %v", tg.name, id, s.rev(), s.conflicts(), out.Docs[id].rev(), out.Docs[id].conflicts())
		}
	}
}

// 4. A second replication after the first starts from its checkpoint and
// transfers nothing; one more after a write transfers just that doc.
func testCheckpoint(t *testing.T, e env, tg *target, db string) {
	for _, id := range []string{"cp-r1", "cp-r2", "cp-r3"} {
		tg.json(t, 201, "PUT", "/"+db+"/"+id, map[string]any{"v": id})
	}
	type runs struct {
		Runs   []replication `json:"runs"`
		Sinces []*string     `json:"sinces"`
	}
	var out struct{ Pull, Push runs }
	e.run(t, tg, "checkpoint", db, &out)
	for _, dir := range []struct {
		name string
		r    runs
	}{{"pull", out.Pull}, {"push", out.Push}} {
		if len(dir.r.Runs) != 3 {
			t.Fatalf("%s: %d runs", dir.name, len(dir.r.Runs))
		}
		checkRep(t, dir.name+" 1", dir.r.Runs[0], 3)
		checkRep(t, dir.name+" 2", dir.r.Runs[1], 0)
		checkRep(t, dir.name+" 3", dir.r.Runs[2], 1)
		if dir.r.Runs[1].DocsRead != 0 {
			t.Errorf("%s 2: docs_read %d, want 0", dir.name, dir.r.Runs[1].DocsRead)
		}
		// the changes feeds after the first run start where it ended, not at 0
		var sinces []string
		for _, s := range dir.r.Sinces {
			if s == nil {
				sinces = append(sinces, "<none>")
			} else {
				sinces = append(sinces, *s)
			}
		}
		last := strings.Trim(string(dir.r.Runs[0].LastSeq), `"`)
		if len(sinces) < 3 || sinces[0] != "0" || slices.Index(sinces[1:], "0") >= 0 || !slices.Contains(sinces, last) {
			t.Errorf("%s: changes feeds since %q; want 0 once, then from the checkpoint %s (a restart from 0 means the _local checkpoint was not read back)", dir.name, sinces, last)
		}
	}
	// the checkpoints PouchDB left on the server (source of the pull, target
	// of the push)
	ld := tg.json(t, 200, "GET", "/"+db+"/_local_docs?include_docs=true", nil)
	var seqs []string
	for _, r := range ld["rows"].([]any) {
		d, _ := r.(map[string]any)["doc"].(map[string]any)
		if d["replicator"] == "pouchdb" && d["session_id"] != nil {
			b, _ := json.Marshal(d["last_seq"])
			seqs = append(seqs, string(b))
		}
	}
	sort.Strings(seqs)
	want := []string{string(out.Pull.Runs[2].LastSeq), string(out.Push.Runs[2].LastSeq)}
	sort.Strings(want)
	if !slices.Equal(seqs, want) {
		t.Errorf("%s: PouchDB's checkpoints in _local_docs at %v, want %v (%v)", tg.name, seqs, want, ld)
	}
}

// 3. Two-way sync: a conflict from edits on both sides, deletes both ways,
// the conflict resolved.
func testSync(t *testing.T, e env, tg *target, db string) {
	var out struct {
		First  replication `json:"first"`
		Edits  struct{ Local, Remote string }
		Second struct{ Push, Pull replication }
		// Conflict: s-doc read on each side after the second sync.
		Conflict struct{ Local, Remote doc }
		Deleted  struct{ Local, Remote map[string]doc }
		Resolved struct {
			Push          replication
			Local, Remote doc
		}
		Leaves struct{ Local, Remote map[string]leaf }
	}
	e.run(t, tg, "sync", db, &out)
	checkRep(t, "first sync (push)", out.First, 2)
	checkRep(t, "second sync, push", out.Second.Push, 2)
	checkRep(t, "second sync, pull", out.Second.Pull, 2)
	// the winner of two revisions at the same depth is the greater rev
	winner, loser := out.Edits.Local, out.Edits.Remote
	if loser > winner {
		winner, loser = loser, winner
	}
	for side, d := range map[string]doc{"PouchDB": out.Conflict.Local, "PouchDB's http adapter": out.Conflict.Remote} {
		if d.rev() != winner || !slices.Equal(d.conflicts(), []string{loser}) {
			t.Errorf("%s: s-doc is %s conflicts %v, want %s conflicts [%s]", side, d.rev(), d.conflicts(), winner, loser)
		}
	}
	for side, m := range map[string]map[string]doc{"local": out.Deleted.Local, "remote": out.Deleted.Remote} {
		for id, d := range m {
			if e := d.err(); e == nil || e["status"] != 404.0 || e["reason"] != "deleted" {
				t.Errorf("PouchDB %s: %s is %v, want 404 deleted", side, id, d)
			}
		}
	}
	checkTombstone(t, tg, db, "s-local-del", out.Leaves.Local["s-local-del"].Revs[0])
	checkTombstone(t, tg, db, "s-remote-del", out.Leaves.Local["s-remote-del"].Revs[0])
	checkRep(t, "third sync, push", out.Resolved.Push, 1)
	server := doc(tg.json(t, 200, "GET", "/"+db+"/s-doc?conflicts=true&deleted_conflicts=true", nil))
	for side, d := range map[string]doc{"PouchDB": out.Resolved.Local, "PouchDB's http adapter": out.Resolved.Remote, tg.name + " over HTTP": server} {
		if d.rev() != winner || d.conflicts() != nil {
			t.Errorf("%s: resolved s-doc is %s conflicts %v, want %s and none", side, d.rev(), d.conflicts(), winner)
		}
	}
	// on the server, the loser lives on as a deleted conflict, its body kept
	var dc []string
	for _, r := range server["_deleted_conflicts"].([]any) {
		dc = append(dc, r.(string))
	}
	tomb := slices.DeleteFunc(slices.Clone(out.Leaves.Local["s-doc"].Revs), func(r string) bool { return r == winner })
	if !slices.Equal(dc, tomb) || len(dc) != 1 || !strings.HasPrefix(dc[0], "3-") {
		t.Errorf("%s: s-doc's _deleted_conflicts %v, want the loser's tombstone %v", tg.name, dc, tomb)
	}
	lost := tg.json(t, 200, "GET", "/"+db+"/s-doc?rev="+loser, nil)
	wantV := "remote edit"
	if loser == out.Edits.Local {
		wantV = "local edit"
	}
	if lost["v"] != wantV {
		t.Errorf("%s: s-doc?rev=%s is %v, want v %q", tg.name, loser, lost, wantV)
	}
	if !reflect.DeepEqual(out.Leaves.Local, out.Leaves.Remote) {
		t.Errorf("leaves differ after the syncs:\nPouchDB %v\n%s %v", out.Leaves.Local, tg.name, out.Leaves.Remote)
	}
	if l := out.Leaves.Local["s-doc"]; len(l.Revs) != 2 {
		t.Errorf("s-doc's leaves %v, want the winner and the loser's tombstone", l.Revs)
	}
}

// 3b. A live sync picks up a change written to the server after it
// started, pushes a local one, and is cancelled.
func testLive(t *testing.T, e env, tg *target, db string) {
	var out struct {
		Put struct {
			Status int            `json:"status"`
			Body   map[string]any `json:"body"`
		} `json:"put"`
		Got doc `json:"got"`
		Del struct {
			Status int            `json:"status"`
			Body   map[string]any `json:"body"`
		} `json:"del"`
		Deleted struct {
			Status int    `json:"status"`
			Reason string `json:"reason"`
		} `json:"deleted"`
		Complete struct {
			Push, Pull string
		} `json:"complete"`
		Events []struct {
			Event, Direction string
			IDs              []string
		} `json:"events"`
	}
	e.run(t, tg, "live", db, &out)
	if out.Put.Status != 201 || out.Got.rev() != out.Put.Body["rev"] {
		t.Errorf("PouchDB has l-server at %s; the server answered the PUT %d %v", out.Got.rev(), out.Put.Status, out.Put.Body)
	}
	if out.Del.Status != 200 || out.Deleted.Status != 404 || out.Deleted.Reason != "deleted" {
		t.Errorf("the server answered the DELETE of l-server %d %v; then PouchDB's get answered %+v, want 404 deleted", out.Del.Status, out.Del.Body, out.Deleted)
	}
	if d, _ := out.Del.Body["rev"].(string); d != "" {
		checkTombstone(t, tg, db, "l-server", d)
	}
	if out.Complete.Push != "cancelled" || out.Complete.Pull != "cancelled" {
		t.Errorf("live sync ended %+v, want both directions cancelled", out.Complete)
	}
	pulled := false
	for _, ev := range out.Events {
		if ev.Event == "change" && ev.Direction == "pull" && slices.Contains(ev.IDs, "l-server") {
			pulled = true
		}
	}
	if !pulled {
		t.Errorf("no pull change event with l-server: %+v", out.Events)
	}
	for _, id := range []string{"l-before", "l-after"} {
		tg.json(t, 200, "GET", "/"+db+"/"+id, nil)
	}
}

// 5. Filtered replications: doc_ids and a selector, which PouchDB asks the
// server to apply (_changes?filter=_doc_ids, filter=_selector), and a push
// through a JavaScript filter.
func testFiltered(t *testing.T, e env, tg *target, db string) {
	for id, typ := range map[string]string{"f-1": "keep", "f-2": "drop", "f-3": "keep", "f-4": "drop", "f-5": "keep"} {
		tg.json(t, 201, "PUT", "/"+db+"/"+id, map[string]any{"type": typ})
	}
	type ids struct {
		Replication replication `json:"replication"`
		IDs         []string    `json:"ids"`
	}
	var out struct {
		DocIDs     ids `json:"doc_ids"`
		Selector   ids `json:"selector"`
		PushFilter struct {
			Replication replication `json:"replication"`
		} `json:"push_filter"`
	}
	e.run(t, tg, "filtered", db, &out)
	checkRep(t, "doc_ids pull", out.DocIDs.Replication, 2)
	if want := []string{"f-1", "f-3"}; !slices.Equal(out.DocIDs.IDs, want) {
		t.Errorf("doc_ids pull: PouchDB has %v, want %v", out.DocIDs.IDs, want)
	}
	checkRep(t, "selector pull", out.Selector.Replication, 3)
	if want := []string{"f-1", "f-3", "f-5"}; !slices.Equal(out.Selector.IDs, want) {
		t.Errorf("selector pull: PouchDB has %v, want %v", out.Selector.IDs, want)
	}
	checkRep(t, "filtered push", out.PushFilter.Replication, 1)
	tg.json(t, 200, "GET", "/"+db+"/f-push-yes", nil)
	tg.json(t, 404, "GET", "/"+db+"/f-push-no", nil)
}

// 6. Hundreds of docs in small batches (a checkpoint after each), pushed
// and pulled back.
func testMany(t *testing.T, e env, tg *target, db string) {
	var out struct {
		Push, Pull replication
		Count      int
		Bad        []string
	}
	e.run(t, tg, "many", db, &out)
	checkRep(t, "push", out.Push, 300)
	checkRep(t, "pull", out.Pull, 300)
	if out.Count != 300 || len(out.Bad) != 0 {
		t.Errorf("pulled back %d docs, %d wrong (%v), want 300 as written", out.Count, len(out.Bad), out.Bad)
	}
	info := tg.json(t, 200, "GET", "/"+db, nil)
	if info["doc_count"] != 300.0 {
		t.Errorf("%s: doc_count %v, want 300", tg.name, info["doc_count"])
	}
}
