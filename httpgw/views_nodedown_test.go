//go:build !race

// Multi-node: see config_cluster_test.go for why this runs without -race.

package httpgw_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

// A view answers the same with a node down: three nodes and a database of
// q=4, its docs and a design doc written through the first; the views read
// through each live node after the third stops, after writes while it is
// down, and through it once it is back and its copies caught up. Rows,
// total_rows and the _count, _sum and JavaScript reductions are compared
// with what the docs give.
//
// With n=3 every node holds every range and reads its own copies; with
// n=2 some ranges have no copy on the node asked, so its coordinator asks
// another node's copy (and with the third node down, the one left).
func TestViewsClusterNodeDown(t *testing.T) {
	for _, n := range []int{3, 2} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { viewsNodeDown(t, n) })
	}
}

func viewsNodeDown(t *testing.T, n int) {
	c := testcluster.New(t, 3)
	c.Join()
	db := fmt.Sprintf("nodedown%d", n)
	if st, b := c.Do(0, "PUT", fmt.Sprintf("/%s?q=4&n=%d", db, n), ""); st != 201 {
		t.Fatalf("create %s: %d %s", db, st, b)
	}
	m := &ndModel{}
	m.write(t, c, 0, db, 0, 1500)
	if st, b := c.Do(0, "PUT", "/"+db+"/_design/nd", ndDesign); st != 201 {
		t.Fatalf("design doc: %d %s", st, b)
	}

	// answer A through node 1, then the same through the others once
	// their copies have every write (a write is acknowledged by a quorum
	// of copies; the others get it soon after)
	want := m.answer()
	if got := ndAnswer(t, c, 0, db); got != want {
		t.Fatalf("through %s: %s", c.Name(0), ndDiff(got, want))
	}
	settle := time.Now()
	for i := 1; i < 3; i++ {
		c.WaitFor(20*time.Second, func() error {
			if got := ndAnswer(t, c, i, db); got != want {
				return fmt.Errorf("through %s: %s", c.Name(i), ndDiff(got, want))
			}
			return nil
		})
	}

	t.Logf("the same answer through every node after %v", time.Since(settle).Round(time.Millisecond))

	c.Stop(2)
	// the same answer through the live nodes, at once and in bounded time:
	// copies on the stopped node are skipped (or, when asked before the
	// node is seen down, given up for another copy)
	for i := 0; i < 2; i++ {
		start := time.Now()
		got := ndAnswer(t, c, i, db)
		took := time.Since(start)
		if got != want {
			t.Errorf("through %s with %s down: %s", c.Name(i), c.Name(2), ndDiff(got, want))
		}
		if took > 10*time.Second {
			t.Errorf("through %s with %s down: the view queries took %v", c.Name(i), c.Name(2), took)
		}
		t.Logf("through %s with %s down: the view queries took %v", c.Name(i), c.Name(2), took.Round(time.Millisecond))
	}
	if t.Failed() {
		t.FailNow()
	}

	// writes while it is down (edits, deletes and new docs) show through
	// the node that took them and the other live one
	m.write(t, c, 1, db, 1, 1700)
	want = m.answer()
	written := time.Now()
	for i := 0; i < 2; i++ {
		c.WaitFor(20*time.Second, func() error {
			if got := ndAnswer(t, c, i, db); got != want {
				return fmt.Errorf("through %s after writes with %s down: %s", c.Name(i), c.Name(2), ndDiff(got, want))
			}
			return nil
		})
	}

	t.Logf("the writes made with %s down show through both live nodes after %v", c.Name(2), time.Since(written).Round(time.Millisecond))

	// back: once its copies caught up, it answers the same (until it
	// hears from the others, a range it has no copy of has no live copy:
	// an error reply, retried too)
	c.Restart(2)
	start := time.Now()
	c.WaitFor(30*time.Second, func() error {
		got, err := ndTry(t, c, 2, db)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("through %s after its restart: %s", c.Name(2), ndDiff(got, want))
		}
		return nil
	})
	t.Logf("through %s after its restart: the answer after %v", c.Name(2), time.Since(start).Round(time.Millisecond))
}

