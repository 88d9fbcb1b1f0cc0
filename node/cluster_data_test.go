//go:build !race

// Several nodes in one process start several protoactor remotes, and each
// remote's Start rewrites grpc's global logger while the others' gRPC
// servers read it: a race in the libraries, harmless with one node per
// process (as in production). These tests run without -race (make test runs
// them in a second pass).

package node_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

func writeDocs(t *testing.T, c *testcluster.Cluster, node int, db, prefix string, from, to int) (accepted int) {
	t.Helper()
	var docs []string
	for i := from; i < to; i++ {
		docs = append(docs, fmt.Sprintf(`{"_id":"%s%03d","n":%d}`, prefix, i, i))
	}
	st, body := c.Do(node, "POST", "/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
	if st != 201 && st != 202 {
		t.Fatalf("bulk on node %d: %d %s", node, st, body)
	}
	var res []struct{ Error string }
	_ = json.Unmarshal(body, &res)
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("bulk on node %d: %s", node, body)
		}
	}
	if st == 202 {
		accepted = len(docs)
	}
	return accepted
}

func allIDs(t *testing.T, c *testcluster.Cluster, node int, db string) []string {
	t.Helper()
	st, body := c.Do(node, "GET", "/"+db+"/_all_docs", "")
	if st != 200 {
		t.Fatalf("_all_docs on node %d: %d %s", node, st, body)
	}
	var ad struct{ Rows []struct{ ID string } }
	if err := json.Unmarshal(body, &ad); err != nil {
		t.Fatalf("_all_docs on node %d: %v %s", node, err, body)
	}
	ids := make([]string, len(ad.Rows))
	for i, r := range ad.Rows {
		ids[i] = r.ID
	}
	return ids
}

func TestClusterQuorumAndCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	t0 := time.Now()
	lg := func(m string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), m) }
	c := testcluster.New(t, 3)
	lg("started")
	c.Join()
	lg("joined")
	if st, body := c.Do(0, "PUT", "/cdb?q=4&n=3", ""); st != 201 {
		t.Fatalf("create q=4 n=3: %d %s", st, body)
	}
	// the shard map reaches every node
	c.WaitFor(10*time.Second, func() error {
		for i := range 3 {
			if st, body := c.Do(i, "GET", "/cdb", ""); st != 200 || !strings.Contains(string(body), `"n":3`) {
				return fmt.Errorf("node %d: %d %s", i, st, body)
			}
		}
		return nil
	})
	if got := writeDocs(t, c, 0, "cdb", "a", 0, 100); got != 0 {
		t.Fatalf("writes with all nodes up answered 202")
	}
	// written through node 1, visible through the others
	for i := range 3 {
		if ids := allIDs(t, c, i, "cdb"); len(ids) != 100 {
			t.Fatalf("node %d sees %d docs", i, len(ids))
		}
	}

	// one node down: writes still reach w=2 copies (201), reads and
	// _changes still complete
	lg("stop2")
	c.Stop(2)
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(0); len(m.AllNodes) != 2 {
			return fmt.Errorf("node3 still seen: %+v", m)
		}
		return nil
	})
	lg("write b")
	if got := writeDocs(t, c, 1, "cdb", "b", 0, 50); got != 0 {
		t.Fatalf("writes with 2 of 3 nodes up answered 202, want 201")
	}
	if ids := allIDs(t, c, 0, "cdb"); len(ids) != 150 {
		t.Fatalf("after node3 stopped, node1 sees %d docs", len(ids))
	}
	st, body := c.Do(1, "GET", "/cdb/_changes", "")
	var ch struct{ Results []json.RawMessage }
	if st != 200 || json.Unmarshal(body, &ch) != nil || len(ch.Results) != 150 {
		t.Fatalf("_changes with a node down: %d, %d rows", st, len(ch.Results))
	}

	// node 3 comes back and catches up by itself: then it alone serves
	// every document
	lg("restart2")
	c.Restart(2)
	c.WaitFor(30*time.Second, func() error {
		if ids := allIDs(t, c, 2, "cdb"); len(ids) != 150 {
			return fmt.Errorf("node3 has %d docs after restart", len(ids))
		}
		return nil
	})
	lg("c.Stop(0)")
	c.Stop(0)
	lg("stopped 0")
	c.Stop(1)
	lg("stopped 1")
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(2); len(m.AllNodes) != 1 {
			return fmt.Errorf("node3 still sees %v", m.AllNodes)
		}
		return nil
	})
	lg("alone")
	ids := allIDs(t, c, 2, "cdb")
	if len(ids) != 150 || !sort.StringsAreSorted(ids) {
		t.Fatalf("node3 alone serves %d docs", len(ids))
	}
	for _, id := range []string{"a000", "a099", "b000", "b049"} {
		if st, body := c.Do(2, "GET", "/cdb/"+id, ""); st != 200 {
			t.Fatalf("GET %s from node3 alone: %d %s", id, st, body)
		}
	}
	// with two of three down a write answers 202 (one copy)...
	if got := writeDocs(t, c, 2, "cdb", "c", 0, 10); got != 10 {
		t.Fatalf("writes with 1 of 3 nodes up: %d accepted, want 202 for all", got)
	}
	// ...and reaches the others when they return
	lg("c.Restart(0)")
	c.Restart(0)
	lg("restarted 0")
	c.Restart(1)
	lg("restarted 1")
	c.WaitFor(30*time.Second, func() error {
		for _, i := range []int{0, 1} {
			st, body := c.Do(i, "GET", "/cdb/c005", "")
			if st != 200 {
				return fmt.Errorf("node %d: c005 %d %s", i, st, body)
			}
		}
		return nil
	})
}

