package httpgw_test

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

func md5Digest(b []byte) string {
	s := md5.Sum(b)
	return "md5-" + base64.StdEncoding.EncodeToString(s[:])
}

// mpPart is one part of a multipart body to send.
type mpPart struct {
	name, ctype, encoding string
	data                  []byte
}

// relatedBody builds a multipart/related body as CouchDB's replicator
// writes it: the JSON, then the parts.
func relatedBody(boundary string, js []byte, parts ...mpPart) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "--%s\r\nContent-Type: application/json\r\n\r\n", boundary)
	b.Write(js)
	for _, p := range parts {
		fmt.Fprintf(&b, "\r\n--%s\r\nContent-Disposition: attachment; filename=%q\r\nContent-Type: %s\r\nContent-Length: %d", boundary, p.name, p.ctype, len(p.data))
		if p.encoding != "" {
			fmt.Fprintf(&b, "\r\nContent-Encoding: %s", p.encoding)
		}
		b.WriteString("\r\n\r\n")
		b.Write(p.data)
	}
	fmt.Fprintf(&b, "\r\n--%s--", boundary)
	return b.Bytes()
}

func putRelated(t *testing.T, s *testserver.Server, path, ctype string, body []byte) (int, map[string]any) {
	t.Helper()
	req := s.NewRequest(t, "PUT", path, body)
	req.Header.Set("Content-Type", ctype)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func getWith(t *testing.T, s *testserver.Server, path string, h map[string]string) *http.Response {
	t.Helper()
	req := s.NewRequest(t, "GET", path, nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	// the raw bytes: stored gzip parts are checked as they come
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func attData(t *testing.T, s *testserver.Server, path string) string {
	t.Helper()
	resp := s.Do(t, "GET", path, nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}

func TestMultipartPut(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/mp", nil, nil)
	png := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}
	js := `{"title":"two files","_attachments":{` +
		`"note.txt":{"follows":true,"content_type":"text/plain","length":11},` +
		`"img.png":{"follows":true,"content_type":"image/png","length":8,"digest":"` + md5Digest(png) + `"}}}`
	st, out := putRelated(t, s, "/mp/doc", `multipart/related; boundary="abc123"`,
		relatedBody("abc123", []byte(js), mpPart{"note.txt", "text/plain", "", []byte("hello world")}, mpPart{"img.png", "image/png", "", png}))
	if st != 201 || out["ok"] != true || !strings.HasPrefix(fmt.Sprint(out["rev"]), "1-") {
		t.Fatalf("put: %d %v", st, out)
	}
	if got := attData(t, s, "/mp/doc/note.txt"); got != "hello world" {
		t.Fatalf("note.txt %q", got)
	}
	if got := attData(t, s, "/mp/doc/img.png"); got != string(png) {
		t.Fatalf("img.png %q", got)
	}
	var doc struct {
		Title string                    `json:"title"`
		Atts  map[string]map[string]any `json:"_attachments"`
	}
	mustCall(t, s, 200, "GET", "/mp/doc", nil, &doc)
	if doc.Title != "two files" || doc.Atts["img.png"]["digest"] != md5Digest(png) || doc.Atts["note.txt"]["length"].(float64) != 11 {
		t.Fatalf("doc %+v", doc)
	}

	// a replicated revision (new_edits=false) whose text attachment comes
	// gzipped, as CouchDB sends what it stores: kept byte for byte
	z := gzipped("compressible text, compressible text")
	js = `{"_id":"rep","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"_attachments":{"t.txt":{` +
		`"content_type":"text/plain","revpos":2,"digest":"` + md5Digest(z) + `","length":37,"follows":true,"encoding":"gzip","encoded_length":` + fmt.Sprint(len(z)) + `}}}`
	st, out = putRelated(t, s, "/mp/rep?new_edits=false", `multipart/related; boundary=xyz`,
		relatedBody("xyz", []byte(js), mpPart{"t.txt", "text/plain", "gzip", z}))
	if st != 201 || out["rev"] != "2-bbbb" {
		t.Fatalf("replicated put: %d %v", st, out)
	}
	var rep struct {
		Atts map[string]map[string]any `json:"_attachments"`
	}
	mustCall(t, s, 200, "GET", "/mp/rep?att_encoding_info=true", nil, &rep)
	a := rep.Atts["t.txt"]
	if a["digest"] != md5Digest(z) || a["revpos"].(float64) != 2 || a["length"].(float64) != 37 || a["encoding"] != "gzip" || a["encoded_length"].(float64) != float64(len(z)) {
		t.Fatalf("stored as sent: %v", a)
	}
	if got := attData(t, s, "/mp/rep/t.txt"); got != "compressible text, compressible text" {
		t.Fatalf("t.txt %q", got)
	}

	// an update keeping one attachment as a stub and replacing the other
	js = `{"_rev":"` + out["rev"].(string) + `","_attachments":{"t.txt":{"stub":true},"new.bin":{"follows":true,"length":3}}}`
	st, out = putRelated(t, s, "/mp/rep", `multipart/related; boundary=xyz`, relatedBody("xyz", []byte(js), mpPart{"new.bin", "application/octet-stream", "", []byte("abc")}))
	if st != 201 || !strings.HasPrefix(out["rev"].(string), "3-") {
		t.Fatalf("update: %d %v", st, out)
	}
	if attData(t, s, "/mp/rep/new.bin") != "abc" || attData(t, s, "/mp/rep/t.txt") != "compressible text, compressible text" {
		t.Fatal("update lost data")
	}
}

func TestMultipartPutBadInput(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *node.Config) { c.MaxDocumentSize = 4096; c.MaxRequestSize = 64 << 10 })
	mustCall(t, s, 201, "PUT", "/mp", nil, nil)
	follows := []byte(`{"_attachments":{"a.txt":{"follows":true,"length":5},"b.bin":{"follows":true,"length":3}}}`)
	good := relatedBody("B", follows, mpPart{"a.txt", "text/plain", "", []byte("hello")}, mpPart{"b.bin", "x/y", "", []byte("xyz")})
	cases := []struct {
		name   string
		ctype  string
		body   []byte
		wcode  int
		werror string
	}{
		{"missing part", `multipart/related; boundary=B`, relatedBody("B", follows, mpPart{"a.txt", "text/plain", "", []byte("hello")}), 400, "bad_request"},
		{"extra part", `multipart/related; boundary=B`, relatedBody("B", follows, mpPart{"a", "a/b", "", []byte("hello")}, mpPart{"b", "a/b", "", []byte("xyz")}, mpPart{"c", "a/b", "", []byte("!")}), 400, "bad_request"},
		{"length mismatch", `multipart/related; boundary=B`, relatedBody("B", follows, mpPart{"a", "a/b", "", []byte("hell")}, mpPart{"b", "a/b", "", []byte("xyz")}), 400, "bad_request"},
		{"no boundary", `multipart/related`, good, 400, "bad_request"},
		{"wrong boundary", `multipart/related; boundary=C`, good, 400, "bad_request"},
		{"truncated", `multipart/related; boundary=B`, good[:len(good)-20], 400, "bad_request"},
		{"no closing delimiter", `multipart/related; boundary=B`, good[:len(good)-2], 400, "bad_request"},
		{"not JSON first", `multipart/related; boundary=B`, []byte("--B\r\nContent-Type: text/plain\r\n\r\n{}\r\n--B--"), 415, "bad_content_type"},
		{"bad JSON", `multipart/related; boundary=B`, relatedBody("B", []byte(`{"a":`)), 400, "bad_request"},
		{"digest mismatch", `multipart/related; boundary=B`, relatedBody("B", []byte(`{"_attachments":{"a":{"follows":true,"digest":"md5-AAAAAAAAAAAAAAAAAAAAAA=="}}}`), mpPart{"a", "a/b", "", []byte("hello")}), 400, "content_md5_mismatch"},
		{"parts without follows", `multipart/related; boundary=B`, relatedBody("B", []byte(`{"a":1}`), mpPart{"a", "a/b", "", []byte("hello")}), 400, "bad_request"},
		{"JSON over max_document_size", `multipart/related; boundary=B`, relatedBody("B", []byte(`{"a":"`+strings.Repeat("x", 5000)+`"}`)), 413, "document_too_large"},
		{"body over max request size", `multipart/related; boundary=B`, relatedBody("B", []byte(`{"_attachments":{"a":{"follows":true}}}`), mpPart{"a", "a/b", "", bytes.Repeat([]byte("x"), 70<<10)}), 413, "too_large"},
	}
	for _, c := range cases {
		st, out := putRelated(t, s, "/mp/doc", c.ctype, c.body)
		if st != c.wcode || out["error"] != c.werror || out["reason"] == nil {
			t.Errorf("%s: %d %v, want %d %s", c.name, st, out, c.wcode, c.werror)
		}
	}
	// nothing was written by any of them
	mustCall(t, s, 404, "GET", "/mp/doc", nil, nil)
	if st, out := putRelated(t, s, "/mp/doc", `multipart/related; boundary=B`, good); st != 201 {
		t.Fatalf("good body after the bad ones: %d %v", st, out)
	}
	// follows in a plain JSON body stays an error
	mustCall(t, s, 400, "PUT", "/mp/other", string(follows), nil)
}

// readParts reads a multipart body into its parts (headers, body).
func readParts(t *testing.T, r io.Reader, ctype string) []*partOut {
	t.Helper()
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		t.Fatalf("content type %q: %v", ctype, err)
	}
	mr := multipart.NewReader(r, params["boundary"])
	var out []*partOut
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("next part: %v", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("part: %v", err)
		}
		out = append(out, &partOut{h: p.Header, body: b})
	}
}

