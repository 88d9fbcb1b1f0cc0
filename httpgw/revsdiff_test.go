package httpgw_test

import (
	"io"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// _revs_diff and _missing_revs answer as when encoding/json wrote the
// answer (byte for byte but for <, > and &, which it escaped): ids in
// order, an existing doc's missing revs sorted (duplicates kept, as
// CouchDB keeps them), a missing doc's as given, the leaves below the highest missing rev as
// possible ancestors, docs lacking nothing left out.
func TestRevsDiffAnswer(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/db", nil, nil)
	mustCall(t, s, 201, "POST", "/db/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"a","_rev":"2-bb","_revisions":{"start":2,"ids":["bb","aa"]}},
		{"_id":"a","_rev":"1-cc"},
		{"_id":"q\"<x>","_rev":"1-aa"}]}`, nil)
	for _, tc := range []struct{ path, body, want string }{
		{"_revs_diff", `{"a":["3-dd","1-aa","2-ee","3-dd"],"b":["1-zz","1-yy","1-zz"],"q\"<x>":["1-aa"]}`,
			`{"a":{"missing":["2-ee","3-dd","3-dd"],"possible_ancestors":["2-bb","1-cc"]},"b":{"missing":["1-zz","1-yy","1-zz"]}}` + "\n"},
		{"_revs_diff", `{"q\"<x>":["1-bb"],"a":["1-aa"]}`, `{"q\"<x>":{"missing":["1-bb"]}}` + "\n"},
		{"_revs_diff", `{}`, "{}\n"},
		{"_missing_revs", `{"a":["3-dd","1-aa"],"b":["1-zz"]}`, `{"missing_revs":{"a":["3-dd"],"b":["1-zz"]}}` + "\n"},
	} {
		resp := s.Do(t, "POST", "/db/"+tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != tc.want {
			t.Errorf("%s %s: %d %s, want %s", tc.path, tc.body, resp.StatusCode, b, tc.want)
		}
	}
}
