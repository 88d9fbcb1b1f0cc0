package replicator_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"

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