type partOut struct {
	h    map[string][]string
	body []byte
}

func (p *partOut) get(k string) string {
	if v := p.h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (p *partOut) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p.body, &m); err != nil {
		t.Fatalf("part %q: %v", p.body, err)
	}
	return m
}

// checkRelated checks one multipart/related document: the JSON part with
// follows stubs, then each attachment's bytes as stored.
func checkRelated(t *testing.T, parts []*partOut, want map[string][]byte) map[string]any {
	t.Helper()
	if len(parts) != len(want)+1 || !strings.HasPrefix(parts[0].get("Content-Type"), "application/json") {
		t.Fatalf("%d parts, first %v", len(parts), parts[0].h)
	}
	doc := parts[0].json(t)
	atts := doc["_attachments"].(map[string]any)
	i := 1
	for _, name := range sortedKeys(atts) {
		a := atts[name].(map[string]any)
		if a["follows"] != true {
			continue
		}
		p := parts[i]
		i++
		if _, params, _ := mime.ParseMediaType(p.get("Content-Disposition")); params["filename"] != name {
			t.Fatalf("part %d is %v, want %s", i, p.h, name)
		}
		if a["digest"] != md5Digest(p.body) || fmt.Sprint(len(p.body)) != p.get("Content-Length") {
			t.Fatalf("%s: stub %v, part of %d bytes %v", name, a, len(p.body), p.h)
		}
		data := p.body
		if a["encoding"] == "gzip" {
			if p.get("Content-Encoding") != "gzip" || a["encoded_length"].(float64) != float64(len(p.body)) {
				t.Fatalf("%s: gzip part %v %v", name, a, p.h)
			}
			zr, _ := gzip.NewReader(bytes.NewReader(p.body))
			data, _ = io.ReadAll(zr)
		}
		if !bytes.Equal(data, want[name]) || a["length"].(float64) != float64(len(want[name])) {
			t.Fatalf("%s: %q, want %q (%v)", name, data, want[name], a)
		}
	}
	if i != len(parts) {
		t.Fatalf("%d follows stubs for %d parts", i-1, len(parts)-1)
	}
	return doc
}

