package onewrite_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settee/settee/onewrite"
)

// counting counts the writes that reach the socket.
type counting struct {
	net.Listener
	writes *atomic.Int64
}

func (l counting) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, writes: l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// serve runs h behind onewrite on a loopback port, counting the socket's
// writes; it answers the base URL.
func serve(t *testing.T, h http.Handler) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	writes := new(atomic.Int64)
	srv := &http.Server{Handler: h, ConnContext: onewrite.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(onewrite.Listen(counting{ln, writes})) })
	t.Cleanup(func() {
		_ = srv.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), writes
}

func body(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// handler answers /held/N and /plain/N with N bytes, held or not;
// /deferred/N holds but returns without flushing (the deferred send goes
// first, net/http writes the rest after); /copy/N holds and copies the
// body from a reader (net/http's ReadFrom).
func handler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := strings.LastIndexByte(r.URL.Path, '/')
		kind := r.URL.Path[1:max(i, 1)]
		n, _ := strconv.Atoi(r.URL.Path[i+1:])
		b := body(n)
		w.Header().Set("Content-Length", strconv.Itoa(n))
		switch kind {
		case "plain":
			_, _ = w.Write(b)
		case "held", "deferred", "copy":
			send := onewrite.Hold(r, n)
			if (send == nil) != (n > onewrite.MaxHold) {
				t.Errorf("%s: Hold of %d bytes: %v", r.URL.Path, n, send != nil)
			}
			if send != nil {
				defer func() {
					if err := send(); err != nil {
						t.Error(err)
					}
				}()
			}
			if kind == "copy" {
				_, _ = io.Copy(w, bytes.NewReader(b))
			} else {
				_, _ = w.Write(b)
			}
			if kind != "deferred" {
				w.(http.Flusher).Flush()
			}
		default:
			t.Errorf("path %q", r.URL.Path)
		}
	})
}

// TestOneWrite: a held answer reaches the socket in one write, header and
// body; the same answer unheld takes net/http's two; every answer on a
// kept-alive connection is whole and in order, held or not, big or small.
func TestOneWrite(t *testing.T) {
	base, writes := serve(t, handler(t))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	get := func(path string, n int) int64 {
		t.Helper()
		before := writes.Load()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body(n)) {
			t.Fatalf("GET %s: %d, %d bytes, %v", path, resp.StatusCode, len(got), err)
		}
		return writes.Load() - before
	}
	for _, tc := range []struct {
		path   string
		n      int
		writes int64 // 0: not checked
	}{
		{"/plain/15000", 15000, 2},
		{"/held/15000", 15000, 1},
		{"/held/100", 100, 1},
		{"/copy/15000", 15000, 1},
		{"/deferred/15000", 15000, 0},
		{"/plain/100", 100, 1},
		{"/held/200000", 200000, 1},
		{fmt.Sprintf("/held/%d", onewrite.MaxHold+1), onewrite.MaxHold + 1, 0},
		{"/held/15000", 15000, 1},
	} {
		if w := get(tc.path, tc.n); tc.writes != 0 && w != tc.writes {
			t.Errorf("GET %s: %d writes, want %d", tc.path, w, tc.writes)
		}
	}
}

// TestPipelined: answers held on one connection stay whole and in order
// when the client sends the next requests before reading.
func TestPipelined(t *testing.T) {
	base, _ := serve(t, handler(t))
	c, err := net.Dial("tcp", base[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sizes := []int{15000, 100, 40000, 5000}
	for _, n := range sizes {
		fmt.Fprintf(c, "GET /held/%d HTTP/1.1\r\nHost: x\r\n\r\n", n)
	}
	br := bufio.NewReader(c)
	for _, n := range sizes {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !bytes.Equal(got, body(n)) {
			t.Fatalf("answer of %d: %d bytes, %v", n, len(got), err)
		}
	}
}

// TestNoConnection: a request that did not come through Listen's
// connection (an in-process call) gets no hold.
func TestNoConnection(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	if onewrite.Hold(r, 10) != nil {
		t.Fatal("Hold without a connection")
	}
}
