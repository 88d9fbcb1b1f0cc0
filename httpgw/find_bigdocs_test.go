package httpgw_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// _find's docs are rendered into a buffer reused between requests and
// written out past the row buffer when one is longer than it: docs of
// every size, in several batches and in requests one after another, come
// out whole and each as GET answers it.
func TestFindDocsOfEverySize(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/sizes", "", nil)
	sizes := []int{0, 10, 40_000, 5, 100_000, 33_000, 200, 70_000}
	var docs []string
	for i := range 120 {
		n := sizes[i%len(sizes)]
		docs = append(docs, fmt.Sprintf(`{"_id":"d%03d","n":%d,"pad":"%s"}`, i, i, strings.Repeat(string(rune('a'+i%26)), n)))
	}
	c.do("POST", "/sizes/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
	c.do("POST", "/sizes/_index", `{"index":{"fields":["n"]},"name":"n"}`, nil)
	for _, limit := range []int{3, 25, 120} {
		for range 2 {
			resp, b := c.do("POST", "/sizes/_find", fmt.Sprintf(`{"selector":{"n":{"$gte":0}},"sort":["n"],"limit":%d}`, limit), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("limit %d: %d %.200s", limit, resp.StatusCode, b)
			}
			var r struct {
				Docs []json.RawMessage `json:"docs"`
			}
			if err := json.Unmarshal([]byte(b), &r); err != nil {
				t.Fatalf("limit %d: %v in %d bytes", limit, err, len(b))
			}
			if len(r.Docs) != limit {
				t.Fatalf("limit %d: %d docs", limit, len(r.Docs))
			}
			for i, d := range r.Docs {
				_, want := c.do("GET", fmt.Sprintf("/sizes/d%03d", i), "", nil)
				if got := string(d); got != strings.TrimSpace(want) {
					t.Fatalf("limit %d, doc %d: %d bytes %.80s, GET answers %d bytes %.80s", limit, i, len(got), got, len(want), want)
				}
			}
		}
	}
}
