// Package testcluster starts several real settee nodes in one test
// process, each on 127.0.0.1 with its own data dir, badger and cluster
// transport, like etcd's integration framework. Nothing is mocked.
package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/settee/settee/internal/testport"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// Secret is the cluster secret of every test cluster.
const Secret = "test-cluster-secret"

// Cluster is n nodes, not yet joined (call Join).
type Cluster struct {
	t     testing.TB
	Nodes []*testserver.Server
}

// New starts n nodes named node1..nodeN.
func New(t testing.TB, n int, opts ...testserver.Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for i := range n {
		name := fmt.Sprintf("node%d@127.0.0.1", i+1)
		nodeAddr := testport.Addr(t)
		all := append([]testserver.Option{func(cfg *node.Config) {
			cfg.Name = name
			cfg.Cluster = node.ClusterConfig{NodeAddr: nodeAddr, Secret: Secret}
		}}, opts...)
		c.Nodes = append(c.Nodes, testserver.Start(t, all...))
	}
	return c
}

// Join adds every other node to node 0 through POST /_cluster_setup, as an
// operator would.
func (c *Cluster) Join() {
	c.t.Helper()
	for _, s := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Node.Addr())
		p, _ := strconv.Atoi(port)
		body := fmt.Sprintf(`{"action":"add_node","host":%q,"port":%d,"username":%q,"password":%q}`,
			host, p, testserver.AdminUser, testserver.AdminPassword)
		st, out := c.Do(0, "POST", "/_cluster_setup", body)
		if st != 201 {
			c.t.Fatalf("add_node %s: %d %s", s.Node.Addr(), st, out)
		}
	}
	c.WaitFor(30*time.Second, func() error {
		for i := range c.Nodes {
			if err := c.expectMembers(i, len(c.Nodes)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Membership is GET /_membership of node i.
type Membership struct {
	AllNodes     []string `json:"all_nodes"`
	ClusterNodes []string `json:"cluster_nodes"`
}

// Membership reads node i's view.
func (c *Cluster) Membership(i int) Membership {
	c.t.Helper()
	var m Membership
	st, out := c.Do(i, "GET", "/_membership", "")
	if st != 200 || json.Unmarshal(out, &m) != nil {
		c.t.Fatalf("_membership of node %d: %d %s", i, st, out)
	}
	return m
}

func (c *Cluster) expectMembers(i, n int) error {
	m := c.Membership(i)
	if len(m.ClusterNodes) != n || len(m.AllNodes) != n {
		return fmt.Errorf("node %d sees cluster_nodes %v, all_nodes %v; want %d each", i, m.ClusterNodes, m.AllNodes, n)
	}
	return nil
}

// Do sends a request as admin to node i and returns status and body.
func (c *Cluster) Do(i int, method, path, body string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.Nodes[i].URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s on node %d: %v", method, path, i, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Stop stops node i; Restart starts it again on the same dir and ports.
func (c *Cluster) Stop(i int)    { c.Nodes[i].Stop(c.t) }
func (c *Cluster) Restart(i int) { c.Nodes[i].Restart(c.t) }

// WaitFor polls f until it returns nil or d passes.
func (c *Cluster) WaitFor(d time.Duration, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("condition not met after %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Name is node i's name.
func (c *Cluster) Name(i int) string { return fmt.Sprintf("node%d@127.0.0.1", i+1) }

// Partition cuts the cluster in two groups that treat each other as
// unreachable (at the membership level: see node.Isolate).
func (c *Cluster) Partition(a, b []int) {
	c.t.Helper()
	names := func(idx []int) (out []string) {
		for _, i := range idx {
			out = append(out, c.Name(i))
		}
		return out
	}
	for _, i := range a {
		if err := c.Nodes[i].Node.Isolate(context.Background(), names(b)...); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, i := range b {
		if err := c.Nodes[i].Node.Isolate(context.Background(), names(a)...); err != nil {
			c.t.Fatal(err)
		}
	}
}

// Heal ends a partition.
func (c *Cluster) Heal() {
	c.t.Helper()
	for _, s := range c.Nodes {
		if s.Node != nil {
			if err := s.Node.Isolate(context.Background()); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// Close stops every node that still runs (each node's Close waits for
// everything it started); the test's cleanup would too, later.
func (c *Cluster) Close() {
	c.t.Helper()
	for _, s := range c.Nodes {
		s.Stop(c.t)
	}
}