const ndDesign = `{"views":{
	"rows":{"map":"function(doc){ if (doc.n % 9 !== 0) emit(doc.n, doc.v); }","reduce":"_count"},
	"sum":{"map":"function(doc){ if (doc.n % 9 !== 0) emit(doc.n, doc.v); }","reduce":"_sum"},
	"js":{"map":"function(doc){ if (doc.n % 9 !== 0) emit([doc.g, doc.n], doc.v); }","reduce":"function(keys, values, rereduce){ var s = 0; for (var i = 0; i < values.length; i++) s += values[i]; return s; }"}}}`

// ndModel is the docs both databases hold: doc i at its version (-1
// deleted), with its rev in each database.
type ndModel struct {
	ver  []int
	revs map[string]string
}

func (m *ndModel) doc(i int) (n, v, g int) {
	ver := m.ver[i]
	return i, (i*3 + ver*17) % 100, (i + ver) % 4
}

// write makes docs up to n and, from version 1 on, edits every third
// doc and deletes every eleventh, through node.
func (m *ndModel) write(t *testing.T, c *testcluster.Cluster, node int, db string, ver, n int) {
	t.Helper()
	if m.revs == nil {
		m.revs = map[string]string{}
	}
	type change struct {
		i   int
		del bool
	}
	var todo []change
	for i := range m.ver {
		switch {
		case m.ver[i] < 0 || ver == 0:
		case i%11 == 5:
			todo = append(todo, change{i, true})
		case i%3 == 0:
			todo = append(todo, change{i, false})
		}
	}
	for i := len(m.ver); i < n; i++ {
		m.ver = append(m.ver, 0)
		todo = append(todo, change{i, false})
	}
	for _, ch := range todo {
		if ch.del {
			m.ver[ch.i] = -1
		} else {
			m.ver[ch.i] = ver
		}
	}
	{
		var docs []string
		for _, ch := range todo {
			id := fmt.Sprintf("d%05d", ch.i)
			rev := ""
			if r := m.revs[id]; r != "" {
				rev = fmt.Sprintf(`,"_rev":%q`, r)
			}
			if ch.del {
				docs = append(docs, fmt.Sprintf(`{"_id":%q%s,"_deleted":true}`, id, rev))
				continue
			}
			nn, v, g := m.doc(ch.i)
			docs = append(docs, fmt.Sprintf(`{"_id":%q%s,"n":%d,"v":%d,"g":%d}`, id, rev, nn, v, g))
		}
		st, b := c.Do(node, "POST", "/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`)
		var res []struct{ ID, Rev, Error string }
		if st != 201 && st != 202 || json.Unmarshal(b, &res) != nil || len(res) != len(docs) {
			t.Fatalf("_bulk_docs %s through %s: %d %.300s", db, c.Name(node), st, b)
		}
		for _, r := range res {
			if r.Error != "" {
				t.Fatalf("_bulk_docs %s through %s: %s: %s", db, c.Name(node), r.ID, r.Error)
			}
			m.revs[r.ID] = r.Rev
		}
	}
}

// ndResult is what the test compares: every row and the reductions.
type ndResult struct {
	TotalRows  int
	Rows       string // id:key:value, in order
	Count, Sum float64
	JS         float64
	Groups     string // group_level=1 of js
}

func (m *ndModel) answer() ndResult {
	var r ndResult
	var rows []string
	groups := map[int]float64{}
	for i, ver := range m.ver {
		if ver < 0 || i%9 == 0 {
			continue
		}
		n, v, g := m.doc(i)
		rows = append(rows, fmt.Sprintf("d%05d:%d:%d", i, n, v))
		r.Sum += float64(v)
		groups[g] += float64(v)
	}
	r.TotalRows, r.Count, r.JS = len(rows), float64(len(rows)), r.Sum
	r.Rows = strings.Join(rows, " ")
	r.Groups = fmt.Sprint(groups)
	return r
}

// ndAnswer reads the views through node i (update=true: each copy asked
// catches up first); an error reply fails the test.
func ndAnswer(t *testing.T, c *testcluster.Cluster, i int, db string) ndResult {
	t.Helper()
	r, err := ndTry(t, c, i, db)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ndTry is ndAnswer answering an error reply.
func ndTry(t *testing.T, c *testcluster.Cluster, i int, db string) (r ndResult, err error) {
	t.Helper()
	get := func(view, q string, out any) {
		if err != nil {
			return
		}
		st, b := c.Do(i, "GET", "/"+db+"/_design/nd/_view/"+view+"?"+q, "")
		if st != 200 {
			err = fmt.Errorf("%s %s?%s through %s: %d %.300s", db, view, q, c.Name(i), st, b)
		} else if jerr := json.Unmarshal(b, out); jerr != nil {
			err = fmt.Errorf("%s %s?%s through %s: %v: %.300s", db, view, q, c.Name(i), jerr, b)
		}
	}
	var all struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Key   int    `json:"key"`
			Value int    `json:"value"`
		} `json:"rows"`
	}
	get("rows", "reduce=false", &all)
	r.TotalRows = all.TotalRows
	rows := make([]string, len(all.Rows))
	for k, row := range all.Rows {
		rows[k] = fmt.Sprintf("%s:%d:%d", row.ID, row.Key, row.Value)
	}
	r.Rows = strings.Join(rows, " ")
	type reduced struct {
		Rows []struct {
			Key   json.RawMessage `json:"key"`
			Value float64         `json:"value"`
		} `json:"rows"`
	}
	one := func(view string) float64 {
		var red reduced
		get(view, "", &red)
		if len(red.Rows) != 1 {
			return -1
		}
		return red.Rows[0].Value
	}
	r.Count, r.Sum, r.JS = one("rows"), one("sum"), one("js")
	var red reduced
	get("js", "group_level=1", &red)
	groups := map[int]float64{}
	for _, row := range red.Rows {
		var k []int
		if json.Unmarshal(row.Key, &k) != nil || len(k) != 1 {
			groups[-1] = row.Value // shows in the diff
			continue
		}
		groups[k[0]] = row.Value
	}
	r.Groups = fmt.Sprint(groups)
	return r, err
}

