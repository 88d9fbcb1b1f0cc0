package crashtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestKillDuringViewBuild kills settee with SIGKILL while it builds a view
// index (three times, at different points of three different builds) and
// checks after each restart that
//
//   - the index as the crash left it (read with stale=ok, so nothing builds)
//     is self-consistent: total_rows, the rows streamed, the _count, _sum
//     and JavaScript reductions and the offsets all agree, and every doc's
//     rows are exactly the rows of one of its versions (never two versions'
//     rows, never a row twice) — the checkpoint, the row counts, the count
//     buckets and the rows are one badger transaction (views/DESIGN.md);
//   - the build then resumes from that checkpoint to exactly what a fresh
//     index holds (rows, total_rows and reductions computed from the docs);
//   - docs written after the restart are indexed too.
//
// The three builds: a first build of new docs; a catch-up after every doc
// was edited (its old rows must go, via the back-index) and some deleted;
// a rebuild from scratch after the design doc's views changed (a new
// signature).
func TestKillDuringViewBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a real settee process; skipped in -short mode")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	setteeBinary(t)
	begin := time.Now()

	s := newServer(t)
	s.start()
	c := newClient(s.baseURL())
	// q=4: four indexers build at once, as on a real database
	c.mustJSON(t, http.MethodPut, "/"+vdb+"?q=4", nil, 201, nil)

	m := &viewModel{revs: map[string]string{}, hist: map[string][]int{}}
	const nDocs = 20000
	t0 := time.Now()
	m.write(t, c, 0, nDocs, 0)
	t.Logf("loaded %d docs in %v", nDocs, time.Since(t0).Round(time.Millisecond))
	m.putDesign(t, c, 0)

	for cycle := 1; cycle <= 3; cycle++ {
		label := fmt.Sprintf("cycle %d", cycle)
		switch cycle {
		case 2:
			// every doc edited (its rows move: the key holds its version),
			// one in ten deleted: the build must remove old rows
			ids := make([]int, 0, m.next)
			for i := 0; i < m.next; i++ {
				ids = append(ids, i)
			}
			m.edit(t, c, ids, 1, func(i int) bool { return i%10 == 3 })
		case 3:
			// new map functions: a new signature, built from nothing
			m.putDesign(t, c, 1)
		}
		// the query that starts the build; SIGKILL cuts it off
		qdone := make(chan struct{})
		qc := newClient(s.baseURL())
		go func() {
			defer close(qdone)
			_, _, _ = qc.do(http.MethodGet, m.viewPath("rows", "limit=1"), nil)
		}()
		// early, middle and late in the build (a build of these docs takes
		// one to three seconds here; the last, of fewer docs, is quicker)
		lo := []int{300, 450, 600}[cycle-1]
		wait := time.Duration(lo+rng.IntN(200)) * time.Millisecond
		time.Sleep(wait)
		s.kill()
		<-qdone
		qc.close()
		c.close()

		s.start()
		c = newClient(s.baseURL())
		got := m.check(t, c, label+", as the crash left it", true)
		t.Logf("%s: SIGKILL %v into the build: the index as left has %d rows (old versions' included), a fresh one %d", label, wait, got, m.expectRows())
		t1 := time.Now()
		m.check(t, c, label+", resumed", false)
		t.Logf("%s: the resumed build and its checks took %v", label, time.Since(t1).Round(time.Millisecond))
		if t.Failed() {
			t.Fatalf("%s: the index is wrong after a SIGKILL during its build (seed %d); data dir %s", label, seed, s.dataDir)
		}
		// the index goes on after the restart: new docs and an edit
		m.write(t, c, m.next, 300, m.ver)
		m.edit(t, c, []int{5, 6, 7}, m.ver+10, func(int) bool { return false })
		m.check(t, c, label+", after more writes", false)
		if t.Failed() {
			t.FailNow()
		}
	}
	c.close()
	t.Logf("total %v after the build of settee", time.Since(begin).Round(time.Millisecond))
}

const vdb = "viewcrash"

// viewModel is what the database holds: each doc's versions (the current
// one last; -1 deleted) and rev. A doc's version decides everything it
// emits, so a row says which version it came from.
type viewModel struct {
	revs   map[string]string
	hist   map[string][]int
	next   int // docs made so far: ids vd00000 ... vd<next-1>
	ver    int // the version the latest bulk edit wrote
	design int // which map functions the design doc has
	ddRev  string
}

