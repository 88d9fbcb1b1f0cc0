package resourcetest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

var basicAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass))

// rawRequest opens a connection and sends a request's head, as an
// attacker would: nothing checks what it announces.
func (n *node) rawRequest(t *testing.T, method, path string, header map[string]string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, n.addr)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatalf("write: %v", err)
	}
	return c
}

// Case 1: connections announce 4 GiB bodies and send one byte. Each once
// cost its announced length in memory before a byte arrived (eight took
// the node to 5.5–8.5 GB).
func TestAnnouncedHugeBodies(t *testing.T) {
	n := startNode(t)
	n.setup()
	n.must("PUT", "/open", "", nil, 201) // anonymous may write here
	w := n.watch()
	var conns []net.Conn
	for i := 0; i < 64; i++ {
		var c net.Conn
		h := map[string]string{"Content-Type": "application/json", "Content-Length": "4294967296"}
		switch i % 4 {
		case 0:
			c = n.rawRequest(t, "POST", "/_session", h)
		case 1:
			c = n.rawRequest(t, "PUT", "/open/doc"+fmt.Sprint(i), h)
		case 2:
			h["Authorization"] = basicAuth
			c = n.rawRequest(t, "POST", "/plain/_bulk_docs", h)
		case 3:
			h["Authorization"] = basicAuth
			c = n.rawRequest(t, "PUT", "/plain/att/a.bin", h)
		}
		_, _ = c.Write([]byte("{"))
		conns = append(conns, c)
	}
	time.Sleep(3 * time.Second)
	w.end(t)
	for _, c := range conns {
		c.Close()
	}
}

// A client that stops sending its body is cut off after settee/io_timeout.
func TestStalledBodyIsCutOff(t *testing.T) {
	n := startNode(t)
	n.setup()
	n.setConfig("settee", "io_timeout", "2s")
	w := n.watch()
	var wg sync.WaitGroup
	closed := make(chan time.Duration, 32)
	for i := 0; i < 32; i++ {
		c := n.rawRequest(t, "POST", "/plain/_bulk_docs", map[string]string{
			"Authorization": basicAuth, "Content-Type": "application/json", "Content-Length": "1000"})
		_, _ = c.Write([]byte(`{"docs":[`))
		start := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, _ = io.Copy(io.Discard, c) // until the node closes it
			closed <- time.Since(start)
		}()
	}
	wg.Wait()
	close(closed)
	w.end(t)
	for d := range closed {
		if d < 1500*time.Millisecond || d > 10*time.Second {
			t.Errorf("a stalled body's connection closed after %v, want about io_timeout (2s)", d)
		}
	}
}

// bomb is a gzip stream that inflates to 1 GiB of spaces (valid JSON
// whitespace, so no parser stops it early) from about 1 MB: 1,024 gzip
// members, each one MiB of spaces.
func bomb(t *testing.T) []byte {
	t.Helper()
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	_, _ = zw.Write(bytes.Repeat([]byte(" "), 1<<20))
	_ = zw.Close()
	return bytes.Repeat(one.Bytes(), 1024)
}

