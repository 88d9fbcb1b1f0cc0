package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRangeFindCeiling measures what the mango workload's range
// phase can reach on this machine whatever the server does: a bare
// net/http server answers every _find with the same 25 medium docs
// (what a range find answers), and the workload's own client sends the
// finds from its 4 clients and checks each answer as it does against a
// database. The q/s it reports bounds the range phase's figure from
// above (the server here does no work but the write).
//
//	go test ./bench -run '^$' -bench RangeFindCeiling -benchtime 6000x
func BenchmarkRangeFindCeiling(b *testing.B) {
	gen, err := newDocGen(DocMedium, 1)
	if err != nil {
		b.Fatal(err)
	}
	const n = 25
	g, v := make([]int, n), make([]int, n)
	want := make([]int, n)
	body := []byte(`{"docs":[`)
	for i := range n {
		g[i], v[i], want[i] = 7, 100+i, i
		if i > 0 {
			body = append(body, ",\n"...)
		}
		doc := appendMangoDoc(nil, gen, i, g[i], v[i])
		// the stored doc's _rev after its _id, as a find answers it
		body = append(body, doc[:len(`{"_id":"doc00000000"`)]...)
		body = append(body, `,"_rev":"1-967a00dff5e02add41819138abb3284d"`...)
		body = append(body, doc[len(`{"_id":"doc00000000"`):]...)
	}
	body = append(body, "\n],\n"+`"bookmark": "g1AAAABweJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYqz5yfnl-YVAwBLbgfs"}`...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c, err := newClient(srv.URL, 4)
	if err != nil {
		b.Fatal(err)
	}
	m := &mangoRun{runner: &runner{cfg: Config{Concurrency: 4}, c: c, prog: &progress{w: io.Discard, every: 1 << 40}, dbPath: "/db"}}
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"selector":{"g":7,"v":{"$gt":%d}},"sort":[{"g":"asc"},{"v":"asc"}],"limit":25}`, i)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	st, err := m.finds(context.Background(), "range finds", bodies, func(_ int, resp []byte) (int, error) {
		return checkFindDocs(resp, want, g, v, false)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(st.hz, "finds/s")
	b.ReportMetric(st.p99, "p99-ms")
}
