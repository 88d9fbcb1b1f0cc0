package httpgw_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// BenchmarkGetDoc is fabric_bench's random get: one client, sequential
// GETs of a medium-sized doc, through HTTP, the actors and badger.
func BenchmarkGetDoc(b *testing.B) {
	s := testserver.Start(b)
	resp := s.Do(b, "PUT", "/bg", nil)
	resp.Body.Close()
	body := `{"data":"` + string(bytes.Repeat([]byte("x"), 14000)) + `"}`
	for i := range 100 {
		resp := s.Do(b, "PUT", fmt.Sprintf("/bg/d%d", i), body)
		resp.Body.Close()
	}
	req := s.NewRequest(b, "GET", "/bg/d1", nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.URL.Path = fmt.Sprintf("/bg/d%d", i%100)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}

// discardWriter is a ResponseWriter that keeps nothing: the handler's own
// cost, without a socket or a client.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(s int)           { w.status = s }

// BenchmarkGetDocHandler is a random doc GET through the gateway's
// handler alone, in process: authentication, routing, the coordinator,
// the shard's read and the render, without net/http's connection work (a
// GET's share of it is the same for any server in Go).
func BenchmarkGetDocHandler(b *testing.B) {
	s, h := startWithHandler(b)
	resp := s.Do(b, "PUT", "/bg", nil)
	resp.Body.Close()
	body := `{"data":"` + string(bytes.Repeat([]byte("x"), 14000)) + `"}`
	const docs = 1000
	for i := range docs {
		resp := s.Do(b, "PUT", fmt.Sprintf("/bg/d%d", i), body)
		resp.Body.Close()
	}
	reqs := make([]*http.Request, docs)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", fmt.Sprintf("/bg/d%d", i), nil)
		reqs[i].SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		clear(w.h)
		h.ServeHTTP(w, reqs[(i*7919)%docs])
		if w.status != 200 {
			b.Fatal(w.status)
		}
	}
}

// startWithHandler starts a node and hands back the gateway it serves, to
// be called in process or served by a test's own http.Server.
func startWithHandler(tb testing.TB) (*testserver.Server, http.Handler) {
	var h http.Handler
	s := testserver.Start(tb, func(cfg *node.Config) {
		build := cfg.Handler
		cfg.Handler = func(svc node.Services) (http.Handler, error) {
			var err error
			h, err = build(svc)
			return h, err
		}
	})
	return s, h
}
