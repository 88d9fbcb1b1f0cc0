package kivik_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	kivik "github.com/go-kivik/kivik/v4"
	"github.com/go-kivik/kivik/v4/couchdb"
)

// countingTransport counts the requests with a body and those of them
// kivik sent gzipped; it changes nothing.
type countingTransport struct {
	withBody, gzipped atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		c.withBody.Add(1)
		if req.Header.Get("Content-Encoding") == "gzip" {
			c.gzipped.Add(1)
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// testGzip200Docs writes 200 docs through kivik's default gzip request
// compression (one PUT each, then one _bulk_docs updating them all) and reads
// them back every way.
func testGzip200Docs(t *testing.T, e *env) {
	tr := &countingTransport{}
	// default options; only the transport is watched
	c := e.client(t, e.dsn(e.user, e.pw), couchdb.OptionHTTPClient(&http.Client{Transport: tr}))
	name := e.dbName("gzip")
	must(t, "CreateDB", c.CreateDB(ctx(t), name))
	t.Cleanup(func() { _ = e.admin.DestroyDB(ctx(t), name) })
	db := c.DB(name)

	type doc struct {
		ID    string `json:"_id,omitempty"`
		Rev   string `json:"_rev,omitempty"`
		N     int    `json:"n"`
		Text  string `json:"text"`
		Noise string `json:"noise"`
		Gen   int    `json:"gen"`
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]doc, 200)
	for i := range want {
		noise := make([]byte, rng.IntN(3000))
		for j := range noise {
			noise[j] = byte('!' + rng.IntN(90)) // hard to compress
		}
		want[i] = doc{N: i, Text: strings.Repeat(fmt.Sprintf("doc %d compresses well. ", i), 1+i%50), Noise: string(noise), Gen: 1}
	}

	revs := make([]string, len(want))
	var wg sync.WaitGroup
	errs := make(chan error, len(want))
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(want); i += 8 {
				rev, err := db.Put(ctx(t), fmt.Sprintf("gz-%03d", i), want[i])
				if err != nil {
					errs <- fmt.Errorf("Put gz-%03d: %w", i, err)
					continue
				}
				revs[i] = rev
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// one _bulk_docs of all 200, each at its rev
	var updates []any
	for i := range want {
		want[i].Gen = 2
		u := want[i]
		u.ID, u.Rev = fmt.Sprintf("gz-%03d", i), revs[i]
		updates = append(updates, u)
	}
	res, err := db.BulkDocs(ctx(t), updates)
	must(t, "BulkDocs 200", err)
	for i, r := range res {
		if r.Error != nil || revGen(t, r.Rev) != 2 {
			t.Fatalf("BulkDocs result %d: %+v", i, r)
		}
		revs[i] = r.Rev
	}

	check := func(what string, i int, got doc) {
		t.Helper()
		w := want[i]
		w.ID, w.Rev = fmt.Sprintf("gz-%03d", i), revs[i]
		if got != w {
			t.Errorf("%s gz-%03d: gen %d n %d, text %d bytes, noise %d bytes; want gen %d n %d, %d and %d bytes", what, i, got.Gen, got.N, len(got.Text), len(got.Noise), w.Gen, w.N, len(w.Text), len(w.Noise))
		}
	}
	// every doc by GET
	for i := range want {
		var got doc
		must(t, "Get", db.Get(ctx(t), fmt.Sprintf("gz-%03d", i)).ScanDoc(&got))
		check("Get", i, got)
	}
	// all of them in one _all_docs with include_docs, and by keys (a gzipped POST)
	var keys []string
	for i := range want {
		keys = append(keys, fmt.Sprintf("gz-%03d", i))
	}
	for _, opts := range [][]kivik.Option{{kivik.IncludeDocs()}, {kivik.IncludeDocs(), kivik.Param("keys", keys)}} {
		rs := db.AllDocs(ctx(t), opts...)
		n := 0
		for rs.Next() {
			var got doc
			must(t, "AllDocs ScanDoc", rs.ScanDoc(&got))
			check("AllDocs", got.N, got)
			n++
		}
		must(t, "AllDocs", rs.Err())
		if n != len(want) {
			t.Errorf("AllDocs %v: %d rows, want %d", opts, n, len(want))
		}
	}
	// and by _bulk_get (a gzipped POST)
	var refs []kivik.BulkGetReference
	for i := range want {
		refs = append(refs, kivik.BulkGetReference{ID: fmt.Sprintf("gz-%03d", i)})
	}
	rs := db.BulkGet(ctx(t), refs)
	n := 0
	for rs.Next() {
		var got doc
		must(t, "BulkGet ScanDoc", rs.ScanDoc(&got))
		check("BulkGet", got.N, got)
		n++
	}
	must(t, "BulkGet", rs.Err())
	if n != len(want) {
		t.Errorf("BulkGet: %d docs, want %d", n, len(want))
	}
	st, err := db.Stats(ctx(t))
	must(t, "Stats", err)
	if st.DocCount != int64(len(want)) {
		t.Errorf("doc count %d, want %d", st.DocCount, len(want))
	}

	// kivik gzipped every body it sent (the cookie login to /_session aside,
	// which kivik never compresses)
	if body, gz := tr.withBody.Load(), tr.gzipped.Load(); gz < 203 || body-gz > 1 {
		t.Errorf("requests with a body: %d, gzipped: %d; want every one but the /_session login gzipped", body, gz)
	}
}
