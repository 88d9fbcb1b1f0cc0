//go:build !race

// Multi-node: see config_cluster_test.go for why this runs without -race.

package httpgw_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

// A user created, or given a new password, through one node logs in on
// every other node at once: each node has a copy of _users and a write is
// acknowledged by one, so a login that its node's copy cannot answer asks
// every copy.
func TestUsersClusterWide(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	// the system databases' copies spread to the new members
	start := time.Now()
	c.WaitFor(30*time.Second, func() error {
		for i := range 3 {
			var sh struct{ Shards map[string][]string }
			_, b := c.Do(i, "GET", "/_users/_shards", "")
			if err := json.Unmarshal(b, &sh); err != nil || len(sh.Shards["00000000-ffffffff"]) != 3 {
				return fmt.Errorf("node %d: _users copies %s", i, b)
			}
		}
		return nil
	})
	t.Logf("_users on every node after %v", time.Since(start))
	for i := range 3 {
		if st, b := c.Do(i, "PUT", "/_node/_local/_config/chttpd_auth/iterations", `"1000"`); st != 200 {
			t.Fatalf("iterations on node %d: %d %s", i, st, b)
		}
	}
	login := func(i int, name, pw string) int {
		req, _ := http.NewRequest("GET", c.Nodes[i].URL+"/_session", nil)
		req.SetBasicAuth(name, pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for u := range 20 {
		name := fmt.Sprintf("u%d", u)
		via := u % 3
		st, b := c.Do(via, "PUT", "/_users/org.couchdb.user:"+name, `{"name":"`+name+`","password":"pw","roles":[],"type":"user"}`)
		if st != 201 {
			t.Fatalf("create %s on node %d: %d %s", name, via, st, b)
		}
		for i := range 3 {
			if st := login(i, name, "pw"); st != 200 {
				t.Fatalf("%s made through node %d: login on node %d: %d", name, via, i, st)
			}
		}
	}
	// a new password through node 2 counts on node 3 at once, and the
	// old one no more on any node, node 1 included, where it was cached
	st, b := c.Do(1, "GET", "/_users/org.couchdb.user:u0", "")
	if st != 200 {
		t.Fatalf("read u0: %d %s", st, b)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["password"] = "pw2"
	nb, _ := json.Marshal(doc)
	if st, b := c.Do(1, "PUT", "/_users/org.couchdb.user:u0", string(nb)); st != 201 {
		t.Fatalf("new password: %d %s", st, b)
	}
	for i := range 3 {
		if st := login(i, "u0", "pw2"); st != 200 {
			t.Fatalf("new password on node %d: %d", i, st)
		}
	}
	c.WaitFor(10*time.Second, func() error {
		for i := range 3 {
			if st := login(i, "u0", "pw"); st != 401 {
				return fmt.Errorf("old password on node %d: %d", i, st)
			}
		}
		return nil
	})
}