func TestClusterCreateAndDeleteWhileNodeDown(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := testcluster.New(t, 3)
	c.Join()
	if st, body := c.Do(0, "PUT", "/old?n=3", ""); st != 201 {
		t.Fatalf("create old: %d %s", st, body)
	}
	c.Stop(2)
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(0); len(m.AllNodes) != 2 {
			return fmt.Errorf("node3 still seen: %+v", m)
		}
		return nil
	})
	if st, body := c.Do(0, "PUT", "/fresh?n=3", ""); st != 202 {
		t.Fatalf("create with a node down: %d %s, want 202", st, body)
	}
	if st, body := c.Do(1, "DELETE", "/old", ""); st != 202 {
		t.Fatalf("delete with a node down: %d %s, want 202", st, body)
	}
	c.Restart(2)
	c.WaitFor(30*time.Second, func() error {
		if st, _ := c.Do(2, "GET", "/fresh", ""); st != 200 {
			return fmt.Errorf("node3 does not know fresh yet: %d", st)
		}
		if st, _ := c.Do(2, "GET", "/old", ""); st != 404 {
			return fmt.Errorf("node3 still has old: %d", st)
		}
		return nil
	})
	// a deleted database never comes back through anti-entropy
	time.Sleep(6 * time.Second)
	for i := range 3 {
		if st, _ := c.Do(i, "GET", "/old", ""); st != 404 {
			t.Fatalf("node %d: deleted db is back: %d", i, st)
		}
	}
}

