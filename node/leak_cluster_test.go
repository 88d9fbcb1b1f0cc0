//go:build !race

package node_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/settee/settee/internal/testcluster"
)

// Nothing the nodes of a cluster started outlives the test cluster's
// Close: the transport, heartbeats, internal replication, shard-map
// pushes and the replicator's cluster view all stop with their node.
func TestClusterCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, append(libraryGoroutines, goleak.IgnoreCurrent())...)
	c := testcluster.New(t, 3)
	c.Join()
	if st, out := c.Do(0, "PUT", "/leak-c", ""); st != 201 {
		t.Fatalf("create: %d %s", st, out)
	}
	for i := range 10 {
		if st, out := c.Do(i%3, "PUT", fmt.Sprintf("/leak-c/d%d", i), `{"n":1}`); st != 201 {
			t.Fatalf("put: %d %s", st, out)
		}
	}
	c.WaitFor(20*time.Second, func() error {
		st, out := c.Do(2, "GET", "/leak-c/d9", "")
		if st != 200 {
			return fmt.Errorf("d9 on node 3: %d %s", st, out)
		}
		return nil
	})
	if st, out := c.Do(1, "GET", "/_scheduler/jobs", ""); st != 200 {
		t.Fatalf("_scheduler/jobs: %d %s", st, out)
	}
	if st, out := c.Do(0, "GET", "/leak-c/_changes?feed=longpoll&since=now&timeout=200", ""); st != 200 {
		t.Fatalf("longpoll: %d %s", st, out)
	}
	c.Close()
}
