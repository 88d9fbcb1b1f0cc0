package httpgw_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// A view's offset is counted from the index's count buckets, not by
// reading the rows before the key: checked here against the rows
// themselves, over enough rows for many buckets, after inserts, edits
// (rows that move) and deletes.
func TestViewOffsets(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/off", "", nil)
	c.do("PUT", "/off/_design/d", `{"views":{"k":{"map":"function (doc) { emit(doc.k, null); if (doc.twice) emit(doc.k, 1); }"}}}`, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	revs := map[string]string{}
	write := func(n int) {
		var docs []string
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("d%04d", rng.IntN(1500))
			doc := fmt.Sprintf(`{"_id":%q,"k":%d,"twice":%v`, id, rng.IntN(400), rng.IntN(5) == 0)
			if r := revs[id]; r != "" {
				doc += fmt.Sprintf(`,"_rev":%q`, r)
				if rng.IntN(4) == 0 {
					doc += `,"_deleted":true`
				}
			}
			docs = append(docs, doc+"}")
		}
		resp, b := c.do("POST", "/off/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
		if resp.StatusCode != 201 {
			t.Fatalf("bulk: %d %s", resp.StatusCode, b)
		}
		var out []struct{ ID, Rev, Error string }
		_ = json.Unmarshal([]byte(b), &out)
		for _, o := range out {
			if o.Error == "" {
				revs[o.ID] = o.Rev
			}
		}
	}
	check := func(round int) {
		_, b := c.do("GET", "/off/_design/d/_view/k", "", nil)
		var all struct {
			TotalRows int `json:"total_rows"`
			Rows      []struct{ Key int }
		}
		if err := json.Unmarshal([]byte(b), &all); err != nil {
			t.Fatal(err)
		}
		if all.TotalRows != len(all.Rows) {
			t.Fatalf("round %d: total_rows %d, %d rows", round, all.TotalRows, len(all.Rows))
		}
		for i := 0; i < 40; i++ {
			k := rng.IntN(420)
			desc := rng.IntN(2) == 0
			want := 0
			for _, r := range all.Rows {
				if !desc && r.Key < k || desc && r.Key > k {
					want++
				}
			}
			q := "?startkey=" + url.QueryEscape(fmt.Sprint(k)) + "&limit=1"
			if desc {
				q += "&descending=true"
			}
			_, b := c.do("GET", "/off/_design/d/_view/k"+q, "", nil)
			var got struct{ Offset int }
			_ = json.Unmarshal([]byte(b), &got)
			if got.Offset != want {
				t.Fatalf("round %d: startkey=%d descending=%v: offset %d, the rows say %d", round, k, desc, got.Offset, want)
			}
		}
	}
	for round := 0; round < 4; round++ {
		write(600)
		check(round)
	}
}