func vid(i int) string { return fmt.Sprintf("vd%05d", i) }

// a doc's fields at a version
func docN(i, ver int) int { return ver*1_000_000 + i }
func docV(i, ver int) int { return (i*7 + ver*13) % 1000 }
func docG(i, ver int) int { return (i + ver) % 5 }
func docKind(i, ver int) string {
	switch (i + ver) % 10 {
	case 0:
		return "skip" // emits nothing
	case 1:
		return "twice" // emits the same key twice (rows told apart by their emit number)
	}
	return "one"
}

// the map functions: design 1 emits the same rows as design 0 with values
// doubled, so a reduction tells which index answered
var designs = []string{
	`{"views":{
	"rows":{"map":"function(doc){ if (doc.kind === 'skip') return; emit(doc.n, doc.v); if (doc.kind === 'twice') emit(doc.n, doc.v); }","reduce":"_count"},
	"sum":{"map":"function(doc){ if (doc.kind === 'skip') return; emit(doc.n, doc.v); if (doc.kind === 'twice') emit(doc.n, doc.v); }","reduce":"_sum"},
	"js":{"map":"function(doc){ if (doc.kind !== 'skip') emit([doc.g, doc.n], doc.v); }","reduce":"function(keys, values, rereduce){ var s = 0; for (var i = 0; i < values.length; i++) s += values[i]; return s; }"}}}`,
	`{"views":{
	"rows":{"map":"function(doc){ if (doc.kind === 'skip') return; emit(doc.n, 2*doc.v); if (doc.kind === 'twice') emit(doc.n, 2*doc.v); }","reduce":"_count"},
	"sum":{"map":"function(doc){ if (doc.kind === 'skip') return; emit(doc.n, 2*doc.v); if (doc.kind === 'twice') emit(doc.n, 2*doc.v); }","reduce":"_sum"},
	"js":{"map":"function(doc){ if (doc.kind !== 'skip') emit([doc.g, doc.n], 2*doc.v); }","reduce":"function(keys, values, rereduce){ var s = 0; for (var i = 0; i < values.length; i++) s += values[i]; return s; }"}}}`,
}

func (m *viewModel) putDesign(t *testing.T, c *client, d int) {
	t.Helper()
	var dd map[string]any
	if err := json.Unmarshal([]byte(designs[d]), &dd); err != nil {
		t.Fatal(err)
	}
	if m.ddRev != "" {
		dd["_rev"] = m.ddRev
	}
	b, _ := json.Marshal(dd)
	var r struct {
		Rev string `json:"rev"`
	}
	c.mustJSON(t, http.MethodPut, "/"+vdb+"/_design/v", b, 201, &r)
	m.ddRev, m.design = r.Rev, d
}

func (m *viewModel) viewPath(view, query string) string {
	p := "/" + vdb + "/_design/v/_view/" + view
	if query != "" {
		p += "?" + query
	}
	return p
}

// bulk posts docs (each a JSON object) and records their revs.
func (m *viewModel) bulk(t *testing.T, c *client, ids []string, docs []string) {
	t.Helper()
	const per = 1000
	for lo := 0; lo < len(docs); lo += per {
		hi := min(lo+per, len(docs))
		body := `{"docs":[` + strings.Join(docs[lo:hi], ",") + `]}`
		var res []struct {
			ID, Rev, Error, Reason string
		}
		c.mustJSON(t, http.MethodPost, "/"+vdb+"/_bulk_docs", []byte(body), 201, &res)
		if len(res) != hi-lo {
			t.Fatalf("_bulk_docs: %d results for %d docs", len(res), hi-lo)
		}
		for k, r := range res {
			if r.Error != "" || r.ID != ids[lo+k] {
				t.Fatalf("_bulk_docs %s: %+v", ids[lo+k], r)
			}
			m.revs[r.ID] = r.Rev
		}
	}
}

