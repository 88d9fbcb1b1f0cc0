//go:build !race

// Multi-node: protoactor's remote sets gRPC's global logger at every
// start, which the race detector reports between nodes of one process
// (node/cluster_data_test.go says more), so this runs without -race.

package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testcluster"
)

// /_node/<other node>/_config is answered by that node, escaped keys and
// all.
func TestConfigOtherNode(t *testing.T) {
	c := testcluster.New(t, 2)
	c.Join()
	other := "/_node/" + c.Name(1) + "/_config/zz%2Fs/k%2F1"
	if st, b := c.Do(0, "PUT", other, `"on2"`); st != 200 || string(b) != "\"\"\n" {
		t.Fatalf("PUT through node 1: %d %s", st, b)
	}
	if st, b := c.Do(1, "GET", "/_node/_local/_config/zz%2Fs", ""); st != 200 || string(b) != "{\"k/1\":\"on2\"}\n" {
		t.Fatalf("node 2's own: %d %s", st, b)
	}
	if st, b := c.Do(0, "GET", "/_node/_local/_config/zz%2Fs", ""); st != 200 || string(b) != "{}\n" {
		t.Fatalf("node 1 has it too: %d %s", st, b)
	}
	if st, b := c.Do(0, "DELETE", other, ""); st != 200 || string(b) != "\"on2\"\n" {
		t.Fatalf("DELETE through node 1: %d %s", st, b)
	}
}
