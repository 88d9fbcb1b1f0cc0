//go:build !race

// Multi-node: see cluster_data_test.go for why these tests run without -race.

package node_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/node"
)

// A node whose connection drops is seen down at once, from the transport's
// endpoint event, not only after its missed heartbeats (down after 4 s).
func TestClusterNodeSeenDownOnConnectionLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := testcluster.New(t, 3)
	c.Join()
	alive := func() []string {
		r, err := c.Nodes[0].Node.Members(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return r.Alive
	}
	c.WaitFor(10*time.Second, func() error {
		if !slices.Contains(alive(), c.Name(2)) {
			return context.DeadlineExceeded
		}
		return nil
	})
	t0 := time.Now()
	c.Stop(2)
	for slices.Contains(alive(), c.Name(2)) {
		if time.Since(t0) > 10*time.Second {
			t.Fatal("the stopped node is still seen up after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(t0); d >= 3*time.Second {
		t.Fatalf("seen down %v after it stopped: only its heartbeats noticed", d)
	} else {
		t.Logf("seen down %v after it stopped", d)
	}
	c.Restart(2)
	c.WaitFor(20*time.Second, func() error {
		if !slices.Contains(alive(), c.Name(2)) {
			return context.DeadlineExceeded
		}
		return nil
	})
}

// A node started with a short --node-down-after (and --heartbeat-interval)
// sees a member that stops answering its heartbeats down sooner than a node
// with the defaults (1 s, down after 4 s). The member ignores both nodes'
// pings without closing any connection (node.Isolate on its side), so only
// the missed heartbeats can tell.
func TestClusterShortNodeDownAfterSeenDownSooner(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const every, downAfter = 100 * time.Millisecond, 500 * time.Millisecond
	c := testcluster.New(t, 3, func(cfg *node.Config) {
		if cfg.Name == "node1@127.0.0.1" {
			cfg.HeartbeatInterval, cfg.NodeDownAfter = every, downAfter
		}
	})
	c.Join()
	alive := func(i int) bool {
		r, err := c.Nodes[i].Node.Members(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(r.Alive, c.Name(2))
	}
	c.WaitFor(10*time.Second, func() error {
		if !alive(0) || !alive(1) {
			return context.DeadlineExceeded
		}
		return nil
	})
	// node3 stops answering node1 and node2; its connections stay open
	if err := c.Nodes[2].Node.Isolate(context.Background(), c.Name(0), c.Name(1)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	var short, def time.Duration
	for short == 0 || def == 0 {
		if time.Since(t0) > 15*time.Second {
			t.Fatalf("after 15 s: seen down by node1 after %v, by node2 after %v (0: not yet)", short, def)
		}
		if short == 0 && !alive(0) {
			short = time.Since(t0)
		}
		if def == 0 && !alive(1) {
			def = time.Since(t0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("node3 seen down by node1 (every %v, down after %v) after %v, by node2 (defaults) after %v", every, downAfter, short, def)
	if short > downAfter+time.Second {
		t.Errorf("node1 saw node3 down after %v, want about %v", short, downAfter)
	}
	// with the defaults the last pong was at most a heartbeat before t0
	if min := node.DefaultNodeDownAfter - node.DefaultHeartbeatInterval - 500*time.Millisecond; def < min {
		t.Errorf("node2 (defaults) saw node3 down after %v, before %v: the test does not measure heartbeats", def, min)
	}
	if def-short < 2*time.Second {
		t.Errorf("node1 saw node3 down after %v, node2 after %v: not sooner", short, def)
	}
	// healed, both see it again
	if err := c.Nodes[2].Node.Isolate(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(15*time.Second, func() error {
		if !alive(0) || !alive(1) {
			return context.DeadlineExceeded
		}
		return nil
	})
}
