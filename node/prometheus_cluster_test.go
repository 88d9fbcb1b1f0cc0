//go:build !race

// Several nodes in one process (see cluster_test.go for why not under
// -race); the name matches make test's second, race-free pass.

package node_test

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/settee/settee/internal/testcluster"
)

func TestClusterPrometheusOfAnotherNode(t *testing.T) {
	c := testcluster.New(t, 2)
	c.Join()
	// traffic only node2 sees: its _up counter tells its scrape apart
	for range 3 {
		if st, _ := c.Do(1, "GET", "/_up", ""); st != 200 {
			t.Fatalf("_up on node2: %d", st)
		}
	}
	st, body := c.Do(0, "GET", "/_node/"+c.Name(1)+"/_prometheus", "")
	if st != 200 {
		t.Fatalf("_prometheus of node2 through node1: %d %s", st, body)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var ups float64
	for _, m := range mfs["settee_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && l.GetValue() == "_up" {
				ups += m.GetCounter().GetValue()
			}
		}
	}
	if ups < 3 {
		t.Fatalf("node2's _up requests seen through node1: %v, want >= 3", ups)
	}
	if st, _ := c.Do(0, "GET", "/_node/ghost@127.0.0.1/_prometheus", ""); st != 404 {
		t.Fatalf("unknown node: %d", st)
	}
}
