package replicator_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/replicator"
)

// BenchmarkReplicateAtts replicates ~16 MB of docs, each with one
// attachment of a given size, HTTP to HTTP between two servers
// (POST /_replicate into a fresh target db each time), writing all docs
// as JSON (multipart_min=-1) or with the default multipart threshold.
func BenchmarkReplicateAtts(b *testing.B) {
	a, t := testserver.Start(b), testserver.Start(b)
	def := replicator.DefaultMultipartMin
	defer func() { replicator.DefaultMultipartMin = def }()
	for _, size := range []int{4 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20} {
		src := fmt.Sprintf("e2e%d", size)
		resp := a.Do(b, "PUT", "/"+src, nil)
		resp.Body.Close()
		rnd := rand.New(rand.NewSource(int64(size)))
		data := make([]byte, size)
		n := (16 << 20) / size
		for i := 0; i < n; {
			var docs []string
			for ; i < n && len(docs)*size < 4<<20; i++ {
				rnd.Read(data)
				docs = append(docs, fmt.Sprintf(`{"_id":"d%05d","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":"%s"}}}`, i, base64.StdEncoding.EncodeToString(data)))
			}
			resp := a.Do(b, "POST", "/"+src+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		for _, min := range []int{-1, def} {
			b.Run(fmt.Sprintf("%dKB/multipart_min=%d", size>>10, min), func(b *testing.B) {
				replicator.DefaultMultipartMin = min
				b.SetBytes(int64(n * size))
				for range b.N {
					body := fmt.Sprintf(`{"source":%q,"target":%q,"create_target":true}`, e2eURL(a, src), e2eURL(t, fmt.Sprintf("%s_%d", src, e2eSeq.Add(1))))
					resp := t.Do(b, "POST", "/_replicate", body)
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || !strings.Contains(string(out), fmt.Sprintf(`"docs_written":%d`, n)) {
						b.Fatalf("%d %s", resp.StatusCode, out)
					}
				}
			})
		}
	}
}

var e2eSeq atomic.Int64

func e2eURL(s *testserver.Server, db string) string {
	return strings.Replace(s.URL, "http://", "http://"+testserver.AdminUser+":"+testserver.AdminPassword+"@", 1) + "/" + db
}

// BenchmarkReplicateLatency replicates 8,000 docs of 2 KB HTTP to HTTP
// through proxies that add latency, as a distant or busy peer would: 10 ms
// to each _bulk_get answer and 25 ms to each _bulk_docs answer. A worker
// that waited for its batch to be written before fetching the next one
// paid both for every batch.
func BenchmarkReplicateLatency(b *testing.B) {
	a, t := testserver.Start(b), testserver.Start(b)
	const n = 8000
	resp := a.Do(b, "PUT", "/lat", nil)
	resp.Body.Close()
	pad := strings.Repeat("x", 2000)
	for i := 0; i < n; {
		var docs []string
		for ; i < n && len(docs) < 500; i++ {
			docs = append(docs, fmt.Sprintf(`{"_id":"d%05d","pad":"%s"}`, i, pad))
		}
		resp := a.Do(b, "POST", "/lat/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	slow := func(s *testserver.Server, path string, d time.Duration) string {
		u, _ := url.Parse(s.URL)
		rp := httputil.NewSingleHostReverseProxy(u)
		ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, path) {
				time.Sleep(d)
			}
			rp.ServeHTTP(w, r)
		}))
		b.Cleanup(ps.Close)
		return strings.Replace(ps.URL, "http://", "http://"+testserver.AdminUser+":"+testserver.AdminPassword+"@", 1)
	}
	src := slow(a, "/_bulk_get", 10*time.Millisecond) + "/lat"
	tgt := slow(t, "/_bulk_docs", 25*time.Millisecond)
	b.ResetTimer()
	for range b.N {
		body := fmt.Sprintf(`{"source":%q,"target":%q,"create_target":true}`, src, fmt.Sprintf("%s/lat_%d", tgt, e2eSeq.Add(1)))
		resp := t.Do(b, "POST", "/_replicate", body)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(out), fmt.Sprintf(`"docs_written":%d`, n)) {
			b.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
}
