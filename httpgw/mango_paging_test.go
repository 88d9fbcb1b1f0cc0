package httpgw_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// findAnswer is a _find answer as the tests read it.
type findAnswer struct {
	Docs []struct {
		ID string          `json:"_id"`
		N  json.RawMessage `json:"n"`
		K  *int            `json:"k"`
		T  string          `json:"t"`
	} `json:"docs"`
	Bookmark string `json:"bookmark"`
	Warning  string `json:"warning"`
}

// postFind posts a _find (or _explain) body to base (a node's URL) as
// the admin.
func postFind(base, path, body string) (int, []byte, error) {
	return adminDo("POST", base+path, body)
}

// adminDo sends a request as settee's test admin; it may run outside the
// test's goroutine (it never calls t).
func adminDo(method, u, body string) (int, []byte, error) {
	return doAs(testserver.AdminUser, testserver.AdminPassword, method, u, body)
}

// doAs sends a request as user.
func doAs(user, pw, method, u, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(user, pw)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestMangoPagingWhileWriting pages a sorted _find with limit and bookmark
// while another goroutine inserts and deletes docs inside and outside the
// query's range, on a json index (ascending and descending) and on the
// _all_docs fallback (no index: _id order).
//
// CouchDB's bookmark is the position of the last row returned (for a json
// index its [key, docid] in the index, for _all_docs its docid); the next
// page is read again from the index, as it is then, strictly past that
// position. So, as with CouchDB:
//
//   - every doc that matched throughout (never touched by the writer) is
//     returned exactly once;
//   - no doc is returned twice (the writer never moves a doc's key);
//   - the docs come in sort order within each page and across pages:
//     each is strictly past the one before it;
//   - a doc inserted behind the bookmark is never seen (the writer puts
//     some there on purpose, just behind the last doc the reader got);
//   - a doc inserted ahead of the bookmark is seen when its insert was
//     acknowledged before the page was asked for and it sorts before the
//     page's last doc (the index is brought up to date first: update=true),
//     and a doc whose delete was acknowledged before a page was asked for
//     is not in it. Anything else written while a page is read may or may
//     not show.
//
// The same runs against CouchDB (TestMangoPagingWhileWritingAsCouchDB),
// with one difference: CouchDB resumes at
// the bookmark's row and skips one row, so when that doc was deleted
// before the next page it skips the doc after it instead (seen on
// CouchDB 3.5.2 both on a json index and on _all_docs); settee resumes
// strictly past the bookmark's position and misses nothing. The test
// lets CouchDB off that one doc per such page, never settee.
func TestMangoPagingWhileWriting(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	runPaging(t, pgServer{s.URL, testserver.AdminUser, testserver.AdminPassword, true})
}

// TestMangoPagingWhileWritingAsCouchDB runs the same against CouchDB
// 3.5.2 when one is present: the assertions are CouchDB's semantics.
func TestMangoPagingWhileWritingAsCouchDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	cs := testcouch.Start(t, "")
	runPaging(t, pgServer{cs.URL, cs.User, cs.Password, false})
}

func runPaging(t *testing.T, s pgServer) {
	for _, tc := range []pgCase{
		{name: "index/asc", index: true},
		{name: "index/desc", index: true, desc: true},
		{name: "index/asc/docs", index: true, docs: true},
		{name: "all_docs", index: false},
		{name: "all_docs/desc", index: false, desc: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := "paging-" + strings.ReplaceAll(tc.name, "/", "-")
			if st, b, err := s.do("PUT", "/"+db, ""); err != nil || st != 201 {
				t.Fatalf("PUT /%s: %d %v %s", db, st, err, b)
			}
			pagingWhileWriting(t, s, db, tc)
		})
	}
}

// pgCase is one way of paging: on the json index on k (else _all_docs,
// in _id order), descending, and with a field the index does not hold
// (so the docs are read, not only the index).
type pgCase struct {
	name              string
	index, desc, docs bool
}

// pgServer is the server paged: settee or CouchDB.
type pgServer struct {
	url, user, pw string
	settee        bool
}

func (s pgServer) do(method, path, body string) (int, []byte, error) {
	return doAs(s.user, s.pw, method, s.url+path, body)
}

