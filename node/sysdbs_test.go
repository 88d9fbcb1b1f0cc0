//go:build !race

// Multi-node: see cluster_data_test.go for why these tests run without -race.

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
)

// sessionName logs in with Basic auth on node i and returns the name
// GET /_session reports ("" when the login fails).
func sessionName(t *testing.T, c *testcluster.Cluster, i int, user, pw string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", c.Nodes[i].URL+"/_session", nil)
	req.SetBasicAuth(user, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var s struct {
		UserCtx struct{ Name string } `json:"userCtx"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&s) != nil {
		return ""
	}
	return s.UserCtx.Name
}

func putUser(t *testing.T, c *testcluster.Cluster, i int, name, pw string) {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"password":%q,"roles":[],"type":"user"}`, name, pw)
	if st, out := c.Do(i, "PUT", "/_users/org.couchdb.user:"+name, body); st != 201 && st != 202 {
		t.Fatalf("create user %s on node %d: %d %s", name, i, st, out)
	}
}

// shardNodes lists the nodes holding db's copies, as node i sees them.
func shardNodes(t *testing.T, c *testcluster.Cluster, i int, db string) []string {
	t.Helper()
	st, out := c.Do(i, "GET", "/"+db+"/_shards", "")
	if st != 200 {
		t.Fatalf("%s/_shards on node %d: %d %s", db, i, st, out)
	}
	var s struct{ Shards map[string][]string }
	_ = json.Unmarshal(out, &s)
	var nodes []string
	for _, ns := range s.Shards {
		nodes = append(nodes, ns...)
	}
	sort.Strings(nodes)
	return nodes
}

// _users is the cluster's, not each node's: a user made on one node logs
// in on every node, users a node had before it joined are merged in, and
// a login still works with the rest of the cluster down.
func TestClusterUsersDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := testcluster.New(t, 3)
	putUser(t, c, 2, "early", "early-pw") // node 2 alone, before it joins
	c.Join()
	putUser(t, c, 0, "bob", "bob-pw")
	c.WaitFor(30*time.Second, func() error {
		for i := range 3 {
			for _, db := range []string{"_users", "_replicator"} {
				if got := shardNodes(t, c, i, db); len(got) != 3 {
					return fmt.Errorf("node %d: %s copies on %v", i, db, got)
				}
			}
			if got := sessionName(t, c, i, "bob", "bob-pw"); got != "bob" {
				return fmt.Errorf("bob cannot log in on node %d", i)
			}
			if got := sessionName(t, c, i, "early", "early-pw"); got != "early" {
				return fmt.Errorf("early (made on node 2 before it joined) cannot log in on node %d", i)
			}
		}
		return nil
	})
	if got := sessionName(t, c, 1, "bob", "wrong"); got != "" {
		t.Fatalf("a wrong password logged in as %q", got)
	}
	c.Stop(1)
	c.Stop(2)
	if got := sessionName(t, c, 0, "bob", "bob-pw"); got != "bob" {
		t.Fatal("with two of three nodes down, bob cannot log in on the last one")
	}
}

// _replicator is the cluster's: each doc's job runs on exactly one node,
// /_scheduler/docs on any node lists every doc once, and the jobs of a
// node that goes down are taken over by the others.
func TestClusterReplicatorDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := testcluster.New(t, 3)
	c.Join()
	if st, out := c.Do(0, "PUT", "/src?q=2&n=3", ""); st != 201 {
		t.Fatalf("create src: %d %s", st, out)
	}
	writeDocs(t, c, 0, "src", "d", 0, 20)
	const jobs = 6
	for j := range jobs {
		body := fmt.Sprintf(`{"source":"src","target":"tgt%d","create_target":true,"continuous":true}`, j)
		if st, out := c.Do(j%3, "PUT", fmt.Sprintf("/_replicator/rep%d", j), body); st != 201 && st != 202 {
			t.Fatalf("replicator doc %d: %d %s", j, st, out)
		}
	}
	type schedDocs struct {
		TotalRows int `json:"total_rows"`
		Docs      []struct {
			DocID string `json:"doc_id"`
			Node  string
			State string
		}
	}
	owners := func(i int) (map[string]string, error) {
		st, out := c.Do(i, "GET", "/_scheduler/docs", "")
		if st != 200 {
			return nil, fmt.Errorf("_scheduler/docs on node %d: %d %s", i, st, out)
		}
		var d schedDocs
		if err := json.Unmarshal(out, &d); err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, doc := range d.Docs {
			if m[doc.DocID] != "" {
				return nil, fmt.Errorf("node %d lists %s twice: %s", i, doc.DocID, out)
			}
			if doc.State != "running" {
				return nil, fmt.Errorf("node %d: %s is %s", i, doc.DocID, doc.State)
			}
			m[doc.DocID] = doc.Node
		}
		if len(m) != jobs || d.TotalRows != jobs {
			return nil, fmt.Errorf("node %d lists %d docs: %s", i, len(m), out)
		}
		return m, nil
	}
	c.WaitFor(60*time.Second, func() error {
		for i := range 3 {
			if _, err := owners(i); err != nil {
				return err
			}
		}
		for j := range jobs {
			if ids := allIDs(t, c, j%3, fmt.Sprintf("tgt%d", j)); len(ids) != 20 {
				return fmt.Errorf("tgt%d has %d docs", j, len(ids))
			}
		}
		return nil
	})
	m, _ := owners(0)
	byNode := map[string]int{}
	for _, n := range m {
		byNode[n]++
	}
	if len(byNode) < 2 {
		t.Fatalf("every job runs on one node: %v", m)
	}
	st, out := c.Do(1, "GET", "/_scheduler/docs/_replicator/rep3", "")
	if st != 200 {
		t.Fatalf("_scheduler/docs/_replicator/rep3 on node 1: %d %s", st, out)
	}

	// node 2 goes down: its jobs move, and new docs still reach every target
	c.Stop(2)
	writeDocs(t, c, 0, "src", "e", 0, 5)
	c.WaitFor(60*time.Second, func() error {
		m, err := owners(0)
		if err != nil {
			return err
		}
		for id, n := range m {
			if n == c.Name(2) {
				return fmt.Errorf("%s still on the stopped node", id)
			}
		}
		for j := range jobs {
			if ids := allIDs(t, c, 0, fmt.Sprintf("tgt%d", j)); len(ids) != 25 {
				return fmt.Errorf("tgt%d has %d docs", j, len(ids))
			}
		}
		return nil
	})
}

