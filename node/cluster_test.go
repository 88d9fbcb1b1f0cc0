//go:build !race

// Several nodes in one process start several protoactor remotes, and each
// remote's Start rewrites grpc's global logger while the others' gRPC
// servers read it: a race in the libraries, harmless with one node per
// process (as in production). These tests run without -race (make test runs
// them in a second pass).

package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/httpgw"
	"github.com/settee/settee/internal/testport"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

func TestThreeNodesJoinThroughClusterSetup(t *testing.T) {
	c := testcluster.New(t, 3)
	for i := range 3 {
		if m := c.Membership(i); len(m.ClusterNodes) != 1 {
			t.Fatalf("node %d before joining: %+v", i, m)
		}
	}
	c.Join()
	want := []string{"node1@127.0.0.1", "node2@127.0.0.1", "node3@127.0.0.1"}
	for i := range 3 {
		if m := c.Membership(i); !slices.Equal(m.ClusterNodes, want) {
			t.Fatalf("node %d: cluster_nodes %v", i, m.ClusterNodes)
		}
	}
	// joined but not finished, as CouchDB before finish_cluster
	// (TestClusterSetupActionsAsCouchDB goes on from here)
	st, body := c.Do(1, "GET", "/_cluster_setup", "")
	if st != 200 || !strings.Contains(string(body), "cluster_enabled") {
		t.Fatalf("_cluster_setup state: %d %s", st, body)
	}

	// a stopped node drops out of all_nodes but stays a member
	c.Stop(2)
	c.WaitFor(15*time.Second, func() error {
		m := c.Membership(0)
		if len(m.AllNodes) != 2 || len(m.ClusterNodes) != 3 {
			return fmt.Errorf("after stopping node3: %+v", m)
		}
		return nil
	})
	// it comes back by itself and remembers the cluster
	c.Restart(2)
	c.WaitFor(15*time.Second, func() error {
		for i := range 3 {
			if m := c.Membership(i); len(m.AllNodes) != 3 {
				return fmt.Errorf("node %d after restart: %+v", i, m)
			}
		}
		return nil
	})

	// removing a member spreads to the others
	if st, body := c.Do(0, "DELETE", "/_node/_local/_nodes/node3@127.0.0.1", ""); st != 200 {
		t.Fatalf("remove node3: %d %s", st, body)
	}
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(1); len(m.ClusterNodes) != 2 {
			return fmt.Errorf("node2 after removal: %+v", m)
		}
		return nil
	})
}

func TestJoinRefusedWithWrongSecretOrCredentials(t *testing.T) {
	c := testcluster.New(t, 1)
	other := testserver.Start(t, func(cfg *node.Config) {
		cfg.Name = "intruder@127.0.0.1"
		cfg.Cluster = node.ClusterConfig{NodeAddr: "127.0.0.1:0", Secret: "not-the-secret"}
	})
	host, port, _ := net.SplitHostPort(other.Node.Addr())
	p, _ := strconv.Atoi(port)
	tests := []struct {
		name, user, pw, reason string
	}{
		{"wrong secret", testserver.AdminUser, testserver.AdminPassword, "cluster secret"},
		{"wrong credentials", testserver.AdminUser, "nope", "credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"action":"add_node","host":%q,"port":%d,"username":%q,"password":%q}`, host, p, tc.user, tc.pw)
			st, out := c.Do(0, "POST", "/_cluster_setup", body)
			if st < 400 || !strings.Contains(string(out), tc.reason) {
				t.Fatalf("add_node: %d %s, want an error naming %q", st, out, tc.reason)
			}
			if m := c.Membership(0); len(m.ClusterNodes) != 1 {
				t.Fatalf("membership changed: %+v", m)
			}
		})
	}
}

func TestSingleNodeCannotJoin(t *testing.T) {
	s := testserver.Start(t)
	resp := s.Do(t, "POST", "/_cluster_setup", `{"action":"add_node","host":"127.0.0.1","port":1,"username":"a","password":"b"}`)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("add_node on a single node: %d", resp.StatusCode)
	}
}

