package replicator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/replicator"
)

// The numbers behind the multipart choices (replicator/DESIGN.md):
//
//	go test ./replicator/ -run '^$' -bench 'Atts' -benchtime 3x
//
// BenchmarkWriteAtts writes ~8 MB of docs, each with one attachment of a
// given size, the way the batcher does (batches of <= 500 docs or 4 MB),
// as base64 in _bulk_docs or as a multipart PUT per doc.
// BenchmarkReadAtts fetches them back as the worker can: _bulk_get JSON
// (base64), one GET open_revs as multipart/mixed per doc (CouchDB's
// replicator), or _bulk_get as multipart/mixed.

const benchVolume = 8 << 20

var benchSizes = []int{4 << 10, 16 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20}

func benchDocs(size int, prefix string) [][]byte {
	rnd := rand.New(rand.NewSource(int64(size)))
	n := max(benchVolume/size, 8)
	docs := make([][]byte, n)
	data := make([]byte, size)
	for i := range docs {
		rnd.Read(data)
		docs[i] = fmt.Appendf(nil, `{"_id":"%s%05d","_rev":"1-%032x","_revisions":{"start":1,"ids":["%032x"]},"n":%d,"_attachments":{"a.bin":{"content_type":"application/octet-stream","revpos":1,"data":"%s"}}}`,
			prefix, i, i, i, i, base64.StdEncoding.EncodeToString(data))
	}
	return docs
}

func benchEndpoint(tb testing.TB, s *testserver.Server, db string) *replicator.HTTPEndpoint {
	tb.Helper()
	sp, err := replicator.ParseSpec(json.RawMessage(fmt.Sprintf("%q", strings.Replace(s.URL, "http://", "http://"+testserver.AdminUser+":"+testserver.AdminPassword+"@", 1)+"/"+db)))
	if err != nil {
		tb.Fatal(err)
	}
	return replicator.NewHTTPEndpoint(sp)
}

// batches cuts docs as the batcher does.
func batches(docs [][]byte) [][][]byte {
	var out [][][]byte
	var cur [][]byte
	n := 0
	for _, d := range docs {
		cur = append(cur, d)
		n += len(d)
		if len(cur) >= 500 || n >= 4<<20 {
			out, cur, n = append(out, cur), nil, 0
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func BenchmarkWriteAtts(b *testing.B) {
	s := testserver.Start(b)
	for _, size := range benchSizes {
		docs := benchDocs(size, "w")
		for _, mode := range []string{"json", "multipart"} {
			b.Run(fmt.Sprintf("%s/%dKB", mode, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(docs) * size))
				for i := range b.N {
					db := fmt.Sprintf("w%d%s%d", size, mode, i)
					resp := s.Do(b, "PUT", "/"+db, nil)
					resp.Body.Close()
					e := benchEndpoint(b, s, db)
					e.MultipartMin = -1
					if mode == "multipart" {
						e.MultipartMin = 1
					}
					for _, batch := range batches(docs) {
						if failed, err := e.BulkDocs(context.Background(), batch); err != nil || failed > 0 {
							b.Fatalf("%d failed, %v", failed, err)
						}
					}
				}
			})
		}
	}
}

func BenchmarkReadAtts(b *testing.B) {
	s := testserver.Start(b)
	for _, size := range benchSizes {
		docs := benchDocs(size, "r")
		db := fmt.Sprintf("r%d", size)
		resp := s.Do(b, "PUT", "/"+db, nil)
		resp.Body.Close()
		e := benchEndpoint(b, s, db)
		for _, batch := range batches(docs) {
			if _, err := e.BulkDocs(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		items := make([]replicator.FetchItem, len(docs))
		for i := range docs {
			items[i] = replicator.FetchItem{ID: fmt.Sprintf("r%05d", i), Rev: fmt.Sprintf("1-%032x", i)}
		}
		b.Run(fmt.Sprintf("bulk_get_json/%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(docs) * size))
			for range b.N {
				n := 0
				for len(items[n:]) > 0 {
					k := min(100, len(items[n:]))
					if _, err := e.Fetch(context.Background(), items[n:n+k], func(string, []byte) {}); err != nil {
						b.Fatal(err)
					}
					n += k
				}
			}
		})
		b.Run(fmt.Sprintf("open_revs_mixed/%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(docs) * size))
			for range b.N {
				for _, it := range items {
					readMultipart(b, s, "GET", "/"+db+"/"+it.ID+`?revs=true&latest=true&open_revs=["`+it.Rev+`"]`, "")
				}
			}
		})
		b.Run(fmt.Sprintf("bulk_get_mixed/%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(docs) * size))
			for range b.N {
				for n := 0; n < len(items); n += 100 {
					var sb strings.Builder
					sb.WriteString(`{"docs":[`)
					for i, it := range items[n:min(n+100, len(items))] {
						if i > 0 {
							sb.WriteByte(',')
						}
						fmt.Fprintf(&sb, `{"id":%q,"rev":%q}`, it.ID, it.Rev)
					}
					sb.WriteString("]}")
					readMultipart(b, s, "POST", "/"+db+"/_bulk_get?revs=true&latest=true", sb.String())
				}
			}
		})
	}
}

// readMultipart reads a multipart/mixed answer down to every part's bytes.
func readMultipart(b *testing.B, s *testserver.Server, method, path, body string) {
	var req *http.Request
	if body == "" {
		req = s.NewRequest(b, method, path, nil)
	} else {
		req = s.NewRequest(b, method, path, body)
	}
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Accept", "multipart/mixed")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var walk func(r io.Reader, ct string)
	walk = func(r io.Reader, ct string) {
		_, params, err := mime.ParseMediaType(ct)
		if err != nil {
			b.Fatalf("%s: %v", ct, err)
		}
		mr := multipart.NewReader(r, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return
			}
			if err != nil {
				b.Fatal(err)
			}
			if pct := p.Header.Get("Content-Type"); strings.HasPrefix(pct, "multipart/") {
				walk(p, pct)
			} else if _, err := io.Copy(io.Discard, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	walk(resp.Body, resp.Header.Get("Content-Type"))
}
