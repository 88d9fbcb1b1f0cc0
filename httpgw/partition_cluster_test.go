//go:build !race

// Multi-node: see config_cluster_test.go for why this runs without -race.

package httpgw_test

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

// Issue 19 on a cluster: a partitioned database (q=8) on three nodes. It
// is made through one node and every node says it is partitioned and
// gives the same shard map. Docs of several partitions are written
// through each node in turn; /_shards/<id> puts every doc of a partition
// in the range crc32(partition) falls in, through every node. Then,
// through every node, each partition's info (doc_count, doc_del_count,
// after deletes too), its _all_docs (its docs, with total_rows and offset
// those of its range: the docs of the partitions and design docs that
// share it), a partitioned view (rows, total_rows, group_level, group and
// a plain reduce) and _find on a partitioned Mango index answer exactly
// the partition's docs; a global view (options.partitioned:false) of the
// same database answers every partition's. With n=3: the node-local
// couchdb/max_partition_size refuses a write (403 partition_overflow)
// when every copy's node has the limit; with the limit on two nodes the
// one copy left takes it (202), with the limit on one node the other two
// (201), and internal replication brings it to the copies that refused. Then a node stops (with n=2 the one holding the most
// of the partitions' ranges, so that their queries are answered by the
// one copy left): the same answers through the other two, at once;
// writes of new docs, edits and deletes in partitions are taken (201 or
// 202) and show through both; the node restarts and, once its copies
// caught up, answers the same, its partition infos equal to the others'.
func TestPartitionCluster(t *testing.T) {
	for _, n := range []int{3, 2} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) { partitionCluster(t, n) })
	}
}

const pcQ = 8

// pcParts are the partitions written (their ranges with q=8: see the log).
var pcParts = []string{"alice", "bob", "carol", "dave", "eve", "frank", "grace", "heidi", "ivan", "judy"}

const pcDesign = `{"views":{
	"by":{"map":"function(doc){ if (doc.n !== undefined) emit(doc.n, doc.g); }"},
	"cnt":{"map":"function(doc){ if (doc.g) emit([doc.g, doc.n], 1); }","reduce":"_count"},
	"sum":{"map":"function(doc){ if (doc.g) emit(doc.g, doc.n); }","reduce":"_sum"}}}`

const pcGlobal = `{"options":{"partitioned":false},"views":{
	"by":{"map":"function(doc){ if (doc.n !== undefined) emit(doc.n, doc.g); }"},
	"sum":{"map":"function(doc){ if (doc.g) emit(doc.g, doc.n); }","reduce":"_sum"}}}`