// ndDiff says how got differs from want, briefly.
func ndDiff(got, want ndResult) string {
	var out []string
	if got.TotalRows != want.TotalRows {
		out = append(out, fmt.Sprintf("total_rows %d, want %d", got.TotalRows, want.TotalRows))
	}
	if got.Rows != want.Rows {
		g, w := strings.Fields(got.Rows), strings.Fields(want.Rows)
		inG := map[string]bool{}
		for _, x := range g {
			inG[x] = true
		}
		inW := map[string]bool{}
		var missing, extra []string
		for _, x := range w {
			inW[x] = true
			if !inG[x] {
				missing = append(missing, x)
			}
		}
		for _, x := range g {
			if !inW[x] {
				extra = append(extra, x)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		out = append(out, fmt.Sprintf("%d rows, want %d (%d missing, e.g. %v; %d extra, e.g. %v)",
			len(g), len(w), len(missing), missing[:min(5, len(missing))], len(extra), extra[:min(5, len(extra))]))
	}
	if got.Count != want.Count || got.Sum != want.Sum || got.JS != want.JS {
		out = append(out, fmt.Sprintf("_count %v _sum %v js %v, want %v %v %v", got.Count, got.Sum, got.JS, want.Count, want.Sum, want.JS))
	}
	if got.Groups != want.Groups {
		out = append(out, fmt.Sprintf("js groups %s, want %s", got.Groups, want.Groups))
	}
	if len(out) == 0 {
		return "same"
	}
	return strings.Join(out, "; ")
}