// /_node/<name>/... is answered by the named node, through any node, and
// with CouchDB's errors for a name that is no member (404 not_found "no
// such node") and for a member that is down (412 nodedown "<name> is
// down").
func TestClusterNodeEndpointsRoutedToOtherNodes(t *testing.T) {
	c := testcluster.New(t, 2)
	c.Join()
	var sys struct {
		Goroutines int `json:"goroutines"`
	}
	st, body := c.Do(0, "GET", "/_node/"+c.Name(1)+"/_system", "")
	if st != 200 || json.Unmarshal(body, &sys) != nil || sys.Goroutines < 1 {
		t.Fatalf("_system of node2 through node1: %d %s", st, body)
	}
	// /_node/<name> is that node's welcome (as CouchDB answers it), with
	// its uuid
	var info, own struct {
		CouchDB string `json:"couchdb"`
		UUID    string `json:"uuid"`
	}
	st, body = c.Do(0, "GET", "/_node/"+c.Name(1), "")
	_, ownBody := c.Do(1, "GET", "/", "")
	if st != 200 || json.Unmarshal(body, &info) != nil || json.Unmarshal(ownBody, &own) != nil ||
		info.CouchDB != "Welcome" || info.UUID == "" || info.UUID != own.UUID {
		t.Fatalf("_node/node2 through node1: %d %s (node2's own: %s)", st, body, ownBody)
	}
	var stats struct {
		CouchDB struct {
			Httpd struct {
				Requests struct{ Value int } `json:"requests"`
			} `json:"httpd"`
		} `json:"couchdb"`
	}
	st, body = c.Do(0, "GET", "/_node/"+c.Name(1)+"/_stats", "")
	if st != 200 || json.Unmarshal(body, &stats) != nil || stats.CouchDB.Httpd.Requests.Value < 1 {
		t.Fatalf("_stats of node2 through node1: %d %s", st, body)
	}
	var vers struct {
		Settee map[string]string `json:"settee"`
	}
	st, body = c.Do(1, "GET", "/_node/"+c.Name(0)+"/_versions", "")
	if st != 200 || json.Unmarshal(body, &vers) != nil || vers.Settee["version"] == "" {
		t.Fatalf("_versions of node1 through node2: %d %s", st, body)
	}
	couchErr := func(path string, wantStatus int, wantErr, wantReason string) {
		t.Helper()
		var e struct{ Error, Reason string }
		st, body := c.Do(0, "GET", path, "")
		if st != wantStatus || json.Unmarshal(body, &e) != nil || e.Error != wantErr || e.Reason != wantReason {
			t.Fatalf("GET %s: %d %s, want %d {%q, %q}", path, st, body, wantStatus, wantErr, wantReason)
		}
	}
	couchErr("/_node/ghost@127.0.0.1/_stats", 404, "not_found", "no such node: ghost@127.0.0.1")
	c.Stop(1)
	couchErr("/_node/"+c.Name(1)+"/_stats", 412, "nodedown", c.Name(1)+" is down")
}

// The cluster secret is required once a node has joined: restarted
// without its transport, a member would serve its own copies alone and
// never reach the others. It refuses to start, saying why.
func TestClusterMemberRefusesToStartWithoutNodeAddr(t *testing.T) {
	c := testcluster.New(t, 2)
	c.Join()
	c.Stop(1)
	cfg := node.Default()
	cfg.Handler = httpgw.ForNode
	cfg.Name = c.Name(1)
	cfg.DataDir = c.Nodes[1].DataDir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Admin = testserver.AdminUser + ":" + testserver.AdminPassword
	cfg.MemoryMB = 64
	n, err := node.Start(context.Background(), cfg)
	if err == nil {
		_ = n.Close(context.Background())
		t.Fatal("a member of a cluster started without --node-addr")
	}
	if !errors.Is(err, node.ErrClusterMember) || !strings.Contains(err.Error(), c.Name(0)) {
		t.Fatalf("error %q, want ErrClusterMember naming %s", err, c.Name(0))
	}
	// with its transport it starts and is a member as before
	c.Restart(1)
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(0); len(m.AllNodes) != 2 {
			return fmt.Errorf("node2 not back: %+v", m)
		}
		return nil
	})
}

