package resourcetest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Deep JSON in every place a body is parsed: the node answers (a 4xx or a
// success), never a crash.
func TestDeepJSON(t *testing.T) {
	n := startNode(t)
	n.setup()
	w := n.watch()
	deep := func(open, close string, depth int) []byte {
		return []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
	}
	arr := deep("[", "]", 200000)
	obj := deep(`{"a":`, "}", 200000)
	for _, c := range []struct {
		method, path string
		body         []byte
	}{
		{"PUT", "/plain/deep1", append(append([]byte(`{"v":`), arr...), '}')},
		{"PUT", "/plain/deep2", obj},
		{"POST", "/plain/_bulk_docs", append(append([]byte(`{"docs":[{"v":`), arr...), "}]}"...)},
		{"POST", "/plain/_find", append(append([]byte(`{"selector":`), obj...), '}')},
		{"POST", "/plain/_all_docs", append(append([]byte(`{"keys":`), arr...), '}')},
		{"POST", "/plain/_index", append(append([]byte(`{"index":{"fields":["a"]},"partial_filter_selector":`), obj...), '}')},
		{"PUT", "/plain/_security", obj},
		{"POST", "/_session", obj},
	} {
		st, b := n.do(c.method, c.path, "application/json", c.body)
		if len(b) > 200 {
			b = b[:200]
		}
		t.Logf("%s %s: %d %s", c.method, c.path, st, strings.TrimSpace(b))
		if st >= 500 {
			t.Errorf("%s %s: %d %s", c.method, c.path, st, b)
		}
	}
	// a deep doc that was taken is read back and mapped
	n.must("PUT", "/plain/deep3", "application/json", append(append([]byte(`{"v":`), deep("[", "]", 5000)...), '}'), 201, 400)
	n.must("GET", "/plain/deep3", "", nil, 200, 404)
	w.end(t)
}

// Huge keys arrays, and limit and skip at their largest.
func TestHugeKeysAndLimits(t *testing.T) {
	n := startNode(t)
	n.setup()
	var docs bytes.Buffer
	docs.WriteString(`{"docs":[`)
	for i := 0; i < 2000; i++ {
		if i > 0 {
			docs.WriteByte(',')
		}
		fmt.Fprintf(&docs, `{"_id":"d%05d","n":%d}`, i, i)
	}
	docs.WriteString("]}")
	n.must("POST", "/plain/_bulk_docs", "application/json", docs.Bytes(), 201)
	n.must("PUT", "/plain/_design/d", "application/json", []byte(`{"views":{"v":{"map":"function(d){emit(d.n,1)}","reduce":"_count"}}}`), 201)
	w := n.watch()
	var keys bytes.Buffer
	keys.WriteString(`{"keys":[`)
	for i := 0; i < 500000; i++ {
		if i > 0 {
			keys.WriteByte(',')
		}
		fmt.Fprintf(&keys, `"d%07d"`, i)
	}
	keys.WriteString("]}")
	t.Logf("keys body: %d bytes", keys.Len())
	// a view looks each key up on its own (about 65 µs a key here): 50,000
	// keep the suite short and still make the node work for seconds
	var fewer bytes.Buffer
	fewer.WriteString(`{"keys":[`)
	for i := 0; i < 50000; i++ {
		if i > 0 {
			fewer.WriteByte(',')
		}
		fmt.Fprintf(&fewer, `%d`, i)
	}
	fewer.WriteString("]}")
	for _, c := range []struct {
		path string
		body []byte
	}{{"/plain/_all_docs", keys.Bytes()}, {"/plain/_design/d/_view/v?reduce=false", fewer.Bytes()}} {
		start := time.Now()
		st, b := n.do("POST", c.path, "application/json", c.body)
		if st >= 500 {
			t.Errorf("POST %s with %d bytes of keys: %d %.200s", c.path, len(c.body), st, b)
		}
		t.Logf("POST %s with %d bytes of keys: %d, %d bytes in %v", c.path, len(c.body), st, len(b), time.Since(start))
	}
	const big = "9223372036854775807"
	for _, p := range []string{
		"/plain/_all_docs?limit=" + big + "&skip=" + big,
		"/plain/_all_docs?limit=" + big,
		"/plain/_all_docs?skip=" + big,
		"/plain/_all_docs?limit=99999999999999999999999",
		"/plain/_changes?limit=" + big,
		"/plain/_changes?since=" + big,
		"/plain/_design/d/_view/v?limit=" + big + "&skip=" + big,
		"/plain/_design/d/_view/v?group_level=" + big,
		"/_uuids?count=" + big,
		"/_all_dbs?limit=" + big + "&skip=" + big,
		"/plain/_all_docs?keys=" + strings.Repeat("[", 5000),
	} {
		st, b := n.do("GET", p, "", nil)
		if st >= 500 {
			t.Errorf("GET %s: %d %.200s", p, st, b)
		}
	}
	w.end(t)
}

// Thousands of continuous feeds from one client: each is a connection and
// a waiting goroutine, within the node's means; all of them see a change.
func TestThousandsOfFeeds(t *testing.T) {
	n := startNode(t)
	n.setup()
	const feeds = 2000
	w := n.watch()
	var conns []net.Conn
	for i := 0; i < feeds; i++ {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /plain/_changes?feed=continuous&since=now&heartbeat=5000 HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n\r\n", basicAuth)
		if i%200 == 199 {
			// 2,000 a second: each feed is a login (Basic) and a request;
			// unpaced, the suite's own burst on 2 cores is what is measured
			time.Sleep(100 * time.Millisecond)
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(2 * time.Second)
	n.must("PUT", "/plain/seen", "application/json", []byte(`{}`), 201)
	var saw atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.Contains(line, `"id":"seen"`) {
					saw.Add(1)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	w.end(t)
	if got := saw.Load(); got != feeds {
		t.Errorf("%d of %d feeds saw the change", got, feeds)
	}
}