// pgDoc is one doc the test wrote: its sort key k and when its insert and
// delete were sent and acknowledged.
type pgDoc struct {
	id                   string
	k                    int
	stable               bool // never touched by the writer
	behind               bool // inserted behind the reader's bookmark
	rev                  string
	inserted             time.Time // insert acknowledged (zero until then)
	delSent, delAcked    time.Time
	deleted, deleteTried bool
}

const (
	pgKeys       = 400 // k in [0, pgKeys)
	pgLo, pgHi   = 100, 250
	pgLimit      = 10
	pgMaxWrites  = 100
	pgInitialDoc = 3 // initial docs per key step (equal keys: ties broken by id)
)

func pagingWhileWriting(t *testing.T, s pgServer, db string, tc pgCase) {
	index, desc := tc.index, tc.desc
	rng := rand.New(rand.NewSource(1))
	var mu sync.Mutex
	docs := map[string]*pgDoc{}
	// ids: with an index, unrelated to k (the index's order is not the
	// ids'); on _all_docs the order is the ids', so they start with k
	seq := 0
	newID := func(k int, tag string) string {
		seq++
		if index {
			return fmt.Sprintf("%s%04d", tag, (seq*7919)%10000)
		}
		return fmt.Sprintf("k%04d%s%04d", k, tag, seq)
	}
	// less orders docs as the query returns them (strictly)
	less := func(a, b *pgDoc) bool {
		if desc {
			a, b = b, a
		}
		if index && a.k != b.k {
			return a.k < b.k
		}
		return a.id < b.id
	}

	var initial []map[string]any
	for k := 0; k < pgKeys; k += 2 {
		for j := 0; j < pgInitialDoc; j++ {
			d := &pgDoc{id: newID(k, "i"), k: k, stable: (k/2+j)%4 != 0}
			docs[d.id] = d
			initial = append(initial, map[string]any{"_id": d.id, "k": k, "t": "initial"})
		}
	}
	bb, _ := json.Marshal(map[string]any{"docs": initial})
	st, b, err := s.do("POST", "/"+db+"/_bulk_docs", string(bb))
	var res []bulkResult
	if err != nil || st != 201 || json.Unmarshal(b, &res) != nil || len(res) != len(initial) {
		t.Fatalf("_bulk_docs: %d %v %.300s", st, err, b)
	}
	for i, r := range res {
		if r.Error != "" {
			t.Fatalf("initial doc %d: %s %s", i, r.Error, r.Reason)
		}
		docs[r.ID].rev, docs[r.ID].inserted = r.Rev, time.Now()
	}
	sel := fmt.Sprintf(`{"k":{"$gte":%d,"$lt":%d}}`, pgLo, pgHi)
	dir := "asc"
	if desc {
		dir = "desc"
	}
	sortSpec := ""
	if index {
		if st, b, err := s.do("POST", "/"+db+"/_index", `{"index":{"fields":["k"]},"name":"by-k","ddoc":"pg"}`); err != nil || st != 200 {
			t.Fatalf("_index: %d %v %s", st, err, b)
		}
		sortSpec = fmt.Sprintf(`,"sort":[{"k":%q}]`, dir)
	} else if desc {
		// _all_docs serves a sort on _id only with _id in the selector
		// (CouchDB and settee: no_usable_index without it)
		sel = fmt.Sprintf(`{"_id":{"$gt":null},"k":{"$gte":%d,"$lt":%d}}`, pgLo, pgHi)
		sortSpec = `,"sort":[{"_id":"desc"}]`
	}
	fields := `"_id","k"`
	if tc.docs {
		fields = `"_id","k","t"`
	}

	// the reader's last doc, for the writer to insert behind
	var lastK atomic.Int64
	lastK.Store(-1)
	var lastID atomic.Value
	lastID.Store("")
	var writes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < pgMaxWrites; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := pgWrite(s, db, rng, &mu, docs, newID, index, desc, &lastK, &lastID); err != nil {
				writeErr.Store(err)
				return
			}
			writes.Add(1)
		}
	}()

	type page struct {
		asked, answered time.Time
		after           *pgDoc // the doc the bookmark stands for, nil on the first page
		got             []*pgDoc
	}
	var pages []page
	var seen []*pgDoc
	bm := ""
	examinedLogged := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("paging did not end: %d pages", len(pages))
		}
		// let the writer get some writes in between pages
		for w0 := writes.Load(); writes.Load() < w0+2 && writes.Load() < pgMaxWrites && writeErr.Load() == nil; {
			time.Sleep(time.Millisecond)
		}
		body := fmt.Sprintf(`{"selector":%s%s,"fields":[%s],"limit":%d`, sel, sortSpec, fields, pgLimit)
		if bm != "" {
			body += fmt.Sprintf(`,"bookmark":%q`, bm)
		}
		body += "}"
		p := page{asked: time.Now()}
		if len(seen) > 0 {
			p.after = seen[len(seen)-1]
		}
		st, b, err := s.do("POST", "/"+db+"/_find", body)
		p.answered = time.Now()
		if err != nil || st != 200 {
			t.Fatalf("_find %s: %d %v %s", body, st, err, b)
		}
		var ans findAnswer
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatalf("_find %s: %v: %s", body, err, b)
		}
		if index && tc.docs && s.settee && ans.Warning == mangoExaminedWarning {
			// settee's bug, see TestMangoPagingExamined: reported once
			if !examinedLogged {
				t.Logf("settee bug (TestMangoPagingExamined): %s answered %q", body, ans.Warning)
				examinedLogged = true
			}
		} else if index && ans.Warning != "" {
			t.Errorf("_find %s on the index: warning %q", body, ans.Warning)
		}
		if !index && !strings.Contains(ans.Warning, "No matching index found") {
			t.Errorf("_find %s: warning %q, want _all_docs's", body, ans.Warning)
		}
		mu.Lock()
		for _, d := range ans.Docs {
			doc := docs[d.ID]
			switch {
			case doc == nil:
				t.Fatalf("page %d: a doc the test never wrote: %s", len(pages), d.ID)
			case d.K == nil || *d.K != doc.k:
				t.Errorf("page %d: %s with k %v, want %d", len(pages), d.ID, d.K, doc.k)
			case tc.docs && d.T != pgTag(d.ID) || !tc.docs && d.T != "":
				t.Errorf("page %d: %s with t %q (fields %s)", len(pages), d.ID, d.T, fields)
			case doc.k < pgLo || doc.k >= pgHi:
				t.Errorf("page %d: %s (k %d) is outside the query's range", len(pages), d.ID, doc.k)
			}
			p.got = append(p.got, doc)
		}
		if len(p.got) > 0 {
			last := p.got[len(p.got)-1]
			lastID.Store(last.id)
			lastK.Store(int64(last.k))
		}
		mu.Unlock()
		if len(ans.Docs) > pgLimit {
			t.Fatalf("page %d: %d docs, limit %d", len(pages), len(ans.Docs), pgLimit)
		}
		pages = append(pages, p)
		seen = append(seen, p.got...)
		if len(ans.Docs) == 0 {
			if ans.Bookmark != bm && bm != "" {
				t.Errorf("an empty page's bookmark %q, want the one sent %q", ans.Bookmark, bm)
			}
			break
		}
		bm = ans.Bookmark
	}
	close(stop)
	wg.Wait()
	if err, _ := writeErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var behind, deleted, inserted int
	for _, d := range docs {
		switch {
		case d.behind:
			behind++
		case d.deleted:
			deleted++
		case strings.Contains(d.id, "w"):
			inserted++
		}
	}
	t.Logf("%d pages, %d docs returned; %d writes: %d inserts behind the bookmark, %d other inserts, %d deletes",
		len(pages), len(seen), writes.Load(), behind, inserted, deleted)
	if behind == 0 || deleted == 0 || inserted == 0 {
		t.Errorf("the writer did not write every kind of write while the reader paged")
	}

	// no doc twice, and each strictly past the one before it
	count := map[string]int{}
	for i, d := range seen {
		count[d.id]++
		if count[d.id] == 2 {
			t.Errorf("%s (k %d) returned twice", d.id, d.k)
		}
		if i > 0 && !less(seen[i-1], d) {
			t.Errorf("out of order: %s (k %d) after %s (k %d)", d.id, d.k, seen[i-1].id, seen[i-1].k)
		}
		if d.behind {
			t.Errorf("%s (k %d), inserted behind the bookmark, was returned", d.id, d.k)
		}
	}
	// every doc that matched throughout, exactly once
	var want []*pgDoc
	for _, d := range docs {
		if d.stable && d.k >= pgLo && d.k < pgHi {
			want = append(want, d)
		}
	}
	sort.Slice(want, func(i, j int) bool { return less(want[i], want[j]) })
	// CouchDB resumes a page at the bookmark's row and skips one row
	// (mango_json_bookmark:update_args: start_key and start_key_docid
	// from the bookmark, skip + 1): when the bookmark's doc was deleted
	// before the next page, the row skipped is the next one, a doc that
	// may have matched throughout. settee resumes strictly past the
	// bookmark's position and misses none; on CouchDB that one doc per
	// such page is let off.
	skipped := map[int]bool{}
	couchSkipped := func(d *pgDoc) bool {
		if s.settee {
			return false
		}
		for i, p := range pages {
			if skipped[i] || p.after == nil || !p.after.deleteTried || !p.after.delSent.Before(p.answered) {
				continue
			}
			if less(p.after, d) && (len(p.got) == 0 || less(d, p.got[0])) {
				skipped[i] = true
				t.Logf("CouchDB skipped %s (k %d), the row after page %d's bookmark %s (k %d), deleted before that page", d.id, d.k, i, p.after.id, p.after.k)
				return true
			}
		}
		return false
	}
	missing := 0
	for _, d := range want {
		if count[d.id] == 0 && !couchSkipped(d) {
			missing++
			if missing <= 5 {
				t.Errorf("%s (k %d), matching throughout, never returned", d.id, d.k)
			}
		}
	}
	if missing > 5 {
		t.Errorf("... %d matching docs never returned in all", missing)
	}
	// what each page must hold given the writes acknowledged before it
	// was asked for
	for i, p := range pages {
		in := map[string]bool{}
		for _, d := range p.got {
			in[d.id] = true
			if d.deleted && d.delAcked.Before(p.asked) {
				t.Errorf("page %d: %s (k %d) was deleted before the page was asked for", i, d.id, d.k)
			}
		}
		if len(p.got) == 0 {
			continue
		}
		end := p.got[len(p.got)-1]
		for _, d := range docs {
			if d.stable || d.behind || d.k < pgLo || d.k >= pgHi || in[d.id] {
				continue
			}
			if d.inserted.IsZero() || !d.inserted.Before(p.asked) || d.deleteTried && d.delSent.Before(p.answered) {
				continue // may or may not show
			}
			if (p.after == nil || less(p.after, d)) && less(d, end) && !couchSkipped(d) {
				var got []string
				for _, g := range p.got {
					got = append(got, fmt.Sprintf("%s:%d", g.id, g.k))
				}
				t.Errorf("page %d: %s (k %d, returned %d times, deleted %v), inserted before the page was asked for, is not in it: %v",
					i, d.id, d.k, count[d.id], d.deleteTried, got)
			}
		}
	}
}

