//go:build !race

// Multi-node: see config_cluster_test.go for why this runs without -race.

package httpgw_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
)

// A cluster answers views as one CouchDB does: the same table as
// TestViews through each node of three, on a database of q=4 n=3 made
// through that node, so that every answer is merged from shard copies
// that node may not hold (rows in collation order, offset and total_rows
// summed over the shards, reductions re-reduced across them).
func TestViewsCluster(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	for i := range c.Nodes {
		// the stale steps: no background refresh (see TestViews)
		if st, b := c.Do(i, "PUT", "/_node/_local/_config/settee/view_background_refresh", `"false"`); st != 200 {
			t.Fatalf("view_background_refresh off through node %d: %d %s", i, st, b)
		}
	}
	for i := range c.Nodes {
		db := fmt.Sprintf("views%d", i)
		if st, b := c.Do(i, "PUT", "/"+db+"?q=4&n=3", ""); st != 201 {
			t.Fatalf("create %s through node %d: %d %s", db, i, st, b)
		}
		t.Run(c.Name(i), func(t *testing.T) {
			runViewStepsLagging(t, c.Nodes[i].URL, testserver.AdminUser, testserver.AdminPassword, db, couchSettles(viewSteps), 5*time.Second)
		})
	}
	// the users are made once; a member's and a db admin's rights hold
	// on a node that did not write them
	runViewSteps(t, c.Nodes[1].URL, testserver.AdminUser, testserver.AdminPassword, "views0", viewSecuritySteps)
}