func TestClusterShardMapEndpoints(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	if st, body := c.Do(0, "PUT", "/sm?q=4&n=2", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	var shards struct{ Shards map[string][]string }
	st, body := c.Do(1, "GET", "/sm/_shards", "")
	if st != 200 || json.Unmarshal(body, &shards) != nil || len(shards.Shards) != 4 {
		t.Fatalf("_shards: %d %s", st, body)
	}
	perNode := map[string]int{}
	for r, nodes := range shards.Shards {
		if len(nodes) != 2 || nodes[0] == nodes[1] {
			t.Fatalf("range %s on %v: want 2 distinct nodes", r, nodes)
		}
		for _, n := range nodes {
			perNode[n]++
		}
	}
	if len(perNode) != 3 {
		t.Fatalf("copies not spread over the 3 nodes: %v", perNode)
	}
	var one struct {
		Range string
		Nodes []string
	}
	st, body = c.Do(2, "GET", "/sm/_shards/some-doc", "")
	if st != 200 || json.Unmarshal(body, &one) != nil || len(one.Nodes) != 2 || shards.Shards[one.Range] == nil {
		t.Fatalf("_shards/<docid>: %d %s", st, body)
	}
	// every node holds the same map, as its _dbs document
	for i := range 3 {
		var doc struct {
			ByRange map[string][]string `json:"by_range"`
			ByNode  map[string][]string `json:"by_node"`
		}
		st, body := c.Do(i, "GET", "/_node/_local/_dbs/sm", "")
		if st != 200 || json.Unmarshal(body, &doc) != nil || fmt.Sprint(doc.ByRange) != fmt.Sprint(shards.Shards) || len(doc.ByNode) != 3 {
			t.Fatalf("node %d's _dbs/sm: %d %s, want by_range %v", i, st, body, shards.Shards)
		}
	}
	if st, body := c.Do(0, "POST", "/sm/_sync_shards", ""); st != 202 {
		t.Fatalf("_sync_shards: %d %s", st, body)
	}
	// n larger than the cluster cannot be met
	if st, body := c.Do(0, "PUT", "/toomany?n=5", ""); st != 400 {
		t.Fatalf("n=5 on 3 nodes: %d %s", st, body)
	}
}

// A shard's part of a batch travels between nodes as one message: bigger
// than gRPC's 4 MB default, it used to cut the connection (every write then
// waited for its timeout and answered 202).
func TestClusterLargeBatchReachesCopies(t *testing.T) {
	c := testcluster.New(t, 2)
	c.Join()
	if st, body := c.Do(0, "PUT", "/big?q=1&n=2", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	filler := strings.Repeat("x", 60000)
	var docs []string
	for i := range 100 {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%03d","f":%q}`, i, filler))
	}
	t0 := time.Now()
	st, body := c.Do(0, "POST", "/big/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
	if st != 201 {
		t.Fatalf("6 MB batch on n=2: %d %.200s", st, body)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Fatalf("6 MB batch took %v", d)
	}
	if ids := allIDs(t, c, 1, "big"); len(ids) != 100 {
		t.Fatalf("second node has %d docs", len(ids))
	}
}

func TestClusterPartitionHealsWithConflictsKept(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	if st, body := c.Do(0, "PUT", "/pd?q=1&n=3", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	// w=3: every copy holds the starting revision (a read through a node
	// may be answered by another node's copy, so reads cannot tell)
	st, body := c.Do(0, "PUT", "/pd/x?w=3", `{"v":"start"}`)
	if st != 201 {
		t.Fatalf("put with w=3: %d %s", st, body)
	}
	var r struct{ Rev string }
	_ = json.Unmarshal(body, &r)
	c.WaitFor(10*time.Second, func() error {
		for i := range 3 {
			if st, _ := c.Do(i, "GET", "/pd/x?rev="+r.Rev, ""); st != 200 {
				return fmt.Errorf("node %d lacks x", i)
			}
		}
		return nil
	})

	c.Partition([]int{0}, []int{1, 2})
	// each side edits the same revision: the minority can only reach its
	// own copy (202), the majority two (201)
	st, body = c.Do(0, "PUT", "/pd/x", fmt.Sprintf(`{"_rev":%q,"v":"minority"}`, r.Rev))
	if st != 202 {
		t.Fatalf("minority write: %d %s, want 202", st, body)
	}
	var ra, rb struct{ Rev string }
	_ = json.Unmarshal(body, &ra)
	st, body = c.Do(1, "PUT", "/pd/x", fmt.Sprintf(`{"_rev":%q,"v":"majority"}`, r.Rev))
	if st != 201 {
		t.Fatalf("majority write: %d %s, want 201", st, body)
	}
	_ = json.Unmarshal(body, &rb)

	c.Heal()
	// every copy ends up with both revisions: one wins, the other is a
	// conflict, none is lost
	c.WaitFor(30*time.Second, func() error {
		for i := range 3 {
			st, body := c.Do(i, "GET", "/pd/x?conflicts=true", "")
			var d struct {
				Rev       string   `json:"_rev"`
				Conflicts []string `json:"_conflicts"`
			}
			if st != 200 || json.Unmarshal(body, &d) != nil {
				return fmt.Errorf("node %d: %d %s", i, st, body)
			}
			revs := append([]string{d.Rev}, d.Conflicts...)
			sort.Strings(revs)
			want := []string{ra.Rev, rb.Rev}
			sort.Strings(want)
			if strings.Join(revs, ",") != strings.Join(want, ",") {
				return fmt.Errorf("node %d: rev %s conflicts %v, want both of %v", i, d.Rev, d.Conflicts, want)
			}
		}
		return nil
	})
}

// What a client sees of w with one copy of three down: a write that
// reaches w copies is 201 (a deletion 200), one that reaches fewer is 202,
// whatever kind of write it is; CouchDB answers an attachment's removal
// 200 whatever the quorum.
func TestClusterWriteStatusesFollowTheQuorum(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	if st, body := c.Do(0, "PUT", "/wq?q=1&n=3", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	c.Stop(2)
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(0); len(m.AllNodes) != 2 {
			return fmt.Errorf("node3 still seen: %+v", m)
		}
		return nil
	})
	rev := func(body []byte) string {
		var r struct{ Rev string }
		if err := json.Unmarshal(body, &r); err != nil || r.Rev == "" {
			t.Fatalf("no rev in %s", body)
		}
		return r.Rev
	}
	expect := func(want int, method, path, body string) string {
		t.Helper()
		st, out := c.Do(0, method, path, body)
		if st != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, st, out, want)
		}
		return rev(out)
	}
	a := expect(201, "PUT", "/wq/a", `{"v":1}`)     // w=2 of 2 live copies
	b := expect(202, "PUT", "/wq/b?w=3", `{"v":1}`) // 2 of w=3
	expect(202, "PUT", "/wq/c?w=5", `{"v":1}`)      // w above n: never met
	expect(200, "DELETE", "/wq/a?rev="+a, "")
	expect(202, "DELETE", "/wq/b?w=3&rev="+b, "")
	d := expect(201, "PUT", "/wq/d", `{"v":1}`)
	expect(202, "PUT", "/wq/d?w=3", fmt.Sprintf(`{"_rev":%q,"_deleted":true}`, d))
	e := expect(201, "PUT", "/wq/e/x.txt", "one")
	e = expect(202, "PUT", "/wq/e/y.txt?w=3&rev="+e, "two")
	e = expect(200, "DELETE", "/wq/e/x.txt?w=3&rev="+e, "")
	expect(200, "DELETE", "/wq/e/y.txt?rev="+e, "")
	st, out := c.Do(0, "POST", "/wq/_bulk_docs", `{"w":3,"docs":[{"_id":"f"},{"_id":"g"}]}`)
	var res []struct{ OK bool }
	if st != 202 || json.Unmarshal(out, &res) != nil || len(res) != 2 || !res[0].OK || !res[1].OK {
		t.Fatalf("_bulk_docs with w=3: %d %s, want 202 with both ok", st, out)
	}
	if st, out := c.Do(0, "POST", "/wq/_bulk_docs?w=2", `{"docs":[{"_id":"h"}]}`); st != 201 {
		t.Fatalf("_bulk_docs with w=2: %d %s", st, out)
	}
}

// A range whose only copy is on a node that is down cannot be read or
// written: CouchDB's 500 nodedown "progress not possible", not a hang.
func TestClusterRangeWithoutLiveCopyIsNodedown(t *testing.T) {
	c := testcluster.New(t, 2)
	c.Join()
	if st, body := c.Do(0, "PUT", "/solo?q=1&n=1", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	var one struct{ Nodes []string }
	st, body := c.Do(0, "GET", "/solo/_shards/d", "")
	if st != 200 || json.Unmarshal(body, &one) != nil || len(one.Nodes) != 1 {
		t.Fatalf("_shards/d: %d %s", st, body)
	}
	holder := 0
	if one.Nodes[0] == c.Name(1) {
		holder = 1
	}
	other := 1 - holder
	if st, body := c.Do(other, "PUT", "/solo/d", `{"v":1}`); st != 201 {
		t.Fatalf("write: %d %s", st, body)
	}
	c.Stop(holder)
	c.WaitFor(15*time.Second, func() error {
		if m := c.Membership(other); len(m.AllNodes) != 1 {
			return fmt.Errorf("holder still seen: %+v", m)
		}
		return nil
	})
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/solo/_all_docs", ""},
		{"GET", "/solo/d", ""},
		{"PUT", "/solo/e", `{"v":1}`},
	} {
		var e struct{ Error, Reason string }
		st, body := c.Do(other, r.method, r.path, r.body)
		if st != 500 || json.Unmarshal(body, &e) != nil || e.Error != "nodedown" || e.Reason != "progress not possible" {
			t.Errorf("%s %s with its only copy down: %d %s, want 500 nodedown", r.method, r.path, st, body)
		}
	}
}
