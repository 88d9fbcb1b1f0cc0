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
	st, body := c.Do(1, "GET", "/_cluster_setup", "")
	if st != 200 || !strings.Contains(string(body), "cluster_finished") {
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
	var info struct{ Name string }
	st, body = c.Do(0, "GET", "/_node/"+c.Name(1), "")
	if st != 200 || json.Unmarshal(body, &info) != nil || info.Name != c.Name(1) {
		t.Fatalf("_node/node2 through node1: %d %s", st, body)
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