// pgTag is the field t of a doc: the initial docs' ids hold an i, the
// writer's do not.
func pgTag(id string) string {
	if strings.Contains(id, "i") {
		return "initial"
	}
	return "writer"
}

// pgWrite is one write of the writer: an insert (in the query's range,
// outside it, or just behind the reader's last doc) or a delete (of an
// initial doc that is not stable, or of a doc it inserted).
func pgWrite(s pgServer, db string, rng *rand.Rand, mu *sync.Mutex, docs map[string]*pgDoc,
	newID func(int, string) string, index, desc bool, lastK *atomic.Int64, lastID *atomic.Value) error {
	mu.Lock()
	var d *pgDoc
	del := false
	switch r := rng.Intn(100); {
	case r < 35: // in the range, anywhere
		d = &pgDoc{k: pgLo + rng.Intn(pgHi-pgLo)}
	case r < 50: // outside it
		k := rng.Intn(pgKeys - (pgHi - pgLo))
		if k >= pgLo {
			k += pgHi - pgLo
		}
		d = &pgDoc{k: k}
	case r < 65: // behind the reader's last doc
		lk := int(lastK.Load())
		if lk < 0 {
			mu.Unlock()
			return nil
		}
		// strictly behind in k: on the index the id does not matter, on
		// _all_docs the ids start with k
		switch {
		case desc && lk+1 < pgHi:
			d = &pgDoc{k: lk + 1 + rng.Intn(pgHi-lk-1), behind: true}
		case !desc && lk > pgLo:
			d = &pgDoc{k: pgLo + rng.Intn(lk-pgLo), behind: true}
		default:
			mu.Unlock()
			return nil
		}
	default: // delete one
		var cands []*pgDoc
		for _, c := range docs {
			if !c.stable && !c.deleteTried && !c.behind && c.rev != "" {
				cands = append(cands, c)
			}
		}
		if len(cands) == 0 {
			mu.Unlock()
			return nil
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].id < cands[j].id })
		d = cands[rng.Intn(len(cands))]
		d.deleteTried, d.delSent = true, time.Now()
		del = true
	}
	if !del {
		d.id = newID(d.k, "w")
		docs[d.id] = d
	}
	id, rev, k := d.id, d.rev, d.k
	mu.Unlock()

	var st int
	var b []byte
	var err error
	if del {
		st, b, err = s.do("DELETE", "/"+db+"/"+url.PathEscape(id)+"?rev="+rev, "")
	} else {
		st, b, err = s.do("PUT", "/"+db+"/"+url.PathEscape(id), fmt.Sprintf(`{"k":%d,"t":"writer"}`, k))
	}
	if err != nil || st != 200 && st != 201 {
		return fmt.Errorf("write %s: %d %v %s", id, st, err, b)
	}
	var res struct {
		Rev string `json:"rev"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("write %s: %v: %s", id, err, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if del {
		d.deleted, d.delAcked = true, time.Now()
	} else {
		d.rev, d.inserted = res.Rev, time.Now()
	}
	return nil
}

const mangoExaminedWarning = "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this."

// TestMangoPagingExamined: a sorted query on a json index that does not
// cover it (a field the index lacks, so the docs are read) examines about
// limit rows and docs, as CouchDB does, and so gets no warning.
//
// settee bug: it reads the index's rows and their docs 100 at a time
// however small the limit, counts all of them as examined and adds the
// "documents examined is high" warning. Recorded from CouchDB 3.5.2 (q=2)
// and settee, on 600 docs i0000.. with k = i/3*2 and the index
// {"index":{"fields":["k"]},"name":"by-k","ddoc":"pg"}:
//
//	POST /db/_find {"selector":{"k":{"$gte":100,"$lt":300}},"sort":[{"k":"asc"}],"fields":["_id","k","t"],"limit":7,"execution_stats":true}
//	CouchDB: the same 7 docs, "execution_stats":{"total_keys_examined":8,"total_docs_examined":8,...}, no warning
//	settee:  the same 7 docs, "execution_stats":{"total_keys_examined":100,"total_docs_examined":100,...},
//	         "warning":"The number of documents examined is high in proportion to ..."
func TestMangoPagingExamined(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/examined", nil, nil)
	var docs []map[string]any
	for i := 0; i < 600; i++ {
		docs = append(docs, map[string]any{"_id": fmt.Sprintf("i%04d", (i*7919)%10000), "k": i / 3 * 2, "t": "x"})
	}
	bulkDocs(t, s, "examined", docs)
	mustCall(t, s, 200, "POST", "/examined/_index", `{"index":{"fields":["k"]},"name":"by-k","ddoc":"pg"}`, nil)
	var ans struct {
		Docs  []map[string]any `json:"docs"`
		Stats struct {
			Keys int `json:"total_keys_examined"`
			Docs int `json:"total_docs_examined"`
		} `json:"execution_stats"`
		Warning string `json:"warning"`
	}
	body := `{"selector":{"k":{"$gte":100,"$lt":300}},"sort":[{"k":"asc"}],"fields":["_id","k","t"],"limit":7,"execution_stats":true}`
	mustCall(t, s, 200, "POST", "/examined/_find", body, &ans)
	if len(ans.Docs) != 7 || ans.Docs[0]["_id"] != "i3688" || ans.Docs[6]["_id"] != "i1202" {
		t.Fatalf("_find %s: docs %v", body, ans.Docs)
	}
	// CouchDB: 8 and 8 on q=2; a few more rows read ahead per shard are fair
	if ans.Stats.Docs > 4*8 || ans.Warning != "" {
		t.Errorf("a non-covering json index query with limit 7 examined %d keys and %d docs (CouchDB 3.5.2: 8 and 8) and warned %q (CouchDB: no warning)",
			ans.Stats.Keys, ans.Stats.Docs, ans.Warning)
	}
}