// --join joins at start-up, retrying until the other node answers (a
// compose cluster's first start), and is harmless at every later start.
// A node behind an address translation (--advertise-addr) is dialled at
// the advertised address.
func TestJoinFlagFormsTheClusterAndIsIdempotent(t *testing.T) {
	firstHTTP := testport.Addr(t)
	nodeAddr := testport.Addr(t)
	_, port, _ := net.SplitHostPort(nodeAddr)
	advertised := "localhost:" + port
	second := testserver.Start(t, func(cfg *node.Config) {
		cfg.Name = "second@127.0.0.1"
		cfg.Cluster = node.ClusterConfig{NodeAddr: nodeAddr, AdvertiseAddr: advertised,
			Secret: testcluster.Secret, Join: []string{firstHTTP}}
	})
	// the node it joins starts later
	time.Sleep(300 * time.Millisecond)
	first := testserver.Start(t, func(cfg *node.Config) {
		cfg.Name = "first@127.0.0.1"
		cfg.HTTPAddr = firstHTTP
		cfg.Cluster = node.ClusterConfig{NodeAddr: testport.Addr(t), Secret: testcluster.Secret}
	})
	nodes := []*testserver.Server{first, second}
	get := func(s *testserver.Server, path string, out any) int {
		t.Helper()
		resp := s.Do(t, "GET", path, nil)
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode
	}
	want := []string{"first@127.0.0.1", "second@127.0.0.1"}
	formed := func() error {
		for i, s := range nodes {
			var m testcluster.Membership
			if st := get(s, "/_membership", &m); st != 200 || !slices.Equal(m.AllNodes, want) || !slices.Equal(m.ClusterNodes, want) {
				return fmt.Errorf("node %d: %d %+v", i, st, m)
			}
		}
		return nil
	}
	waitFor(t, 30*time.Second, formed)
	var rec struct {
		NodeAddr string `json:"node_addr"`
	}
	if st := get(first, "/_node/_local/_nodes/second@127.0.0.1", &rec); st != 200 || rec.NodeAddr != advertised {
		t.Fatalf("first records second at %q (%d), want the advertised %q", rec.NodeAddr, st, advertised)
	}
	// both copies reached through the advertised address: 201
	if resp := first.Do(t, "PUT", "/jd?q=1&n=2", nil); resp.StatusCode != 201 {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	if resp := first.Do(t, "PUT", "/jd/a?w=2", `{"v":1}`); resp.StatusCode != 201 {
		t.Fatalf("write with w=2: %d", resp.StatusCode)
	}

	// restarts with the same --join change nothing
	second.Restart(t)
	waitFor(t, 30*time.Second, formed)
	first.Restart(t)
	waitFor(t, 30*time.Second, formed)
	for i, s := range nodes {
		var all struct {
			TotalRows int `json:"total_rows"`
		}
		if st := get(s, "/_node/_local/_nodes/_all_docs", &all); st != 200 || all.TotalRows != 2 {
			t.Fatalf("node %d's _nodes after restarts: %d %+v", i, st, all)
		}
		var d struct{ V int }
		if st := get(s, "/jd/a", &d); st != 200 || d.V != 1 {
			t.Fatalf("node %d: doc after restarts: %d %+v", i, st, d)
		}
	}
}

// PUT /_node/_local/_nodes/<name> adds a member as CouchDB's _nodes
// database does (settee needs the node's node_addr), the news reaches the
// new member, and DELETE removes one; an unknown name is a 404.
func TestClusterNodesDatabasePutAndDelete(t *testing.T) {
	c := testcluster.New(t, 2)
	var self struct {
		NodeAddr string `json:"node_addr"`
	}
	st, body := c.Do(1, "GET", "/_node/_local", "")
	if st != 200 || json.Unmarshal(body, &self) != nil || self.NodeAddr == "" {
		t.Fatalf("_node/_local of node2: %d %s", st, body)
	}
	doc := fmt.Sprintf(`{"node_addr":%q,"http_addr":%q}`, self.NodeAddr, c.Nodes[1].Node.Addr())
	if st, body := c.Do(0, "PUT", "/_node/_local/_nodes/"+c.Name(1), doc); st != 201 {
		t.Fatalf("PUT _nodes doc: %d %s", st, body)
	}
	want := []string{c.Name(0), c.Name(1)}
	c.WaitFor(15*time.Second, func() error {
		for i := range 2 {
			if m := c.Membership(i); !slices.Equal(m.ClusterNodes, want) || !slices.Equal(m.AllNodes, want) {
				return fmt.Errorf("node %d: %+v", i, m)
			}
		}
		return nil
	})
	if st, body := c.Do(0, "PUT", "/_node/_local/_nodes/x@127.0.0.1", `{}`); st != 400 {
		t.Fatalf("PUT _nodes doc without node_addr: %d %s", st, body)
	}
	if st, body := c.Do(0, "DELETE", "/_node/_local/_nodes/ghost@127.0.0.1", ""); st != 404 {
		t.Fatalf("DELETE unknown _nodes doc: %d %s", st, body)
	}
	if st, body := c.Do(0, "DELETE", "/_node/_local/_nodes/"+c.Name(1), ""); st != 200 {
		t.Fatalf("DELETE _nodes doc: %d %s", st, body)
	}
	if m := c.Membership(0); !slices.Equal(m.ClusterNodes, want[:1]) || !slices.Equal(m.AllNodes, want[:1]) {
		t.Fatalf("node1 after removing node2: %+v", m)
	}
	if st, _ := c.Do(0, "GET", "/_node/_local/_nodes/"+c.Name(1), ""); st != 404 {
		t.Fatalf("GET removed _nodes doc: %d", st)
	}
}

func waitFor(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
