//go:build !race

// Multi-node: see cluster_data_test.go for why these tests run without -race.

package node_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

// POST /_cluster_setup through a three-node cluster, step by step, answers
// as CouchDB's setup_httpd.erl does: enable_cluster on an enabled node is
// 400 "Cluster is already enabled" (201 with remote_node, which CouchDB
// forwards and answers 201 whatever comes back), the first finish_cluster
// is 201 and every later one, through any node and after a restart, 400
// "Cluster is already finished"; GET says cluster_enabled until the first
// finish_cluster and cluster_finished after it, on every node.
func TestClusterSetupActionsAsCouchDB(t *testing.T) {
	c := testcluster.New(t, 3)
	type step struct {
		name   string
		node   int
		body   string // POST body; empty: GET
		status int
		want   map[string]any // the reply
	}
	enabled := map[string]any{"state": "cluster_enabled"}
	finished := map[string]any{"state": "cluster_finished"}
	ok := map[string]any{"ok": true}
	alreadyEnabled := map[string]any{"error": "bad_request", "reason": "Cluster is already enabled"}
	alreadyFinished := map[string]any{"error": "bad_request", "reason": "Cluster is already finished"}
	const enable = `{"action":"enable_cluster","bind_address":"0.0.0.0","username":"admin","password":"pw","node_count":3}`
	run := func(steps []step) {
		t.Helper()
		for _, s := range steps {
			method := "GET"
			if s.body != "" {
				method = "POST"
			}
			st, out := c.Do(s.node, method, "/_cluster_setup", s.body)
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil || st != s.status || fmt.Sprint(got) != fmt.Sprint(s.want) {
				t.Errorf("%s: %s through node %d: %d %s, want %d %v", s.name, method, s.node+1, st, out, s.status, s.want)
			}
		}
	}
	run([]step{
		{"a lone node with --node-addr", 0, "", 200, enabled},
		{"enable_cluster on it", 0, enable, 400, alreadyEnabled},
		{"enable_cluster with remote_node", 0, `{"action":"enable_cluster","remote_node":"127.0.0.1","port":5985,"remote_current_user":"admin","remote_current_password":"pw"}`, 201, ok},
	})
	c.Join()
	run([]step{
		{"joined, not finished", 1, "", 200, enabled},
		{"enable_cluster on a member", 2, enable, 400, alreadyEnabled},
		{"finish_cluster", 0, `{"action":"finish_cluster"}`, 201, ok},
		{"state after finish_cluster", 0, "", 200, finished},
		{"finish_cluster again", 0, `{"action":"finish_cluster"}`, 400, alreadyFinished},
		{"enable_single_node on a finished cluster", 0, `{"action":"enable_single_node"}`, 201, ok},
	})
	// the other members learn it from the membership lists
	c.WaitFor(10*time.Second, func() error {
		for i := 1; i < 3; i++ {
			var got struct{ State string }
			if st, out := c.Do(i, "GET", "/_cluster_setup", ""); st != 200 || json.Unmarshal(out, &got) != nil || got.State != "cluster_finished" {
				return fmt.Errorf("node %d: %d %s", i+1, st, out)
			}
		}
		return nil
	})
	run([]step{
		{"finish_cluster through another member", 1, `{"action":"finish_cluster"}`, 400, alreadyFinished},
		{"finish_cluster through the third", 2, `{"action":"finish_cluster"}`, 400, alreadyFinished},
	})
	// it is stored: restarted members remember it
	c.Restart(0)
	c.Restart(2)
	run([]step{
		{"state after a restart", 0, "", 200, finished},
		{"state after a restart", 2, "", 200, finished},
		{"finish_cluster after a restart", 2, `{"action":"finish_cluster"}`, 400, alreadyFinished},
	})
}