// A database's _security changed while a node is down reaches that node's
// copy when it is back, and a member that joins later gets _users'
// changed security object on its new copy (both through internal
// replication: the later stamp wins).
func TestClusterSecurityReachesCopiesThatMissedIt(t *testing.T) {
	c := testcluster.New(t, 3)
	addNode := func(i int) {
		t.Helper()
		host, port, _ := net.SplitHostPort(c.Nodes[i].Node.Addr())
		body := fmt.Sprintf(`{"action":"add_node","host":%q,"port":%s,"username":%q,"password":%q}`,
			host, port, testserver.AdminUser, testserver.AdminPassword)
		if st, out := c.Do(0, "POST", "/_cluster_setup", body); st != 201 {
			t.Fatalf("add_node %d: %d %s", i, st, out)
		}
	}
	hasSecurity := func(i int, db, name string) error {
		st, body := c.Do(i, "GET", "/"+db+"/_security", "")
		if st != 200 || !strings.Contains(string(body), `"`+name+`"`) {
			return fmt.Errorf("node %d %s/_security: %d %s", i, db, st, body)
		}
		return nil
	}
	addNode(1)
	c.WaitFor(30*time.Second, func() error {
		if m := c.Membership(1); len(m.ClusterNodes) != 2 {
			return fmt.Errorf("node 2 sees %v", m.ClusterNodes)
		}
		return nil
	})
	// _users' security is CouchDB's fixed one unless this is on
	if st, body := c.Do(0, "PUT", "/_node/_local/_config/couchdb/users_db_security_editable", `"true"`); st != 200 {
		t.Fatalf("users_db_security_editable: %d %s", st, body)
	}
	if st, body := c.Do(0, "PUT", "/_users/_security", `{"admins":{"names":["ua"],"roles":[]},"members":{"names":[],"roles":[]}}`); st != 200 {
		t.Fatalf("_users security: %d %s", st, body)
	}
	addNode(2)
	c.WaitFor(60*time.Second, func() error { return hasSecurity(2, "_users", "ua") })

	if st, body := c.Do(0, "PUT", "/sec?q=2&n=3", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	c.Stop(2)
	if st, body := c.Do(0, "PUT", "/sec/_security", `{"admins":{"names":[],"roles":[]},"members":{"names":["alice"],"roles":[]}}`); st != 200 {
		t.Fatalf("security with a node down: %d %s", st, body)
	}
	c.Restart(2)
	// node 3's own copy: a read on node 3 asks r=2 copies and takes the
	// most advanced header, which at equal update seqs may be another
	// node's, so node 3 is cut off from the others while it looks
	ownCopy := func() error {
		ctx := context.Background()
		if err := c.Nodes[2].Node.Isolate(ctx, c.Name(0), c.Name(1)); err != nil {
			return err
		}
		defer func() { _ = c.Nodes[2].Node.Isolate(ctx) }()
		return hasSecurity(2, "sec", "alice")
	}
	c.WaitFor(60*time.Second, ownCopy)
	// and it stays node 3's with the others gone
	c.Stop(0)
	c.Stop(1)
	if err := hasSecurity(2, "sec", "alice"); err != nil {
		t.Fatal(err)
	}
}