func sortedKeys(m map[string]any) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if k[j] < k[i] {
				k[i], k[j] = k[j], k[i]
			}
		}
	}
	return k
}

func TestMultipartGet(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/mp", nil, nil)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	var r1 bulkResult
	mustCall(t, s, 201, "PUT", "/mp/doc", `{"v":1,"_attachments":{"a.txt":{"content_type":"text/plain","data":"`+b64("first text")+`"},`+
		`"b.bin":{"content_type":"application/octet-stream","data":"`+b64("\x00\x01binary")+`"}}}`, &r1)
	var r2 bulkResult
	mustCall(t, s, 201, "PUT", "/mp/doc", `{"_rev":"`+r1.Rev+`","v":2,"_attachments":{"a.txt":{"stub":true},`+
		`"c.txt":{"content_type":"text/plain","data":"`+b64("second")+`"}}}`, &r2)
	// a conflicting leaf without attachments
	mustCall(t, s, 201, "POST", "/mp/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"doc","_rev":"1-ffffffffffffffffffffffffffffffff","v":"other"}]}`, nil)

	// single doc: JSON stays JSON unless multipart/related is asked for
	for _, accept := range []string{"", "application/json", "*/*"} {
		resp := getWith(t, s, "/mp/doc?attachments=true", map[string]string{"Accept": accept})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Type") != "application/json" || !bytes.Contains(b, []byte(`"data":"`)) {
			t.Fatalf("Accept %q: %s %s", accept, resp.Header.Get("Content-Type"), b)
		}
	}
	resp := getWith(t, s, "/mp/doc?attachments=true", map[string]string{"Accept": "multipart/related, application/json"})
	parts := readParts(t, resp.Body, resp.Header.Get("Content-Type"))
	resp.Body.Close()
	if resp.Header.Get("ETag") != `"`+r2.Rev+`"` {
		t.Fatalf("etag %q", resp.Header.Get("ETag"))
	}
	doc := checkRelated(t, parts, map[string][]byte{"a.txt": []byte("first text"), "c.txt": []byte("second")})
	if doc["_rev"] != r2.Rev || doc["v"].(float64) != 2 {
		t.Fatalf("doc %v", doc)
	}
	// atts_since: what the client has stays a stub
	resp = getWith(t, s, "/mp/doc?atts_since=[\""+r1.Rev+"\"]", map[string]string{"Accept": "multipart/related"})
	parts = readParts(t, resp.Body, resp.Header.Get("Content-Type"))
	resp.Body.Close()
	doc = checkRelated(t, parts, map[string][]byte{"c.txt": []byte("second")})
	if a := doc["_attachments"].(map[string]any)["a.txt"].(map[string]any); a["stub"] != true {
		t.Fatalf("a.txt %v", a)
	}

	// open_revs as multipart/mixed, as CouchDB's replicator reads it
	q := `/mp/doc?revs=true&latest=true&open_revs=["` + r2.Rev + `","1-ffffffffffffffffffffffffffffffff","9-99999999999999999999999999999999"]`
	resp = getWith(t, s, q, map[string]string{"Accept": "multipart/mixed"})
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/mixed") {
		t.Fatalf("open_revs content type %q", resp.Header.Get("Content-Type"))
	}
	outer := readParts(t, resp.Body, resp.Header.Get("Content-Type"))
	resp.Body.Close()
	if len(outer) != 3 {
		t.Fatalf("%d parts", len(outer))
	}
	// found revs sorted by rev: 1-fff… (JSON), 2-… (related), then the missing one
	if ct := outer[0].get("Content-Type"); ct != "application/json" || outer[0].json(t)["v"] != "other" {
		t.Fatalf("part 0: %s %s", ct, outer[0].body)
	}
	inner := readParts(t, bytes.NewReader(outer[1].body), outer[1].get("Content-Type"))
	doc = checkRelated(t, inner, map[string][]byte{"a.txt": []byte("first text"), "c.txt": []byte("second")})
	if doc["_revisions"] == nil {
		t.Fatalf("no _revisions: %v", doc)
	}
	if m := outer[2].json(t); m["missing"] != "9-99999999999999999999999999999999" || !strings.Contains(outer[2].get("Content-Type"), `error="true"`) {
		t.Fatalf("missing part %v %v", m, outer[2].h)
	}
	// no Accept: the JSON answer as before
	var plain []map[string]any
	mustCall(t, s, 200, "GET", q, nil, &plain)
	if len(plain) != 3 {
		t.Fatalf("json open_revs %v", plain)
	}

	// the related part of open_revs is a valid PUT ?new_edits=false body:
	// a copy written from it serves the same bytes and digests
	mustCall(t, s, 201, "PUT", "/copy", nil, nil)
	boundary := "copyboundary"
	body := relatedBody(boundary, inner[0].body,
		mpPart{"a.txt", "text/plain", inner[1].get("Content-Encoding"), inner[1].body},
		mpPart{"c.txt", "text/plain", inner[2].get("Content-Encoding"), inner[2].body})
	st, out := putRelated(t, s, "/copy/doc?new_edits=false", "multipart/related; boundary="+boundary, body)
	if st != 201 {
		t.Fatalf("copy: %d %v", st, out)
	}
	var orig, cp map[string]any
	mustCall(t, s, 200, "GET", "/mp/doc?rev="+r2.Rev, nil, &orig)
	mustCall(t, s, 200, "GET", "/copy/doc", nil, &cp)
	if fmt.Sprint(orig["_attachments"]) != fmt.Sprint(cp["_attachments"]) {
		t.Fatalf("copy differs:\n%v\n%v", orig["_attachments"], cp["_attachments"])
	}

	// _bulk_get as multipart/mixed
	req := s.NewRequest(t, "POST", "/mp/_bulk_get?revs=true", `{"docs":[{"id":"doc","rev":"`+r2.Rev+`"},{"id":"doc","rev":"1-ffffffffffffffffffffffffffffffff"},{"id":"nope"},{"id":"doc","rev":"bad"}]}`)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Accept", "multipart/mixed")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	outer = readParts(t, resp.Body, resp.Header.Get("Content-Type"))
	resp.Body.Close()
	if len(outer) != 4 {
		t.Fatalf("bulk_get: %d parts", len(outer))
	}
	if outer[0].get("X-Doc-Id") != "doc" || outer[0].get("X-Rev-Id") != r2.Rev {
		t.Fatalf("bulk_get part 0 %v", outer[0].h)
	}
	checkRelated(t, readParts(t, bytes.NewReader(outer[0].body), outer[0].get("Content-Type")),
		map[string][]byte{"a.txt": []byte("first text"), "c.txt": []byte("second")})
	if outer[1].json(t)["v"] != "other" {
		t.Fatalf("bulk_get part 1 %s", outer[1].body)
	}
	for _, p := range outer[2:] {
		if m := p.json(t); m["error"] == nil || !strings.Contains(p.get("Content-Type"), "error") {
			t.Fatalf("bulk_get error part %v %v", m, p.h)
		}
	}
	// JSON by default, and when JSON is acceptable at all
	req = s.NewRequest(t, "POST", "/mp/_bulk_get", `{"docs":[{"id":"doc"}]}`)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Accept", "multipart/mixed, application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("bulk_get with JSON acceptable: %s", resp.Header.Get("Content-Type"))
	}
}

// FuzzMultipartPut sends arbitrary multipart/related bodies to PUT
// /db/doc: whatever the body, a success or a CouchDB-style 4xx error,
// never a 500.
func FuzzMultipartPut(f *testing.F) {
	follows := []byte(`{"_attachments":{"a.txt":{"follows":true,"length":5},"b":{"follows":true,"encoding":"gzip"}}}`)
	for _, seed := range [][]byte{
		relatedBody("B", follows, mpPart{"a.txt", "text/plain", "", []byte("hello")}, mpPart{"b", "x/y", "gzip", gzipped("zz")}),
		relatedBody("B", []byte(`{"_id":"x","_rev":"1-abc","_revisions":{"start":1,"ids":["abc"]},"_attachments":{"a":{"follows":true}}}`), mpPart{"a", "a/b", "", []byte("x")}),
		relatedBody("B", []byte(`{"_attachments":{"a":{"stub":true}}}`)),
		relatedBody("B", []byte(`{}`), mpPart{"a", "a/b", "", []byte("x")}),
		[]byte("--B\r\nContent-Type: application/json\r\n\r\n{}"),
		[]byte("--B\r\n\r\n{}\r\n--B--"),
		{},
	} {
		f.Add(seed, "new_edits=false")
		f.Add(seed, "")
	}
	s := testserver.Start(f)
	resp := s.Do(f, "PUT", "/fm", nil)
	resp.Body.Close()
	n := 0
	f.Fuzz(func(t *testing.T, body []byte, query string) {
		if query != "" && query != "new_edits=false" {
			query = ""
		}
		n++
		req := s.NewRequest(t, "PUT", fmt.Sprintf("/fm/d%d?%s", n, query), body)
		req.Header.Set("Content-Type", "multipart/related; boundary=B")
		req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%q: status %d: %s", body, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 {
			var e struct{ Error, Reason string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Fatalf("%q: status %d with body %q", body, resp.StatusCode, b)
			}
		}
	})
}