// Case 5 and its family: a zip bomb to every endpoint that takes a body.
// The 1 MB body to /_session once inflated to 2.7 GB and 63 s of CPU.
func TestZipBombs(t *testing.T) {
	n := startNode(t)
	n.setup()
	n.must("PUT", "/plain/_design/d", "application/json", []byte(`{"views":{"v":{"map":"function(d){emit(d._id,1)}"}}}`), 201)
	z := bomb(t)
	t.Logf("bomb: %d bytes, inflating to 1 GiB", len(z))
	w := n.watch()
	for _, ep := range []struct{ method, path string }{
		{"POST", "/_session"},
		{"PUT", "/_node/_local/_config/x/y"},
		{"PUT", "/plain/_security"},
		{"POST", "/plain/_index"},
		{"POST", "/_replicate"},
		{"POST", "/plain"},
		{"PUT", "/plain/bombed"},
		{"POST", "/plain/_bulk_docs"},
		{"POST", "/plain/_all_docs"},
		{"POST", "/plain/_all_docs/queries"},
		{"POST", "/plain/_bulk_get"},
		{"POST", "/plain/_revs_diff"},
		{"POST", "/plain/_missing_revs"},
		{"POST", "/plain/_find"},
		{"POST", "/plain/_explain"},
		{"POST", "/plain/_purge"},
		{"POST", "/plain/_changes"},
		{"PUT", "/plain/_local/l"},
		{"PUT", "/plain/withatt/a.bin"},
		{"POST", "/plain/_design/d/_view/v"},
		{"PUT", "/_users/org.couchdb.user:bomb"},
		{"POST", "/_dbs_info"},
		{"POST", "/_cluster_setup"},
		{"PUT", "/plain/_revs_limit"},
		{"POST", "/plain/_compact"},
		{"POST", "/plain/_view_cleanup"},
	} {
		req, _ := http.NewRequest(ep.method, n.adminURL(ep.path), bytes.NewReader(z))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		start := time.Now()
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			// the node may answer and close before the whole bomb is sent
			t.Logf("%s %s: %v", ep.method, ep.path, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s %s: %d %s in %v", ep.method, ep.path, resp.StatusCode, bytes.TrimSpace(b), time.Since(start).Round(time.Millisecond))
		if resp.StatusCode >= 500 {
			t.Errorf("%s %s: %d %s", ep.method, ep.path, resp.StatusCode, b)
		}
	}
	w.end(t)
}

// Slow bodies and slow headers: bytes trickle in on hundreds of
// connections, each the least a server must keep for it.
func TestSlowLoris(t *testing.T) {
	n := startNode(t)
	n.setup()
	w := n.watch()
	var conns []net.Conn
	for i := 0; i < 400; i++ {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// half send a header a byte at a time, half a body
	head := "POST /plain/_bulk_docs HTTP/1.1\r\nHost: x\r\nAuthorization: " + basicAuth + "\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
	for i, c := range conns {
		if i%2 == 1 {
			_, _ = io.WriteString(c, head+`{"docs":[`)
		}
	}
	for step := 0; step < 20; step++ {
		for i, c := range conns {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			if i%2 == 0 {
				if step < len("GET /_up HTTP/1.1\r\nX-Slow: ") {
					_, _ = io.WriteString(c, string("GET /_up HTTP/1.1\r\nX-Slow: "[step]))
				} else {
					_, _ = io.WriteString(c, "a")
				}
			} else {
				_, _ = io.WriteString(c, `{"_id":"x`+fmt.Sprint(step)+`"},`)
			}
		}
		time.Sleep(150 * time.Millisecond)
	}
	w.end(t)
	for _, c := range conns {
		c.Close()
	}
}

// Many connections that send nothing, then more than the cap: past
// settee/max_connections a connection is answered 503 at once, and the
// node serves again when they go.
func TestIdleConnectionsAndTheCap(t *testing.T) {
	n := startNode(t)
	n.setup()
	w := n.watch()
	var conns []net.Conn
	for i := 0; i < 2000; i++ {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	time.Sleep(2 * time.Second)
	w.end(t)

	n.setConfig("settee", "max_connections", "2050") // the probes' and this call's connections fit
	refused := 0
	for i := 0; i < 100; i++ {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		line, _ := bufio.NewReader(c).ReadString('\n')
		if strings.HasPrefix(line, "HTTP/1.1 503") {
			refused++
		}
	}
	if refused < 40 {
		t.Errorf("%d of 100 connections past the cap were answered 503, want most", refused)
	}
	for _, c := range conns[:200] {
		c.Close() // room for the admin's look
	}
	time.Sleep(100 * time.Millisecond)
	var sys struct {
		Limits struct {
			Connections        int64 `json:"connections"`
			ConnectionsRefused int64 `json:"connections_refused"`
		} `json:"limits"`
	}
	_ = json.Unmarshal([]byte(n.must("GET", "/_node/_local/_system", "", nil, 200)), &sys)
	if sys.Limits.ConnectionsRefused < int64(refused) {
		t.Errorf("_system says %d connections were refused; %d were", sys.Limits.ConnectionsRefused, refused)
	}
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	n.must("GET", "/_up", "", nil, 200)
}
