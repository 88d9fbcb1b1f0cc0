//go:build !race

// Multi-node: see cluster_data_test.go for why these tests run without -race.

package node_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
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
