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

// A cluster answers Mango as one CouchDB does: three nodes, a database of
// q=4 n=3, two json indexes made through the first node and 300 docs
// written through each node in turn. Through every node: the sorted
// queries on an index (ascending and descending, one field and two) give
// the same docs in the same order, the ones the docs give; skip and limit
// slice that list; limit and bookmark page through it, each page asked of
// the next node (a bookmark made by one coordinator is good on another),
// every match once; the _all_docs fallback the same; _explain and the
// index list the same. Then the third node stops: the same answers
// through the other two, then writes through one of them (new docs,
// deletes, edits that move docs in the index, and a new index) show
// through both once the indexes catch up; the third node restarts and
// answers the same.
//
// With n=3 every node holds every range and reads its own copies.
func TestMangoCluster(t *testing.T) { mangoCluster(t, 3) }

// TestMangoClusterTwoCopies is TestMangoCluster with n=2 (as in
// TestViewsClusterNodeDown): some ranges have no copy on the node asked,
// so the index rows and docs come from another node's copy, and with the
// third node down from the one copy left.
func TestMangoClusterTwoCopies(t *testing.T) { mangoCluster(t, 2) }

func mangoCluster(t *testing.T, n int) {
	start := time.Now()
	c := testcluster.New(t, 3)
	c.Join()
	db := fmt.Sprintf("mango-cluster-n%d", n)
	if st, b := c.Do(0, "PUT", fmt.Sprintf("/%s?q=4&n=%d", db, n), ""); st != 201 {
		t.Fatalf("create %s: %d %s", db, st, b)
	}
	for _, ix := range []string{
		`{"index":{"fields":["n"]},"name":"by-n","ddoc":"mc-n"}`,
		`{"index":{"fields":["g","n"]},"name":"by-gn","ddoc":"mc-gn"}`,
	} {
		if st, b := c.Do(0, "POST", "/"+db+"/_index", ix); st != 200 || !strings.Contains(string(b), `"created"`) {
			t.Fatalf("_index %s: %d %s", ix, st, b)
		}
	}
	m := mcModel{}
	m.load(t, c, db)

	for _, q := range m.queries() {
		t.Logf("%s: %d docs", q.name, len(q.want))
	}
	all := []int{0, 1, 2}
	settle := time.Now()
	var explains []string
	for i := range all {
		c.WaitFor(20*time.Second, func() error {
			ex, err := mcCheck(c, all, i, db, m)
			if err == nil {
				explains = append(explains, ex)
			}
			return err
		})
	}
	for i := 1; i < len(explains); i++ {
		if explains[i] != explains[0] {
			t.Errorf("_explain and _index through %s:\n%s\nthrough %s:\n%s", c.Name(i), explains[i], c.Name(0), explains[0])
		}
	}
	t.Logf("the same answers through every node after %v", time.Since(settle).Round(time.Millisecond))

	c.Stop(2)
	live := []int{0, 1}
	for _, i := range live {
		began := time.Now()
		if _, err := mcCheck(c, live, i, db, m); err != nil {
			t.Fatalf("with %s down: %v", c.Name(2), err)
		}
		t.Logf("through %s with %s down: answered in %v", c.Name(i), c.Name(2), time.Since(began).Round(time.Millisecond))
	}

	m.change(t, c, 1, db)
	// a new index, made through the other live node
	if st, b := c.Do(0, "POST", "/"+db+"/_index", `{"index":{"fields":["v"]},"name":"by-v","ddoc":"mc-v"}`); st != 200 || !strings.Contains(string(b), `"created"`) {
		t.Fatalf("_index by-v with %s down: %d %s", c.Name(2), st, b)
	}
	m[mcByV] = &mcDoc{id: mcByV, deleted: true} // the model's mark: by-v is there
	written := time.Now()
	for _, i := range live {
		c.WaitFor(20*time.Second, func() error {
			_, err := mcCheck(c, live, i, db, m)
			return err
		})
	}
	t.Logf("the writes made with %s down show through both live nodes after %v", c.Name(2), time.Since(written).Round(time.Millisecond))

	c.Restart(2)
	back := time.Now()
	for {
		_, err := mcCheck(c, all, 2, db, m)
		if err == nil {
			break
		}
		if time.Since(back) > 30*time.Second {
			// a reply lost to the restarted node once made this wait 61 s
			// (coordinator.askResending asks again)
			t.Fatalf("through %s after its restart, not within 30s: %v", c.Name(2), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("through %s after its restart: the same answers after %v (the whole test %v)",
		c.Name(2), time.Since(back).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// mcDoc is one doc of the model.
type mcDoc struct {
	id      string
	n, v    int
	g       string
	rev     string
	deleted bool
}

// mcModel is the docs the database should hold, by id (and mcByV, a
// deleted doc standing for the index by-v, once made).
type mcModel map[string]*mcDoc

const mcByV = "_design/mc-v"

func (m mcModel) put(t *testing.T, c *testcluster.Cluster, node int, db string, docs []*mcDoc) {
	t.Helper()
	var body []string
	for _, d := range docs {
		rev := ""
		if d.rev != "" {
			rev = fmt.Sprintf(`,"_rev":%q`, d.rev)
		}
		if d.deleted {
			body = append(body, fmt.Sprintf(`{"_id":%q%s,"_deleted":true}`, d.id, rev))
			continue
		}
		body = append(body, fmt.Sprintf(`{"_id":%q%s,"n":%d,"g":%q,"v":%d,"w":%d}`, d.id, rev, d.n, d.g, d.v, d.v))
	}
	st, b := c.Do(node, "POST", "/"+db+"/_bulk_docs", `{"docs":[`+strings.Join(body, ",")+`]}`)
	var res []bulkResult
	if st != 201 && st != 202 || json.Unmarshal(b, &res) != nil || len(res) != len(docs) {
		t.Fatalf("_bulk_docs through %s: %d %.300s", c.Name(node), st, b)
	}
	for i, r := range res {
		if r.Error != "" || r.ID != docs[i].id {
			t.Fatalf("_bulk_docs through %s: %s: %s %s", c.Name(node), r.ID, r.Error, r.Reason)
		}
		docs[i].rev = r.Rev
		m[r.ID] = docs[i]
	}
}

// load writes docs d0000..d0299, 30 at a time through each node in turn:
// two docs for each n (ties in the index broken by id), g one of three.
func (m mcModel) load(t *testing.T, c *testcluster.Cluster, db string) {
	t.Helper()
	var batch []*mcDoc
	for i := 0; i < 300; i++ {
		batch = append(batch, &mcDoc{id: fmt.Sprintf("d%04d", i), n: (i * 7) % 150, g: string(rune('a' + i%3)), v: i})
		if len(batch) == 30 {
			m.put(t, c, (i/30)%len(c.Nodes), db, batch)
			batch = nil
		}
	}
}

// change writes through node: 40 new docs, every 7th doc deleted, every
// 5th moved to another n (and every 10th to another g).
func (m mcModel) change(t *testing.T, c *testcluster.Cluster, node int, db string) {
	t.Helper()
	var batch []*mcDoc
	for i := 0; i < 300; i++ {
		d := m[fmt.Sprintf("d%04d", i)]
		switch {
		case i%7 == 3:
			batch = append(batch, &mcDoc{id: d.id, rev: d.rev, deleted: true})
		case i%5 == 1:
			nd := *d
			nd.n = (d.n + 37) % 150
			if i%10 == 1 {
				nd.g = "c"
			}
			batch = append(batch, &nd)
		}
	}
	for i := 300; i < 340; i++ {
		batch = append(batch, &mcDoc{id: fmt.Sprintf("d%04d", i), n: i % 150, g: "b", v: i})
	}
	m.put(t, c, node, db, batch)
}

// mcQuery is one query and what the model gives for it: the matching
// docs, each "id:n", in the query's order.
type mcQuery struct {
	name string
	body string // the _find body without limit, skip and bookmark
	want []string
}

func (m mcModel) queries() []mcQuery {
	var live []*mcDoc
	_, byV := m[mcByV]
	for _, d := range m {
		if !d.deleted {
			live = append(live, d)
		}
	}
	byN := func(desc bool) func(i, j int) bool {
		return func(i, j int) bool {
			a, b := live[i], live[j]
			if desc {
				a, b = b, a
			}
			if a.n != b.n {
				return a.n < b.n
			}
			return a.id < b.id
		}
	}
	pick := func(keep func(*mcDoc) bool) []string {
		var out []string
		for _, d := range live {
			if keep(d) {
				out = append(out, fmt.Sprintf("%s:%d", d.id, d.n))
			}
		}
		return out
	}
	var qs []mcQuery
	sort.Slice(live, byN(false))
	inRange := func(d *mcDoc) bool { return d.n >= 20 && d.n < 120 }
	qs = append(qs, mcQuery{"by n asc", `"selector":{"n":{"$gte":20,"$lt":120}},"sort":[{"n":"asc"}],"fields":["_id","n"]`, pick(inRange)})
	qs = append(qs, mcQuery{"g=b by g,n asc", `"selector":{"g":"b","n":{"$gt":30}},"sort":["g","n"],"fields":["_id","n"]`,
		pick(func(d *mcDoc) bool { return d.g == "b" && d.n > 30 })})
	sort.Slice(live, byN(true))
	qs = append(qs, mcQuery{"by n desc", `"selector":{"n":{"$gte":20,"$lt":120}},"sort":[{"n":"desc"}],"fields":["_id","n"]`, pick(inRange)})
	qs = append(qs, mcQuery{"g=c by g,n desc", `"selector":{"g":"c","n":{"$lte":100}},"sort":[{"g":"desc"},{"n":"desc"}],"fields":["_id","n"]`,
		pick(func(d *mcDoc) bool { return d.g == "c" && d.n <= 100 })})
	sort.Slice(live, func(i, j int) bool { return live[i].id < live[j].id })
	// w is v again, never indexed
	qs = append(qs, mcQuery{"_all_docs fallback", `"selector":{"w":{"$gte":50,"$lt":320}},"fields":["_id","n"]`,
		pick(func(d *mcDoc) bool { return d.v >= 50 && d.v < 320 })})
	if byV {
		sort.Slice(live, func(i, j int) bool { return live[i].v > live[j].v })
		qs = append(qs, mcQuery{"v desc on by-v", `"selector":{"v":{"$lt":330}},"sort":[{"v":"desc"}],"fields":["_id","n"]`,
			pick(func(d *mcDoc) bool { return d.v < 330 })})
	}
	return qs
}

// mcCheck runs every query through node i: whole, sliced by skip and
// limit, and paged by limit and bookmark with each page asked of the next
// node of live; it returns the queries' _explain and the index list
// through i, for comparing nodes.
func mcCheck(c *testcluster.Cluster, live []int, i int, db string, m mcModel) (string, error) {
	var explains []string
	for _, q := range m.queries() {
		got, _, warn, err := mcFind(c, i, db, q.body+`,"limit":10000`)
		if err != nil {
			return "", fmt.Errorf("%s: %v", q.name, err)
		}
		if err := mcSame(got, q.want); err != nil {
			return "", fmt.Errorf("%s through %s: %v", q.name, c.Name(i), err)
		}
		fallback := strings.Contains(q.name, "fallback")
		if fallback != strings.Contains(warn, "No matching index found") {
			return "", fmt.Errorf("%s through %s: warning %q", q.name, c.Name(i), warn)
		}

		for _, sl := range [][2]int{{17, 23}, {0, 5}, {len(q.want) - 3, 10}} {
			got, _, _, err := mcFind(c, i, db, fmt.Sprintf(`%s,"skip":%d,"limit":%d`, q.body, sl[0], sl[1]))
			if err != nil {
				return "", fmt.Errorf("%s: %v", q.name, err)
			}
			want := q.want[min(sl[0], len(q.want)):min(sl[0]+sl[1], len(q.want))]
			if err := mcSame(got, want); err != nil {
				return "", fmt.Errorf("%s skip %d limit %d through %s: %v", q.name, sl[0], sl[1], c.Name(i), err)
			}
		}

		// paging: a bookmark made through one node, used on the next
		var paged []string
		bm := ""
		for k := 0; ; k++ {
			node := live[(i+k)%len(live)]
			body := q.body + `,"limit":13`
			if bm != "" {
				body += fmt.Sprintf(`,"bookmark":%q`, bm)
			}
			page, next, _, err := mcFind(c, node, db, body)
			if err != nil {
				return "", fmt.Errorf("%s page %d: %v", q.name, k, err)
			}
			if len(page) > 13 {
				return "", fmt.Errorf("%s page %d through %s: %d docs, limit 13", q.name, k, c.Name(node), len(page))
			}
			if len(page) == 0 {
				break
			}
			if k > len(q.want) {
				return "", fmt.Errorf("%s: paging does not end", q.name)
			}
			paged = append(paged, page...)
			bm = next
		}
		if err := mcSame(paged, q.want); err != nil {
			return "", fmt.Errorf("%s paged by 13 from %s on: %v", q.name, c.Name(i), err)
		}

		st, b := c.Do(i, "POST", "/"+db+"/_explain", "{"+q.body+`,"limit":13}`)
		if st != 200 {
			return "", fmt.Errorf("%s _explain through %s: %d %s", q.name, c.Name(i), st, b)
		}
		var ex struct {
			Index *struct {
				Name string `json:"name"`
			} `json:"index"`
		}
		if err := json.Unmarshal(b, &ex); err != nil || ex.Index == nil {
			return "", fmt.Errorf("%s _explain through %s: %v %s", q.name, c.Name(i), err, b)
		}
		wantIx := "by-n"
		switch {
		case fallback:
			wantIx = "_all_docs"
		case strings.HasPrefix(q.name, "g="):
			wantIx = "by-gn"
		case strings.HasPrefix(q.name, "v "):
			wantIx = "by-v"
		}
		if ex.Index.Name != wantIx {
			return "", fmt.Errorf("%s _explain through %s: index %q, want %q", q.name, c.Name(i), ex.Index.Name, wantIx)
		}
		explains = append(explains, canonJSON(b))
	}
	st, b := c.Do(i, "GET", "/"+db+"/_index", "")
	if st != 200 || !strings.Contains(string(b), `"by-n"`) || !strings.Contains(string(b), `"by-gn"`) {
		return "", fmt.Errorf("_index through %s: %d %s", c.Name(i), st, b)
	}
	explains = append(explains, canonJSON(b))
	return strings.Join(explains, "\n"), nil
}

// mcFind posts a _find through node i: the docs as "id:n", the bookmark
// and the warning; an error reply is an error.
func mcFind(c *testcluster.Cluster, i int, db, body string) (docs []string, bookmark, warning string, err error) {
	st, b, err := postFind(c.Nodes[i].URL, "/"+db+"/_find", "{"+body+"}")
	if err != nil {
		return nil, "", "", fmt.Errorf("_find {%s} through %s: %v", body, c.Name(i), err)
	}
	var ans findAnswer
	if st != 200 || json.Unmarshal(b, &ans) != nil {
		return nil, "", "", fmt.Errorf("_find {%s} through %s: %d %.300s", body, c.Name(i), st, b)
	}
	for _, d := range ans.Docs {
		docs = append(docs, fmt.Sprintf("%s:%s", d.ID, d.N))
	}
	return docs, ans.Bookmark, ans.Warning, nil
}

// mcSame says how got differs from want: a doc twice, missing or extra,
// or the order.
func mcSame(got, want []string) error {
	if strings.Join(got, " ") == strings.Join(want, " ") {
		return nil
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	var twice, missing, extra []string
	inWant := map[string]bool{}
	for _, w := range want {
		inWant[w] = true
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	for g, n := range seen {
		if n > 1 {
			twice = append(twice, g)
		}
		if !inWant[g] {
			extra = append(extra, g)
		}
	}
	sort.Strings(twice)
	sort.Strings(extra)
	if len(twice)+len(missing)+len(extra) == 0 {
		for k := range got {
			if got[k] != want[k] {
				return fmt.Errorf("the same %d docs, out of order from #%d: %v, want %v", len(got), k,
					got[k:min(k+4, len(got))], want[k:min(k+4, len(want))])
			}
		}
	}
	return fmt.Errorf("%d docs, want %d: %d twice %v, %d missing %v, %d extra %v", len(got), len(want),
		len(twice), twice[:min(5, len(twice))], len(missing), missing[:min(5, len(missing))], len(extra), extra[:min(5, len(extra))])
}

// canonJSON re-encodes a JSON answer with sorted object keys.
func canonJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