func docBody(i, ver int, rev string, deleted bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"_id":%q`, vid(i))
	if rev != "" {
		fmt.Fprintf(&b, `,"_rev":%q`, rev)
	}
	if deleted {
		b.WriteString(`,"_deleted":true}`)
		return b.String()
	}
	// medium-sized bodies, so a build reads as much as a real one
	fmt.Fprintf(&b, `,"n":%d,"v":%d,"g":%d,"kind":%q,"pad":%q}`, docN(i, ver), docV(i, ver), docG(i, ver), docKind(i, ver),
		strings.Repeat(string(rune('a'+i%26)), 300+i%200))
	return b.String()
}

// write makes docs from..from+n-1 at version ver.
func (m *viewModel) write(t *testing.T, c *client, from, n, ver int) {
	t.Helper()
	ids := make([]string, 0, n)
	docs := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		ids = append(ids, vid(i))
		docs = append(docs, docBody(i, ver, "", false))
		m.hist[vid(i)] = append(m.hist[vid(i)], ver)
	}
	m.bulk(t, c, ids, docs)
	m.next = max(m.next, from+n)
}

// edit moves live docs to version ver (deleting those del picks).
func (m *viewModel) edit(t *testing.T, c *client, idx []int, ver int, del func(int) bool) {
	t.Helper()
	var ids, docs []string
	for _, i := range idx {
		h := m.hist[vid(i)]
		if len(h) == 0 || h[len(h)-1] < 0 {
			continue
		}
		ids = append(ids, vid(i))
		d := del(i)
		docs = append(docs, docBody(i, ver, m.revs[vid(i)], d))
		if d {
			m.hist[vid(i)] = append(h, -1)
		} else {
			m.hist[vid(i)] = append(h, ver)
		}
	}
	m.bulk(t, c, ids, docs)
	if ver < 10 {
		m.ver = ver
	}
}

// viewRow is one row of "rows": key n, value v (doubled by design 1).
type viewRow struct {
	ID    string  `json:"id"`
	Key   float64 `json:"key"`
	Value float64 `json:"value"`
}

// rowsOf is what doc i emits into "rows" at version ver (nil: nothing).
func (m *viewModel) rowsOf(i, ver int) []viewRow {
	if ver < 0 || docKind(i, ver) == "skip" {
		return nil
	}
	r := viewRow{ID: vid(i), Key: float64(docN(i, ver)), Value: float64(docV(i, ver) * (1 + m.design))}
	if docKind(i, ver) == "twice" {
		return []viewRow{r, r}
	}
	return []viewRow{r}
}

func (m *viewModel) current(i int) int {
	h := m.hist[vid(i)]
	return h[len(h)-1]
}

func (m *viewModel) expectRows() int {
	n := 0
	for i := 0; i < m.next; i++ {
		n += len(m.rowsOf(i, m.current(i)))
	}
	return n
}

// check reads the views and compares them with the model; with partial
// (stale=ok, nothing is built) a doc may be missing or at an older
// version, but the index must be consistent. It returns the rows of
// "rows".
func (m *viewModel) check(t *testing.T, c *client, label string, partial bool) int {
	t.Helper()
	stale := "stale=ok"
	if !partial {
		// one query brings the index up to date; the others then read it
		// as it is (nothing writes meanwhile)
		var r struct {
			TotalRows int `json:"total_rows"`
		}
		c.mustJSON(t, http.MethodGet, m.viewPath("rows", "reduce=false&limit=0"), nil, 200, &r)
	}
	var all struct {
		TotalRows int       `json:"total_rows"`
		Offset    int       `json:"offset"`
		Rows      []viewRow `json:"rows"`
	}
	c.mustJSON(t, http.MethodGet, m.viewPath("rows", "reduce=false&"+stale), nil, 200, &all)
	rows := all.Rows
	if all.TotalRows != len(rows) || all.Offset != 0 {
		t.Errorf("%s: total_rows %d, offset %d, %d rows streamed", label, all.TotalRows, all.Offset, len(rows))
	}
	for k := 1; k < len(rows); k++ {
		a, b := rows[k-1], rows[k]
		if a.Key > b.Key || a.Key == b.Key && a.ID > b.ID {
			t.Errorf("%s: rows out of order at %d: %+v then %+v", label, k, a, b)
			break
		}
	}
	// each doc's rows are one version's rows
	byDoc := map[string][]viewRow{}
	for _, r := range rows {
		byDoc[r.ID] = append(byDoc[r.ID], r)
	}
	indexed := map[int]int{} // doc -> the version its rows are of
	var bad []string
	for id, got := range byDoc {
		var i int
		if _, err := fmt.Sscanf(id, "vd%d", &i); err != nil || i >= m.next {
			bad = append(bad, fmt.Sprintf("%s: not a doc the test wrote", id))
			continue
		}
		versions := m.hist[id]
		if !partial {
			versions = versions[len(versions)-1:]
		}
		found := false
		for _, ver := range versions {
			if want := m.rowsOf(i, ver); len(want) > 0 && fmt.Sprint(want) == fmt.Sprint(got) {
				indexed[i], found = ver, true
				break
			}
		}
		if !found {
			bad = append(bad, fmt.Sprintf("%s: rows %+v, versions %v", id, got, m.hist[id]))
		}
	}
	if !partial {
		for i := 0; i < m.next; i++ {
			if _, ok := indexed[i]; !ok && len(m.rowsOf(i, m.current(i))) > 0 {
				bad = append(bad, fmt.Sprintf("%s: no rows, want %+v", vid(i), m.rowsOf(i, m.current(i))))
			}
		}
		if len(rows) != m.expectRows() {
			t.Errorf("%s: %d rows, a fresh index has %d", label, len(rows), m.expectRows())
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%s: %d docs with wrong rows, e.g.:\n  %s", label, len(bad), strings.Join(bad[:min(10, len(bad))], "\n  "))
	}

	// reductions over the same index state
	var sum float64
	groups := map[int]float64{}
	for i, ver := range indexed {
		r := m.rowsOf(i, ver)
		sum += r[0].Value * float64(len(r))
		groups[docG(i, ver)] += r[0].Value
	}
	var red struct {
		Rows []struct {
			Key   json.RawMessage `json:"key"`
			Value float64         `json:"value"`
		} `json:"rows"`
	}
	one := func(view, q string) float64 {
		t.Helper()
		c.mustJSON(t, http.MethodGet, m.viewPath(view, stale+q), nil, 200, &red)
		if len(red.Rows) == 0 && len(rows) == 0 {
			// a reduce over an empty index has no row, as CouchDB's: a
			// SIGKILL before the build's first commit (a loaded machine)
			// leaves one
			return 0
		}
		if len(red.Rows) != 1 {
			t.Errorf("%s: %s reduce: %d rows, want 1", label, view, len(red.Rows))
			return -1
		}
		return red.Rows[0].Value
	}
	if got := one("rows", ""); got != float64(len(rows)) {
		t.Errorf("%s: _count %v, %d rows", label, got, len(rows))
	}
	if got := one("sum", ""); got != sum {
		t.Errorf("%s: _sum %v, want %v", label, got, sum)
	}
	var jsWant float64
	for _, g := range groups {
		jsWant += g
	}
	if got := one("js", ""); got != jsWant {
		t.Errorf("%s: JavaScript reduce %v, want %v", label, got, jsWant)
	}
	red.Rows = nil
	c.mustJSON(t, http.MethodGet, m.viewPath("js", stale+"&group_level=1"), nil, 200, &red)
	gotGroups := map[int]float64{}
	for _, r := range red.Rows {
		var k []int
		if err := json.Unmarshal(r.Key, &k); err != nil || len(k) != 1 {
			t.Errorf("%s: js group key %s", label, r.Key)
			continue
		}
		gotGroups[k[0]] = r.Value
	}
	if fmt.Sprint(gotGroups) != fmt.Sprint(groups) {
		t.Errorf("%s: js group_level=1: %v, want %v", label, gotGroups, groups)
	}

	// offsets (count buckets, kept in the rows' transaction): the rows
	// before a key
	if len(rows) > 0 {
		for _, k := range []int{0, len(rows) / 7, len(rows) / 2, len(rows) - 1} {
			key := rows[k].Key
			first := sort.Search(len(rows), func(j int) bool { return rows[j].Key >= key })
			var o struct {
				Offset int `json:"offset"`
			}
			c.mustJSON(t, http.MethodGet, m.viewPath("rows", fmt.Sprintf("reduce=false&limit=1&%s&startkey=%s", stale, url.QueryEscape(fmt.Sprint(int(key))))), nil, 200, &o)
			if o.Offset != first {
				t.Errorf("%s: offset at startkey %d: %d, want %d", label, int(key), o.Offset, first)
			}
		}
	}
	return len(rows)
}
