//go:build !race

// Multi-node: runs without -race, as config_cluster_test.go says why.

package httpgw_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
)

// /_node/<other node>/_history asked on node 1 is that node's series.
func TestHistoryOtherNode(t *testing.T) {
	c := testcluster.New(t, 3, fastHistory)
	c.Join()
	for i := range 3 {
		name := c.Name(i)
		var page historyPage
		c.WaitFor(10*time.Second, func() error {
			st, b := c.Do(0, "GET", "/_node/"+name+"/_history", "")
			if st != 200 {
				t.Fatalf("GET /_node/%s/_history on node 1: %d %s", name, st, b)
			}
			page = historyPage{}
			if err := json.Unmarshal(b, &page); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if len(page.Samples) == 0 {
				return errors.New("no samples yet")
			}
			return nil
		})
		if page.Node != name || page.IntervalSeconds != 0.2 {
			t.Errorf("/_node/%s/_history: node %q interval %v", name, page.Node, page.IntervalSeconds)
		}
	}
	// the other node's own rules answer through node 1
	if st, b := c.Do(0, "POST", "/_node/"+c.Name(1)+"/_history", "{}"); st != 405 ||
		string(b) != `{"error":"method_not_allowed","reason":"Only GET,HEAD allowed"}`+"\n" {
		t.Errorf("POST through node 1: %d %s", st, b)
	}
	if st, b := c.Do(0, "GET", "/_node/"+c.Name(2)+"/_history?since=x", ""); st != 400 {
		t.Errorf("bad since through node 1: %d %s", st, b)
	}
	last := time.Now().UnixMilli()
	if st, b := c.Do(0, "GET", "/_node/"+c.Name(2)+"/_history?since="+strconv.FormatInt(last+60_000, 10), ""); st != 200 ||
		string(b) != `{"node":"`+c.Name(2)+`","interval_seconds":0.2,"window_seconds":900,"samples":[]}`+"\n" {
		t.Errorf("since in the future through node 1: %d %s", st, b)
	}
}

// A browser logged in on node 1 (its cookie made with node 1's secret, which
// the other nodes do not share) sees every node's series through node 1:
// node 1 forwards the request as the user it authenticated, signed with the
// cluster's key. Headers a client makes up are not believed.
func TestNodeProxyForwardsTheUser(t *testing.T) {
	c := testcluster.New(t, 3, fastHistory)
	c.Join()
	login := func(i int) *http.Cookie {
		resp, err := http.Post(c.Nodes[i].URL+"/_session", "application/json",
			strings.NewReader(`{"name":"`+testserver.AdminUser+`","password":"`+testserver.AdminPassword+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, ck := range resp.Cookies() {
			if ck.Name == "AuthSession" {
				return ck
			}
		}
		t.Fatalf("POST /_session on node %d: %d, no cookie", i+1, resp.StatusCode)
		return nil
	}
	get := func(i int, path string, ck *http.Cookie, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", c.Nodes[i].URL+path, nil)
		if ck != nil {
			req.AddCookie(ck)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ck := login(0)
	// the cookie is node 1's alone
	if st, b := get(2, "/_node/_local/_history", ck, nil); st != 401 {
		t.Fatalf("node 1's cookie on node 3 itself: %d %s, want 401", st, b)
	}
	for i := 1; i < 3; i++ {
		st, b := get(0, "/_node/"+c.Name(i)+"/_history", ck, nil)
		if st != 200 || !strings.Contains(b, `"node":"`+c.Name(i)+`"`) {
			t.Fatalf("node %d's history through node 1 with node 1's cookie: %d %s", i+1, st, b)
		}
		if st, b := get(0, "/_node/"+c.Name(i)+"/_config", ck, nil); st != 200 {
			t.Fatalf("node %d's config through node 1: %d %s", i+1, st, b)
		}
	}
	// anonymous through node 1: refused there, as before
	if st, b := get(0, "/_node/"+c.Name(2)+"/_history", nil, nil); st != 401 {
		t.Fatalf("anonymous through node 1: %d %s", st, b)
	}
	// made-up identity headers sent to a node directly, or through node 1
	// without credentials, authenticate nobody
	forged := map[string]string{
		"X-Settee-Node-User": "eyJuYW1lIjoiYWRtaW4iLCJyb2xlcyI6WyJfYWRtaW4iXX0",
		"X-Settee-Node-At":   strconv.FormatInt(time.Now().UnixMilli(), 10),
		"X-Settee-Node-Sig":  strings.Repeat("ab", 32),
	}
	if st, b := get(2, "/_node/_local/_history", nil, forged); st != 401 {
		t.Fatalf("forged headers on node 3: %d %s", st, b)
	}
	if st, b := get(0, "/_node/"+c.Name(2)+"/_history", nil, forged); st != 401 {
		t.Fatalf("forged headers through node 1: %d %s", st, b)
	}
}
