package replicator_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

func attBytes(t *testing.T, s *testserver.Server, path string) []byte {
	t.Helper()
	resp := s.Do(t, "GET", path, nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// TestMultipartWrites: docs with big attachments go to an HTTP target as
// multipart/related PUTs (new_edits=false), small ones in _bulk_docs,
// except that a doc with an attachment stored gzipped always goes as a
// PUT, whose part carries the stored bytes: the copies have the same
// bytes and the same digests, and a later rev that keeps an attachment as
// a stub goes the same way. A target that refuses multipart gets JSON.
func TestMultipartWrites(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	pb := newProxy(t, b)
	must(t, a, "PUT", "/src", nil, 201)
	rnd := rand.New(rand.NewSource(1))
	bin := make([]byte, 300<<10)
	rnd.Read(bin)
	text := strings.Repeat("compressible text line\n", 8000) // 184 KB
	b64 := base64.StdEncoding.EncodeToString
	must(t, a, "PUT", "/src/big", `{"kind":"big","_attachments":{"photo.bin":{"content_type":"application/octet-stream","data":"`+b64(bin)+`"},`+
		`"notes.txt":{"content_type":"text/plain","data":"`+b64([]byte(text))+`"}}}`, 201)
	must(t, a, "PUT", "/src/small", `{"_attachments":{"s.txt":{"content_type":"text/plain","data":"`+b64([]byte("tiny"))+`"}}}`, 201)
	loadDocs(t, a, "src", 0, 20, "")

	check := func(db string) {
		t.Helper()
		sameLeaves(t, a, "src", b, db)
		if got := attBytes(t, b, "/"+db+"/big/photo.bin"); !bytes.Equal(got, bin) {
			t.Fatalf("photo.bin: %d bytes differ", len(got))
		}
		if got := attBytes(t, b, "/"+db+"/big/notes.txt"); string(got) != text {
			t.Fatalf("notes.txt: %d bytes differ", len(got))
		}
		if got := attBytes(t, b, "/"+db+"/small/s.txt"); string(got) != "tiny" {
			t.Fatalf("s.txt %q", got)
		}
		src := must(t, a, "GET", "/src/big", nil, 200)["_attachments"].(map[string]any)
		dst := must(t, b, "GET", "/"+db+"/big", nil, 200)["_attachments"].(map[string]any)
		for _, n := range []string{"photo.bin", "notes.txt"} {
			s, d := src[n].(map[string]any), dst[n].(map[string]any)
			if s["length"] != d["length"] || s["revpos"] != d["revpos"] || s["content_type"] != d["content_type"] {
				t.Fatalf("%s: %v vs %v", n, s, d)
			}
		}
		// every attachment keeps its digest: identity data of an
		// incompressible type, and the stored gzip bytes of a text
		for _, n := range []string{"photo.bin", "notes.txt"} {
			if src[n].(map[string]any)["digest"] != dst[n].(map[string]any)["digest"] {
				t.Fatalf("%s digest %v vs %v", n, src[n], dst[n])
			}
		}
	}

	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("tgt"), "create_target": true}, 200)
	check("tgt")
	if n := pb.count("PUT doc"); n != 2 {
		t.Fatalf("%d multipart PUTs, want 2 (the big doc, the small one with a text)", n)
	}
	pb.mu.Lock()
	puts, bulk := pb.puts, pb.docsIn
	pb.mu.Unlock()
	if puts != 2 || bulk != 20 {
		t.Fatalf("PUT %d docs, _bulk_docs %d docs", puts, bulk)
	}

	// a new rev keeps photo.bin as a stub and adds a big attachment:
	// atts_since leaves the stub out of the fetch and of the PUT
	doc := must(t, a, "GET", "/src/big", nil, 200)
	atts := doc["_attachments"].(map[string]any)
	delete(atts, "notes.txt")
	more := bytes.Repeat([]byte{7, 1, 9}, 70<<10)
	atts["more.bin"] = map[string]any{"content_type": "application/octet-stream", "data": b64(more)}
	must(t, a, "PUT", "/src/big", doc, 201)
	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("tgt")}, 200)
	sameLeaves(t, a, "src", b, "tgt")
	if got := attBytes(t, b, "/tgt/big/more.bin"); !bytes.Equal(got, more) {
		t.Fatal("more.bin differs")
	}
	if got := attBytes(t, b, "/tgt/big/photo.bin"); !bytes.Equal(got, bin) {
		t.Fatal("photo.bin (a stub in the new rev) differs")
	}
	if n := pb.count("PUT doc"); n != 3 {
		t.Fatalf("%d multipart PUTs after the update, want 3", n)
	}

	// a target that refuses multipart documents gets them as JSON
	pb.set(&fault{kind: status, match: "PUT doc", code: 415, body: `{"error":"bad_content_type","reason":"Content-Type must be application/json"}`})
	doc = must(t, a, "GET", "/src/big", nil, 200)
	must(t, a, "PUT", "/src/big", doc, 201)
	must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("json"), "create_target": true}, 200)
	sameLeaves(t, a, "src", b, "json")
	if !bytes.Equal(attBytes(t, b, "/json/big/photo.bin"), bin) || !bytes.Equal(attBytes(t, b, "/json/big/more.bin"), more) {
		t.Fatal("attachments written as JSON differ")
	}
	if got := attBytes(t, b, "/json/small/s.txt"); string(got) != "tiny" {
		t.Fatalf("s.txt written as JSON: %q", got)
	}
	if n := pb.count("PUT doc"); n != 4 {
		t.Fatalf("%d multipart PUTs, want one more (refused) and no further", n)
	}

	// the target refuses the doc itself: a write failure, the rest is written
	pb.set(&fault{kind: status, match: "PUT doc", code: 403, body: `{"error":"forbidden","reason":"no big docs here"}`})
	res := must(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("forbidden"), "create_target": true}, 200)
	// (both docs with attachments go as PUTs)
	if h := history0(t, res); h["doc_write_failures"].(float64) != 2 || h["docs_written"].(float64) != 20 {
		t.Fatalf("history %v", h)
	}
	// every doc came through the source's _bulk_get (CouchDB's counters)
	if h := history0(t, res); h["bulk_get_docs"] != h["docs_read"] || h["bulk_get_attempts"] != h["docs_read"] {
		t.Fatalf("bulk_get counters of history %v", h)
	}
	// credentials that stop working fail the job instead of skipping the doc
	pb.set(&fault{kind: status, match: "PUT doc", code: 401, body: `{"error":"unauthorized","reason":"Name or password is incorrect."}`})
	st, out := call(t, b, "POST", "/_replicate", map[string]any{"source": dbURL(a, "src"), "target": pb.dbURL("unauth"), "create_target": true})
	if st != 500 || !strings.Contains(fmt.Sprint(out["reason"]), "401 unauthorized") {
		t.Fatalf("401 on the PUT: %d %v", st, out)
	}
}
