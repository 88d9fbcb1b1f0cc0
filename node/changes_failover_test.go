//go:build !race

// Multi-node: see cluster_data_test.go for why these tests run without -race.

package node_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
)

// seqNode names the node whose copy a clustered seq points into (a seq is
// "sum-base64(ranges with node names and seqs)").
func seqNode(t *testing.T, c *testcluster.Cluster, seq string) int {
	t.Helper()
	_, enc, _ := strings.Cut(seq, "-")
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("seq %q: %v", seq, err)
	}
	for i := range c.Nodes {
		if strings.Contains(string(b), c.Name(i)) {
			return i
		}
	}
	t.Fatalf("seq %q names no node", seq)
	return -1
}

// A normal _changes feed read through a node that holds no copy of the
// database goes on from the other copy when the copy it reads stops in the
// middle: every change arrives (some twice, as CouchDB allows), none is
// skipped.
func TestClusterChangesFeedSurvivesCopyLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := testcluster.New(t, 3)
	c.Join()
	if st, out := c.Do(0, "PUT", "/fo?q=1&n=2", ""); st != 201 {
		t.Fatalf("create: %d %s", st, out)
	}
	holders := map[string]bool{}
	for _, n := range shardNodes(t, c, 0, "fo") {
		holders[n] = true
	}
	feedNode := -1
	for i := range 3 {
		if !holders[c.Name(i)] {
			feedNode = i
		}
	}
	if len(holders) != 2 || feedNode < 0 {
		t.Fatalf("copies on %v", holders)
	}
	const ndocs = 10000
	pad := strings.Repeat("x", 2500)
	for b := 0; b < ndocs; b += 1000 {
		var docs []string
		for i := b; i < b+1000; i++ {
			docs = append(docs, fmt.Sprintf(`{"_id":"d%05d","pad":%q}`, i, pad))
		}
		if st, out := c.Do(feedNode, "POST", "/fo/_bulk_docs?w=2", `{"docs":[`+strings.Join(docs, ",")+`]}`); st != 201 {
			t.Fatalf("bulk: %d %.200s", st, out)
		}
	}

	// the feed is ~25 MB, more than loopback socket buffers hold (up to
	// ~10 MB with autotuning): the server is still reading the copy when
	// the test stops it
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", c.Nodes[feedNode].URL+"/fo/_changes?include_docs=true", nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("_changes: %v %v", err, resp)
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 4096)
	type row struct {
		Seq string
		ID  string
	}
	ids := map[string]int{}
	rows, stopped := 0, -1
	var lastSeq string
	for {
		line, err := rd.ReadString('\n')
		line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), ","))
		if strings.HasPrefix(line, `{"seq"`) {
			var r row
			if json.Unmarshal([]byte(line), &r) != nil {
				t.Fatalf("row %.200s", line)
			}
			ids[r.ID]++
			rows++
			if stopped < 0 {
				stopped = seqNode(t, c, r.Seq)
				t0 := time.Now()
				c.Stop(stopped)
				t.Logf("stopped %s in %v", c.Name(stopped), time.Since(t0))
			}
		}
		if strings.HasPrefix(line, `"last_seq"`) {
			lastSeq = line
		}
		if err != nil {
			break
		}
	}
	if lastSeq == "" {
		t.Fatalf("the feed ended without last_seq after %d rows", rows)
	}
	if len(ids) != ndocs {
		t.Fatalf("%d distinct docs in the feed, want %d (%d rows)", len(ids), ndocs, rows)
	}
	if rows == ndocs {
		t.Fatalf("no change was repeated: the feed never moved to the other copy")
	}
	var last struct {
		LastSeq string `json:"last_seq"`
	}
	if err := json.Unmarshal([]byte("{"+strings.TrimSuffix(lastSeq, "}")+"}"), &last); err != nil {
		t.Fatalf("last_seq %q: %v", lastSeq, err)
	}
	if n := seqNode(t, c, last.LastSeq); n == stopped {
		t.Fatalf("last_seq still points into the stopped node's copy")
	}
	t.Logf("stopped %s after the first row: %d rows for %d docs", c.Name(stopped), rows, ndocs)
}
