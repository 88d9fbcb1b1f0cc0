package httpgw_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/onewrite"
)

// writeCounter counts the writes that reach its connections' sockets.
type writeCounter struct {
	net.Listener
	n atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{c, &l.n}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// TestAnswersInOneWrite: a doc of 15 KB and one of 100 KB, and a
// _bulk_get answer of 40 KB, reach the socket in one write each, header
// and all, as the node serves them (onewrite under net/http); a streamed
// _all_docs of the same bytes is written as it goes. The gateway's
// handler is served here as the node serves it, over a listener that
// counts the writes.
func TestAnswersInOneWrite(t *testing.T) {
	s, h := startWithHandler(t)
	s.Do(t, "PUT", "/ow", nil).Body.Close()
	for _, d := range []struct {
		id   string
		size int
	}{{"mid", 15000}, {"big", 100000}, {"small", 100}} {
		body := `{"data":"` + strings.Repeat("x", d.size) + `"}`
		if resp := s.Do(t, "PUT", "/ow/"+d.id, body); resp.StatusCode != 201 {
			t.Fatalf("PUT %s: %d", d.id, resp.StatusCode)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{Listener: ln}
	srv := &http.Server{Handler: h, ConnContext: onewrite.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(onewrite.Listen(wc)) })
	defer func() {
		_ = srv.Close()
		wg.Wait()
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	ask := func(method, path, body string) (int64, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+ln.Addr().String()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
		req.Header.Set("Content-Type", "application/json")
		before := wc.n.Load()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return wc.n.Load() - before, b
	}
	for _, id := range []string{"mid", "big", "small"} {
		n, b := ask("GET", "/ow/"+id, "")
		if n != 1 {
			t.Errorf("GET /ow/%s (%d bytes): %d writes, want 1", id, len(b), n)
		}
		if !bytes.HasPrefix(b, []byte(`{"_id":"`+id+`","_rev":"1-`)) || !bytes.HasSuffix(b, []byte("\"}\n")) {
			t.Errorf("GET /ow/%s: %.80q", id, b)
		}
	}
	n, b := ask("POST", "/ow/_bulk_get", `{"docs":[{"id":"mid"},{"id":"mid"},{"id":"small"}]}`)
	if n != 1 || len(b) < 30000 {
		t.Errorf("_bulk_get: %d bytes in %d writes, want 1 write", len(b), n)
	}
	n, b = ask("GET", "/ow/_all_docs?include_docs=true", "")
	if n < 2 || !bytes.Contains(b, []byte(`"total_rows":3`)) {
		t.Errorf("_all_docs?include_docs=true: %d bytes in %d writes; a stream is not held", len(b), n)
	}
}