func partitionCluster(t *testing.T, n int) {
	start := time.Now()
	c := testcluster.New(t, 3)
	c.Join()
	all := []int{0, 1, 2}
	db := fmt.Sprintf("part-cluster-n%d", n)
	if st, b := c.Do(0, "PUT", fmt.Sprintf("/%s?partitioned=true&q=%d&n=%d", db, pcQ, n), ""); st != 201 {
		t.Fatalf("create %s: %d %s", db, st, b)
	}

	// every node: partitioned, the same map
	byRange := pcShardMap(t, c, all, db, n)
	for _, p := range pcParts {
		t.Logf("partition %s: crc32 %08x, range %s on %v", p, crc32.ChecksumIEEE([]byte(p)), pcRangeOf(p), byRange[pcRangeOf(p)])
	}

	m := &pcModel{docs: map[string]*pcDoc{}, ddocs: map[string]bool{}}
	// the design docs and the index, each through another node
	if st, b := c.Do(1, "PUT", "/"+db+"/_design/pv", pcDesign); st != 201 {
		t.Fatalf("_design/pv: %d %s", st, b)
	}
	if st, b := c.Do(2, "PUT", "/"+db+"/_design/gv", pcGlobal); st != 201 {
		t.Fatalf("_design/gv: %d %s", st, b)
	}
	if st, b := c.Do(0, "POST", "/"+db+"/_index", `{"index":{"fields":["n"]},"ddoc":"mpn","name":"by-n","partitioned":true}`); st != 200 || !strings.Contains(string(b), `"created"`) {
		t.Fatalf("_index by-n: %d %s", st, b)
	}
	m.ddocs["_design/pv"], m.ddocs["_design/gv"], m.ddocs["_design/mpn"] = true, true, true

	// docs of every partition, each batch mixing partitions, through each
	// node in turn; doc k of partition j has n = 10k+j (unique), g one of three
	var batch []*pcDoc
	next := 0
	for k := 0; k < 9; k++ {
		for j, p := range pcParts {
			if k >= 3+j%6 {
				continue // partitions of 3..8 docs
			}
			batch = append(batch, m.newDoc(p, 10*k+j))
			if len(batch) == 12 {
				m.put(t, c, next%3, db, batch)
				batch, next = nil, next+1
			}
		}
	}
	m.put(t, c, next%3, db, batch)
	t.Logf("%d docs in %d partitions", len(m.docs), len(pcParts))

	// placement: every doc of a partition in the one range of its
	// partition, through every node
	for _, i := range all {
		for _, d := range m.sorted() {
			if err := pcPlacement(c, i, db, d.id, byRange); err != nil {
				t.Fatal(err)
			}
		}
	}

	// deletes through node 1, edits through node 2
	var dels, edits []*pcDoc
	for k, d := range m.sorted() {
		switch k % 5 {
		case 1:
			dels = append(dels, &pcDoc{id: d.id, p: d.p, rev: d.rev, deleted: true})
		case 3:
			nd := *d
			nd.n += 1000
			nd.g = "c"
			edits = append(edits, &nd)
		}
	}
	m.put(t, c, 1, db, dels)
	m.put(t, c, 2, db, edits)

	settle := time.Now()
	for _, i := range all {
		c.WaitFor(20*time.Second, func() error { return pcCheck(c, i, db, m) })
	}
	t.Logf("the same answers through every node after %v", time.Since(settle).Round(time.Millisecond))

	// what a partition query of a global design doc, and a global query
	// of a partitioned view, are refused with, through every node
	for _, i := range all {
		for _, rq := range []struct{ path, want string }{
			{"/_partition/alice/_design/gv/_view/by", "`partition` parameter is not supported in this design doc"},
			{"/_design/pv/_view/by", "`partition` parameter is mandatory for queries to this view."},
		} {
			st, b, err := adminDo("GET", c.Nodes[i].URL+"/"+db+rq.path, "")
			if err != nil || st != 400 || !strings.Contains(string(b), rq.want) {
				t.Errorf("GET %s through %s: %d %s %v; want 400 %q", rq.path, c.Name(i), st, b, err, rq.want)
			}
		}
	}

	if n == 3 {
		pcMaxPartition(t, c, db, m)
	}

	// a node down: with n=2 the one (not the first) holding a copy of
	// the most partitions' ranges
	down := 2
	if n == 2 {
		held := [3]int{}
		for _, p := range pcParts {
			for _, node := range byRange[pcRangeOf(p)] {
				for i := range held {
					if node == c.Name(i) {
						held[i]++
					}
				}
			}
		}
		if held[1] > held[2] {
			down = 1
		}
		var one []string
		for _, p := range pcParts {
			if strings.Contains(strings.Join(byRange[pcRangeOf(p)], " "), c.Name(down)) {
				one = append(one, p)
			}
		}
		t.Logf("with %s down, partitions %v have one copy left", c.Name(down), one)
	}
	var live []int
	for _, i := range all {
		if i != down {
			live = append(live, i)
		}
	}
	c.Stop(down)
	for _, i := range live {
		began := time.Now()
		if err := pcCheck(c, i, db, m); err != nil {
			t.Fatalf("with %s down: %v", c.Name(down), err)
		}
		t.Logf("through %s with %s down: answered in %v", c.Name(i), c.Name(down), time.Since(began).Round(time.Millisecond))
	}

	// writes with the node down: new docs in every partition, a delete
	// and an edit in some, through each live node
	for w, i := range live {
		batch = nil
		for j, p := range pcParts {
			if j%2 != w {
				continue
			}
			batch = append(batch, m.newDoc(p, 5000+10*w+j))
			for _, d := range m.sorted() {
				if d.p == p && !d.deleted {
					if j%3 == 0 {
						batch = append(batch, &pcDoc{id: d.id, p: p, rev: d.rev, deleted: true})
					} else {
						nd := *d
						nd.n += 2000
						nd.g = "b"
						batch = append(batch, &nd)
					}
					break
				}
			}
		}
		m.put(t, c, i, db, batch)
	}
	written := time.Now()
	for _, i := range live {
		c.WaitFor(20*time.Second, func() error { return pcCheck(c, i, db, m) })
	}
	t.Logf("the writes made with %s down show through both live nodes after %v", c.Name(down), time.Since(written).Round(time.Millisecond))

	c.Restart(down)
	back := time.Now()
	c.WaitFor(30*time.Second, func() error {
		if err := pcCheck(c, down, db, m); err != nil {
			return fmt.Errorf("through %s after its restart: %v", c.Name(down), err)
		}
		// its partition infos are the others'
		mine, err := pcInfos(c, down, db)
		if err != nil {
			return err
		}
		for _, i := range live {
			theirs, err := pcInfos(c, i, db)
			if err != nil {
				return err
			}
			if theirs != mine {
				return fmt.Errorf("partition infos through %s:\n%s\nthrough %s:\n%s", c.Name(down), mine, c.Name(i), theirs)
			}
		}
		return nil
	})
	t.Logf("through %s after its restart: the same answers after %v (the whole test %v)",
		c.Name(down), time.Since(back).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// pcRangeOf is the name of the q=8 range that key hashes into.
func pcRangeOf(key string) string {
	const size = (uint64(1) << 32) / pcQ
	i := min(uint64(crc32.ChecksumIEEE([]byte(key)))/size, pcQ-1)
	b, e := i*size, i*size+size-1
	if i == pcQ-1 {
		e = 0xffffffff
	}
	return fmt.Sprintf("%08x-%08x", b, e)
}

// pcPlaceKey is what places id: its partition, or a design doc's id.
func pcPlaceKey(id string) string {
	if strings.HasPrefix(id, "_design/") {
		return id
	}
	p, _, _ := strings.Cut(id, ":")
	return p
}

// pcShardMap checks through every node that db is partitioned and that
// its _dbs doc and /_shards are the same; it returns the nodes of each
// range.
func pcShardMap(t *testing.T, c *testcluster.Cluster, nodes []int, db string, n int) map[string][]string {
	t.Helper()
	var dbsDoc, shards string
	var byRange map[string][]string
	for _, i := range nodes {
		c.WaitFor(10*time.Second, func() error {
			st, b := c.Do(i, "GET", "/"+db, "")
			var info struct {
				Props struct {
					Partitioned bool `json:"partitioned"`
				} `json:"props"`
			}
			if st != 200 || json.Unmarshal(b, &info) != nil || !info.Props.Partitioned {
				return fmt.Errorf("GET /%s through %s: %d %s, want props.partitioned true", db, c.Name(i), st, b)
			}
			return nil
		})
		st, b := c.Do(i, "GET", "/_node/_local/_dbs/"+db, "")
		var doc struct {
			Props struct {
				Partitioned bool `json:"partitioned"`
			} `json:"props"`
			ByRange map[string][]string `json:"by_range"`
		}
		if st != 200 || json.Unmarshal(b, &doc) != nil || !doc.Props.Partitioned || len(doc.ByRange) != pcQ {
			t.Fatalf("_dbs/%s through %s: %d %s", db, c.Name(i), st, b)
		}
		for r, ns := range doc.ByRange {
			if len(ns) != n {
				t.Fatalf("_dbs/%s through %s: range %s on %v, want %d copies", db, c.Name(i), r, ns, n)
			}
			sort.Strings(ns)
		}
		if dbsDoc == "" {
			dbsDoc, byRange = canonJSON(b), doc.ByRange
		} else if canonJSON(b) != dbsDoc {
			t.Errorf("_dbs/%s through %s:\n%s\nthrough %s:\n%s", db, c.Name(i), canonJSON(b), c.Name(nodes[0]), dbsDoc)
		}
		st, b = c.Do(i, "GET", "/"+db+"/_shards", "")
		var sh struct {
			Shards map[string][]string `json:"shards"`
		}
		if st != 200 || json.Unmarshal(b, &sh) != nil {
			t.Fatalf("_shards through %s: %d %s", c.Name(i), st, b)
		}
		for r, ns := range sh.Shards {
			sort.Strings(ns)
			if strings.Join(ns, " ") != strings.Join(byRange[r], " ") {
				t.Errorf("_shards through %s: %s on %v; _dbs says %v", c.Name(i), r, ns, byRange[r])
			}
		}
		if len(sh.Shards) != pcQ {
			t.Errorf("_shards through %s: %s", c.Name(i), b)
		}
		if shards == "" {
			shards = canonJSON(b)
		} else if canonJSON(b) != shards {
			t.Errorf("_shards through %s:\n%s\nthrough %s:\n%s", c.Name(i), canonJSON(b), c.Name(nodes[0]), shards)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return byRange
}

// pcPlacement checks /_shards/<id> through node i: the range of id's
// partition and its nodes.
func pcPlacement(c *testcluster.Cluster, i int, db, id string, byRange map[string][]string) error {
	st, b, err := adminDo("GET", c.Nodes[i].URL+"/"+db+"/_shards/"+url.PathEscape(id), "")
	var ans struct {
		Range string   `json:"range"`
		Nodes []string `json:"nodes"`
	}
	if err != nil || st != 200 || json.Unmarshal(b, &ans) != nil {
		return fmt.Errorf("_shards/%s through %s: %d %s %v", id, c.Name(i), st, b, err)
	}
	sort.Strings(ans.Nodes)
	want := pcRangeOf(pcPlaceKey(id))
	if ans.Range != want || strings.Join(ans.Nodes, " ") != strings.Join(byRange[want], " ") {
		return fmt.Errorf("_shards/%s through %s: %s on %v, want %s (crc32 of %q) on %v", id, c.Name(i), ans.Range, ans.Nodes, want, pcPlaceKey(id), byRange[want])
	}
	return nil
}

// pcDoc is one doc of the model.
type pcDoc struct {
	id, p, g string
	n        int
	rev      string
	deleted  bool
	plain    bool // no n nor g: in no view
}

// pcModel is what the database should hold: its docs by id and its
// design docs.
type pcModel struct {
	docs  map[string]*pcDoc
	ddocs map[string]bool
	seq   int
}

func (m *pcModel) newDoc(p string, n int) *pcDoc {
	m.seq++
	return &pcDoc{id: fmt.Sprintf("%s:d%04d", p, m.seq), p: p, n: n, g: string(rune('a' + n%3))}
}

// sorted is every doc by id (as _all_docs orders them: by bytes).
func (m *pcModel) sorted() []*pcDoc {
	out := make([]*pcDoc, 0, len(m.docs))
	for _, d := range m.docs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// put writes docs through node with _bulk_docs; 201, or 202 when fewer
// copies than the quorum took them.
func (m *pcModel) put(t *testing.T, c *testcluster.Cluster, node int, db string, docs []*pcDoc) {
	t.Helper()
	if len(docs) == 0 {
		return
	}
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
		body = append(body, fmt.Sprintf(`{"_id":%q%s,"n":%d,"g":%q}`, d.id, rev, d.n, d.g))
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
		m.docs[r.ID] = docs[i]
	}
}

// inRange is the number of live docs, design docs included, placed in
// range r, and (before) those of them whose id sorts before id.
func (m *pcModel) inRange(r, id string) (count, before int) {
	for ddoc := range m.ddocs {
		if pcRangeOf(ddoc) == r {
			count++
			if ddoc < id {
				before++
			}
		}
	}
	for _, d := range m.docs {
		if !d.deleted && pcRangeOf(d.p) == r {
			count++
			if d.id < id {
				before++
			}
		}
	}
	return count, before
}

// viewRows is "id:n:g" of docs by n, as view "by" gives them.
func viewRows(docs []*pcDoc) string {
	ds := emitting(docs)
	sort.Slice(ds, func(i, j int) bool { return ds[i].n < ds[j].n })
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s:%d:%s", d.id, d.n, d.g))
	}
	return strings.Join(out, " ")
}

// emitting is the docs with n and g, which the views emit.
func emitting(docs []*pcDoc) []*pcDoc {
	var out []*pcDoc
	for _, d := range docs {
		if !d.plain {
			out = append(out, d)
		}
	}
	return out
}

// sumsByG is "g=sum" of docs by g (group=true of view sum), and counts
// "g=count" (group_level=1 of view cnt).
func sumsByG(docs []*pcDoc) (sums, counts string) {
	sum, cnt := map[string]int{}, map[string]int{}
	for _, d := range emitting(docs) {
		sum[d.g] += d.n
		cnt[d.g]++
	}
	var gs []string
	for g := range sum {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	var s, k []string
	for _, g := range gs {
		s = append(s, fmt.Sprintf("%s=%d", g, sum[g]))
		k = append(k, fmt.Sprintf("%s=%d", g, cnt[g]))
	}
	return strings.Join(s, " "), strings.Join(k, " ")
}

type pcViewAnswer struct {
	TotalRows *int `json:"total_rows"`
	Offset    *int `json:"offset"`
	Rows      []struct {
		ID    string          `json:"id"`
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"rows"`
}

// pcGet reads path of db through node i into out.
func pcGet(c *testcluster.Cluster, i int, method, path, body string, out any) error {
	st, b, err := adminDo(method, c.Nodes[i].URL+path, body)
	if err != nil {
		return fmt.Errorf("%s %s through %s: %v", method, path, c.Name(i), err)
	}
	if st != 200 {
		return fmt.Errorf("%s %s through %s: %d %.300s", method, path, c.Name(i), st, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s through %s: %v: %.300s", method, path, c.Name(i), err, b)
	}
	return nil
}

// rowsOf is view rows as "id:key:value" (strings unquoted), or
// "key=value" for reduced rows.
func (a *pcViewAnswer) rowsOf() string {
	var out []string
	for _, r := range a.Rows {
		k := strings.Trim(string(r.Key), `"`)
		v := strings.Trim(string(r.Value), `"`)
		if r.ID == "" {
			out = append(out, k+"="+v)
		} else {
			out = append(out, r.ID+":"+k+":"+v)
		}
	}
	return strings.Join(out, " ")
}

// pcCheck asks node i everything the model answers: the db's info, each
// partition's info, _all_docs, partitioned view and _find, and the
// global view.
func pcCheck(c *testcluster.Cluster, i int, db string, m *pcModel) error {
	var liveAll []*pcDoc
	dels := 0
	for _, d := range m.sorted() {
		if d.deleted {
			dels++
		} else {
			liveAll = append(liveAll, d)
		}
	}
	var info struct {
		DocCount    int `json:"doc_count"`
		DocDelCount int `json:"doc_del_count"`
		Props       struct {
			Partitioned bool `json:"partitioned"`
		} `json:"props"`
	}
	if err := pcGet(c, i, "GET", "/"+db, "", &info); err != nil {
		return err
	}
	if !info.Props.Partitioned || info.DocCount != len(liveAll)+len(m.ddocs) || info.DocDelCount != dels {
		return fmt.Errorf("db info through %s: %+v, want doc_count %d, doc_del_count %d, partitioned", c.Name(i), info, len(liveAll)+len(m.ddocs), dels)
	}

	parts := map[string]bool{}
	for _, d := range m.docs {
		parts[d.p] = true
	}
	parts["nobody"] = true // a partition without docs answers too
	for p := range parts {
		var live []*pcDoc
		pdels := 0
		for _, d := range m.sorted() {
			switch {
			case d.p != p:
			case d.deleted:
				pdels++
			default:
				live = append(live, d)
			}
		}
		base := "/" + db + "/_partition/" + p

		var pi struct {
			Partition   string `json:"partition"`
			DocCount    int    `json:"doc_count"`
			DocDelCount int    `json:"doc_del_count"`
			Sizes       struct {
				External int `json:"external"`
			} `json:"sizes"`
		}
		if err := pcGet(c, i, "GET", base, "", &pi); err != nil {
			return err
		}
		if pi.Partition != p || pi.DocCount != len(live) || pi.DocDelCount != pdels || (pi.Sizes.External > 0) != (len(live)+pdels > 0) {
			return fmt.Errorf("%s through %s: %+v, want doc_count %d, doc_del_count %d", base, c.Name(i), pi, len(live), pdels)
		}

		// _all_docs: the partition's docs; total_rows and offset its range's
		var ad pcViewAnswer
		if err := pcGet(c, i, "GET", base+"/_all_docs", "", &ad); err != nil {
			return err
		}
		var got, want []string
		for _, r := range ad.Rows {
			var v struct {
				Rev string `json:"rev"`
			}
			_ = json.Unmarshal(r.Value, &v)
			got = append(got, r.ID+"@"+v.Rev)
		}
		for _, d := range live {
			want = append(want, d.id+"@"+d.rev)
		}
		total, offset := m.inRange(pcRangeOf(p), p+":")
		if err := mcSame(got, want); err != nil {
			return fmt.Errorf("%s/_all_docs through %s: %v", base, c.Name(i), err)
		}
		if ad.TotalRows == nil || *ad.TotalRows != total || ad.Offset == nil || *ad.Offset != offset {
			return fmt.Errorf("%s/_all_docs through %s: total_rows %v offset %v, want %d and %d (range %s)", base, c.Name(i), ptrStr(ad.TotalRows), ptrStr(ad.Offset), total, offset, pcRangeOf(p))
		}

		// the partitioned view: rows, and total_rows its range's rows
		var v pcViewAnswer
		if err := pcGet(c, i, "GET", base+"/_design/pv/_view/by", "", &v); err != nil {
			return err
		}
		rangeRows := 0
		for _, d := range emitting(liveAll) {
			if pcRangeOf(d.p) == pcRangeOf(p) {
				rangeRows++
			}
		}
		if got, want := v.rowsOf(), viewRows(live); got != want {
			return fmt.Errorf("%s/_design/pv/_view/by through %s:\n got %s\nwant %s", base, c.Name(i), got, want)
		}
		if v.TotalRows == nil || *v.TotalRows != rangeRows {
			return fmt.Errorf("%s/_design/pv/_view/by through %s: total_rows %v, want %d (range %s)", base, c.Name(i), ptrStr(v.TotalRows), rangeRows, pcRangeOf(p))
		}
		sums, counts := sumsByG(live)
		for _, q := range []struct{ path, want string }{
			{"/_design/pv/_view/sum?group=true", sums},
			{"/_design/pv/_view/cnt?group_level=1", strings.NewReplacer("a=", "[a]=", "b=", "[b]=", "c=", "[c]=").Replace(counts)},
			{"/_design/pv/_view/sum", pcTotal(live)},
			{"/_design/pv/_view/cnt", pcCount(live)},
		} {
			var r pcViewAnswer
			if err := pcGet(c, i, "GET", base+q.path, "", &r); err != nil {
				return err
			}
			if got := strings.ReplaceAll(r.rowsOf(), `"`, ""); got != q.want {
				return fmt.Errorf("%s%s through %s: %s, want %s", base, q.path, c.Name(i), got, q.want)
			}
		}

		// _find on the partitioned index, sorted by n
		var fa findAnswer
		if err := pcGet(c, i, "POST", base+"/_find", `{"selector":{"n":{"$gte":0}},"sort":[{"n":"asc"}],"fields":["_id","n"],"limit":1000}`, &fa); err != nil {
			return err
		}
		got = nil
		for _, d := range fa.Docs {
			got = append(got, fmt.Sprintf("%s:%s", d.ID, d.N))
		}
		want = nil
		byN := emitting(live)
		sort.Slice(byN, func(a, b int) bool { return byN[a].n < byN[b].n })
		for _, d := range byN {
			want = append(want, fmt.Sprintf("%s:%d", d.id, d.n))
		}
		if err := mcSame(got, want); err != nil {
			return fmt.Errorf("%s/_find through %s: %v", base, c.Name(i), err)
		}
		if fa.Warning != "" {
			return fmt.Errorf("%s/_find through %s: warning %q", base, c.Name(i), fa.Warning)
		}
		var ex struct {
			Index struct {
				Name        string `json:"name"`
				Partitioned *bool  `json:"partitioned"`
			} `json:"index"`
			Opts struct {
				Partition string `json:"partition"`
			} `json:"opts"`
		}
		if err := pcGet(c, i, "POST", base+"/_explain", `{"selector":{"n":{"$gte":0}},"sort":[{"n":"asc"}]}`, &ex); err != nil {
			return err
		}
		if ex.Index.Name != "by-n" || ex.Index.Partitioned == nil || !*ex.Index.Partitioned || ex.Opts.Partition != p {
			return fmt.Errorf("%s/_explain through %s: %+v, want index by-n, partitioned, partition %s", base, c.Name(i), ex, p)
		}
	}

	// the global view: every partition's docs
	var g pcViewAnswer
	if err := pcGet(c, i, "GET", "/"+db+"/_design/gv/_view/by", "", &g); err != nil {
		return err
	}
	if got, want := g.rowsOf(), viewRows(liveAll); got != want {
		return fmt.Errorf("_design/gv/_view/by through %s:\n got %s\nwant %s", c.Name(i), got, want)
	}
	if g.TotalRows == nil || *g.TotalRows != len(emitting(liveAll)) {
		return fmt.Errorf("_design/gv/_view/by through %s: total_rows %v, want %d", c.Name(i), ptrStr(g.TotalRows), len(emitting(liveAll)))
	}
	sums, _ := sumsByG(liveAll)
	var gs pcViewAnswer
	if err := pcGet(c, i, "GET", "/"+db+"/_design/gv/_view/sum?group=true", "", &gs); err != nil {
		return err
	}
	if got := strings.ReplaceAll(gs.rowsOf(), `"`, ""); got != sums {
		return fmt.Errorf("_design/gv/_view/sum?group=true through %s: %s, want %s", c.Name(i), got, sums)
	}
	return nil
}

// pcTotal is the reduced row of view sum over docs ("" for none).
func pcTotal(docs []*pcDoc) string {
	docs = emitting(docs)
	if len(docs) == 0 {
		return ""
	}
	s := 0
	for _, d := range docs {
		s += d.n
	}
	return fmt.Sprintf("null=%d", s)
}

// pcCount is the reduced row of view cnt over docs ("" for none).
func pcCount(docs []*pcDoc) string {
	docs = emitting(docs)
	if len(docs) == 0 {
		return ""
	}
	return fmt.Sprintf("null=%d", len(docs))
}

func ptrStr(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// pcInfos is every partition's info through node i but the active size
// (each copy's own layout): partition, doc_count, doc_del_count and
// external size, one line each.
func pcInfos(c *testcluster.Cluster, i int, db string) (string, error) {
	var out []string
	for _, p := range append(append([]string(nil), pcParts...), "big") {
		var pi struct {
			DocCount    int `json:"doc_count"`
			DocDelCount int `json:"doc_del_count"`
			Sizes       struct {
				External int `json:"external"`
			} `json:"sizes"`
		}
		if err := pcGet(c, i, "GET", "/"+db+"/_partition/"+p, "", &pi); err != nil {
			return "", err
		}
		out = append(out, fmt.Sprintf("%s doc_count %d doc_del_count %d external %d", p, pi.DocCount, pi.DocDelCount, pi.Sizes.External))
	}
	return strings.Join(out, "\n"), nil
}

// pcMaxPartition checks couchdb/max_partition_size, a node's own setting
// that holds back the writes to the copies on that node: with the limit
// on every node a write to a full partition is 403 through every node
// (other partitions written as ever); with it on two nodes the third
// copy takes the write, fewer than the quorum (202); with it on one node
// the other two copies take it (201); internal replication brings those
// writes to the copies that refused them.
func pcMaxPartition(t *testing.T, c *testcluster.Cluster, db string, m *pcModel) {
	t.Helper()
	setLimit := func(i int, v string) {
		t.Helper()
		method, body := "PUT", `"`+v+`"`
		if v == "" {
			method, body = "DELETE", ""
		}
		if st, b := c.Do(i, method, "/_node/_local/_config/couchdb/max_partition_size", body); st != 200 {
			t.Fatalf("%s max_partition_size through %s: %d %s", method, c.Name(i), st, b)
		}
	}
	for i := range c.Nodes {
		setLimit(i, "1000")
	}
	// three docs of 408 bytes each (as in partition_test.go): the third
	// crosses the limit and is let through
	fill := strings.Repeat("0", 400)
	for k := 0; k < 3; k++ {
		id := fmt.Sprintf("big:f%d", k)
		st, b := c.Do(k, "PUT", "/"+db+"/"+id, `{"v":"`+fill+`"}`)
		var r bulkResult
		if st != 201 || json.Unmarshal(b, &r) != nil {
			t.Fatalf("PUT %s through %s: %d %s", id, c.Name(k), st, b)
		}
		m.docs[id] = &pcDoc{id: id, p: "big", rev: r.Rev, plain: true}
	}
	// every copy past the limit (with n=3 each node reads its own)
	for i := range c.Nodes {
		c.WaitFor(20*time.Second, func() error {
			var pi struct {
				DocCount int `json:"doc_count"`
				Sizes    struct {
					External int `json:"external"`
				} `json:"sizes"`
			}
			if err := pcGet(c, i, "GET", "/"+db+"/_partition/big", "", &pi); err != nil {
				return err
			}
			if pi.DocCount != 3 || pi.Sizes.External < 1000 {
				return fmt.Errorf("_partition/big through %s: %+v, want 3 docs, external 1000 or more", c.Name(i), pi)
			}
			return nil
		})
	}
	for i := range c.Nodes {
		id := fmt.Sprintf("big:over%d", i)
		st, b := c.Do(i, "PUT", "/"+db+"/"+id, `{}`)
		want := `{"error":"partition_overflow","reason":"Partition limit exceeded due to update on '` + id + `'"}`
		if st != 403 || strings.TrimSpace(string(b)) != want {
			t.Errorf("PUT %s through %s with every node's limit at 1000: %d %s, want 403 %s", id, c.Name(i), st, b, want)
		}
		// _bulk_docs: per doc; another partition is written
		other := m.newDoc(pcParts[i], 7000+i)
		st, b = c.Do(i, "POST", "/"+db+"/_bulk_docs", fmt.Sprintf(`{"docs":[{"_id":%q},{"_id":%q,"n":%d,"g":%q}]}`, id, other.id, other.n, other.g))
		var res []bulkResult
		if st != 201 || json.Unmarshal(b, &res) != nil || len(res) != 2 || res[0].Error != "partition_overflow" || res[1].Error != "" || res[1].ID != other.id {
			t.Fatalf("_bulk_docs of %s and %s through %s: %d %s, want partition_overflow for the first", id, other.id, c.Name(i), st, b)
		}
		other.rev = res[1].Rev
		m.docs[other.id] = other
	}
	if t.Failed() {
		t.FailNow()
	}
	// the limit on the first two nodes: one copy takes the write, fewer
	// than the quorum (202), and internal replication brings it to the
	// others (a replicated write is not held back)
	setLimit(2, "")
	put := func(i int, id string, want int) {
		t.Helper()
		st, b := c.Do(i, "PUT", "/"+db+"/"+id, `{"v":1}`)
		var r bulkResult
		if st != want || json.Unmarshal(b, &r) != nil || !r.OK {
			t.Fatalf("PUT %s through %s: %d %s, want %d", id, c.Name(i), st, b, want)
		}
		m.docs[id] = &pcDoc{id: id, p: "big", rev: r.Rev, plain: true}
	}
	put(2, "big:a2", 202)
	put(0, "big:a0", 202)
	// the limit on the first node only: the other two copies take the
	// write (a quorum: 201), and it reaches the first's the same way
	setLimit(1, "")
	put(0, "big:g0", 201)
	put(1, "big:g1", 201)
	setLimit(0, "")
	began := time.Now()
	for i := range c.Nodes {
		c.WaitFor(30*time.Second, func() error { return pcCheck(c, i, db, m) })
	}
	t.Logf("max_partition_size: the writes to big that copies refused show through every node after %v", time.Since(began).Round(time.Millisecond))
}
