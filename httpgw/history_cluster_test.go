//go:build !race

// Multi-node: runs without -race, as config_cluster_test.go says why.

package httpgw_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

// /_node/<other node>/_history asked on node 1 is that node's series.
func TestHistoryOtherNode(t *testing.T) {
	c := testcluster.New(t, 3, fastHistory)
	c.Join()
	for i := range 3 {
		name := c.Name(i)
		var page historyPage
		c.WaitFor(10*time.Second, func() error {
			st, b := c.Do(0, "GET", "/_node/"+name+"/_history", "")
			if st != 200 {
				t.Fatalf("GET /_node/%s/_history on node 1: %d %s", name, st, b)
			}
			page = historyPage{}
			if err := json.Unmarshal(b, &page); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if len(page.Samples) == 0 {
				return errors.New("no samples yet")
			}
			return nil
		})
		if page.Node != name || page.IntervalSeconds != 0.2 {
			t.Errorf("/_node/%s/_history: node %q interval %v", name, page.Node, page.IntervalSeconds)
		}
	}
	// the other node's own rules answer through node 1
	if st, b := c.Do(0, "POST", "/_node/"+c.Name(1)+"/_history", "{}"); st != 405 ||
		string(b) != `{"error":"method_not_allowed","reason":"Only GET,HEAD allowed"}`+"\n" {
		t.Errorf("POST through node 1: %d %s", st, b)
	}
	if st, b := c.Do(0, "GET", "/_node/"+c.Name(2)+"/_history?since=x", ""); st != 400 {
		t.Errorf("bad since through node 1: %d %s", st, b)
	}
	last := time.Now().UnixMilli()
	if st, b := c.Do(0, "GET", "/_node/"+c.Name(2)+"/_history?since="+strconv.FormatInt(last+60_000, 10), ""); st != 200 ||
		string(b) != `{"node":"`+c.Name(2)+`","interval_seconds":0.2,"window_seconds":900,"samples":[]}`+"\n" {
		t.Errorf("since in the future through node 1: %d %s", st, b)
	}
}
