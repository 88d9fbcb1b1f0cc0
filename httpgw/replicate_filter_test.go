package httpgw_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// A replication with a design doc's filter and query_params copies only
// the docs the filter passes, whether the source is this node's database
// or one reached over HTTP (whose _changes?filter= runs it).
func TestReplicateWithFilter(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/fsrc", "", nil)
	var docs []string
	for i := range 10 {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%d","n":%d}`, i, i))
	}
	c.do("POST", "/fsrc/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
	c.do("PUT", "/fsrc/_design/f", `{"filters":{"mod":"function (doc, req) { return doc.n !== undefined && doc.n % Number(req.query.m) == 0; }"}}`, nil)
	u, _ := url.Parse(s.URL + "/fsrc")
	u.User = url.UserPassword(testserver.AdminUser, testserver.AdminPassword)
	for _, tc := range []struct {
		name, source, target string
		m                    int
		want                 []string
	}{
		{"local", `"fsrc"`, "fdst1", 3, []string{"d0", "d3", "d6", "d9"}},
		{"http", `"` + u.String() + `"`, "fdst2", 4, []string{"d0", "d4", "d8"}},
	} {
		resp, b := c.do("POST", "/_replicate", fmt.Sprintf(`{"source":%s,"target":%q,"create_target":true,"filter":"f/mod","query_params":{"m":%d}}`, tc.source, tc.target, tc.m), nil)
		if resp.StatusCode != 200 || !strings.Contains(b, `"ok":true`) {
			t.Fatalf("%s: replicate: %d %s", tc.name, resp.StatusCode, b)
		}
		_, b = c.do("GET", "/"+tc.target+"/_all_docs", "", nil)
		var all struct{ Rows []struct{ ID string } }
		_ = json.Unmarshal([]byte(b), &all)
		var got []string
		for _, r := range all.Rows {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: target has %v, want %v", tc.name, got, tc.want)
		}
	}
	if resp, b := c.do("POST", "/_replicate", `{"source":"fsrc","target":"x","filter":"nofilter"}`, nil); resp.StatusCode != 400 {
		t.Errorf("a filter not of the form ddoc/name: %d %s", resp.StatusCode, b)
	}
}
