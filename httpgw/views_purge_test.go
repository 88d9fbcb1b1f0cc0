package httpgw_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// A doc purged whole leaves no change to index, only a purge info: its
// rows go at the next query all the same; a doc that keeps revisions
// after a purge is indexed by what it has left.
func TestViewPurge(t *testing.T) {
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/pv?q=1", "", nil)
	c.do("POST", "/pv/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"a","_rev":"1-aaaa","k":1},
		{"_id":"b","_rev":"1-bbbb","k":2},
		{"_id":"c","_rev":"1-cccc","k":3},
		{"_id":"c","_rev":"1-dddd","k":4}]}`, nil)
	c.do("PUT", "/pv/_design/d", `{"views":{"k":{"map":"function (doc) { emit(doc.k, null); }"}}}`, nil)
	keys := func() (int, []int) {
		_, b := c.do("GET", "/pv/_design/d/_view/k", "", nil)
		var v struct {
			TotalRows int `json:"total_rows"`
			Rows      []struct{ Key int }
		}
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		var ks []int
		for _, r := range v.Rows {
			ks = append(ks, r.Key)
		}
		return v.TotalRows, ks
	}
	if n, ks := keys(); n != 3 || len(ks) != 3 || ks[2] != 4 {
		t.Fatalf("before: total %d keys %v, want 3 rows, c's winner 1-dddd (k 4)", n, ks)
	}
	if resp, b := c.do("POST", "/pv/_purge", `{"a":["1-aaaa"],"c":["1-dddd"]}`, nil); resp.StatusCode != 201 || !strings.Contains(b, `"purged"`) {
		t.Fatalf("purge: %d %s", resp.StatusCode, b)
	}
	// a went whole; c keeps 1-cccc, now its winner
	if n, ks := keys(); n != 2 || len(ks) != 2 || ks[0] != 2 || ks[1] != 3 {
		t.Fatalf("after the purge: total %d keys %v, want [2 3]", n, ks)
	}
}
