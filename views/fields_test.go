package views

import "testing"

// CouchDB 3.5.2's answers to design docs with badly typed function members
// (PUT /db/_design/x, recorded 2026-12-03): the first field in its order
// is named; well-typed members pass.
func TestCheckFields(t *testing.T) {
	for _, tc := range []struct{ body, reason string }{
		{`{"shows":5}`, "`shows` field must have object type"},
		{`{"shows":{"a":5}}`, "`shows.a` field must have string or object type"},
		{`{"lists":5}`, "`lists` field must have object type"},
		{`{"updates":5}`, "`updates` field must have object type"},
		{`{"filters":5}`, "`filters` field must have object type"},
		{`{"validate_doc_update":5}`, "`validate_doc_update` field must have string type"},
		{`{"rewrites":5}`, "`rewrites` field must have array or string type"},
		{`{"rewrites":{"a":1}}`, "`rewrites` field must have array or string type"},
		{`{"rewrites":true}`, "`rewrites` field must have array or string type"},
		{`{"rewrites":5,"shows":5}`, "`rewrites` field must have array or string type"},
		{`{"views":5,"rewrites":5}`, "`rewrites` field must have array or string type"},
		{`{"language":5,"rewrites":5}`, "`language` field must have string type"},
		{`{"options":5,"rewrites":5}`, "`options` field must have object type"},
		{`{"rewrites":5,"lists":5}`, "`lists` field must have object type"},
		{`{"rewrites":5,"filters":5}`, "`filters` field must have object type"},
		{`{"rewrites":5,"updates":5}`, "`rewrites` field must have array or string type"},
		{`{"rewrites":5,"validate_doc_update":5}`, "`rewrites` field must have array or string type"},
		{`{"filters":{"a":5}}`, "`filters.a` field must have string or object type"},
		{`{"lists":{"a":5}}`, "`lists.a` field must have string or object type"},
		{`{"updates":{"a":5}}`, "`updates.a` field must have string or object type"},
		{`{"updates":{"a":null}}`, "`updates.a` field must have string or object type"},
		{`{"rewrites":"x","shows":{"a":5}}`, "`shows.a` field must have string or object type"},
		{`{"views":{"v":{"map":5}},"shows":5}`, "`shows` field must have object type"},
		{`{"shows":null}`, "`shows` field must have object type"},
		{`{"rewrites":null}`, "`rewrites` field must have array or string type"},
		{`{"validate_doc_update":null}`, "`validate_doc_update` field must have string type"},
		{`{"filters":[]}`, "`filters` field must have object type"},
		{`{"filters":null}`, "`filters` field must have object type"},
		{`{"shows":{"a":5},"lists":{"b":5}}`, "`lists.b` field must have string or object type"},
		{`{"options":{"partitioned":5},"lists":5}`, "`lists` field must have object type"},
		{`{"options":{"partitioned":5},"rewrites":5}`, "`options.partitioned` field must have boolean type"},
		{`{"options":{"partitioned":5},"filters":5}`, "`filters` field must have object type"},
		{`{"options":{"partitioned":5},"views":5}`, "`options.partitioned` field must have boolean type"},
		{`{"language":5,"filters":5}`, "`filters` field must have object type"},
		{`{"validate_doc_update":"x","views":5}`, "`views` field must have object type"},
		{`{"shows":{"a":{}}}`, ""},
		{`{"filters":{"a":{}}}`, ""},
		{`{"rewrites":"function(req){return \"x\"}"}`, ""},
		{`{"rewrites":[]}`, ""},
		{`{"rewrites":[5]}`, ""},
		{`{"lists":{"a":"x"},"rewrites":[1],"shows":{},"updates":{"u":{}},"filters":{},"validate_doc_update":"function(){}"}`, ""},
	} {
		err := CheckFields([]byte(tc.body))
		got := ""
		if err != nil {
			de, ok := err.(*DesignError)
			if !ok || de.Code != "invalid_design_doc" {
				t.Errorf("%s: %v, want an invalid_design_doc", tc.body, err)
				continue
			}
			got = de.Reason
		}
		if got != tc.reason {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.reason)
		}
	}
}
