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
		{`{"language":null}`, "`language` field must have string type"},
		{`{"options":null,"views":{}}`, "`options` field must have object type"},
		{`{"views":null}`, "`views` field must have object type"},
		{`{"lists":null}`, "`lists` field must have object type"},
		{`{"options":{"partitioned":null}}`, "`options.partitioned` field must have boolean type"},
		{`{"autoupdate":null}`, ""},
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

// CouchDB 3.5.2's answers to design docs with bad views (PUT
// /db/_design/x, recorded 2026-12-03), through both passes as the gateway
// runs them: the types of every view first (views in name order), then
// what each view holds.
func TestCheckViews(t *testing.T) {
	for _, tc := range []struct{ body, code, reason string }{
		{`{"views":{"a":null}}`, "invalid_design_doc", "`views.a` field must have object type"},
		{`{"views":{"a":5}}`, "invalid_design_doc", "`views.a` field must have object type"},
		{`{"views":{"a":5,"b":{"map":1}}}`, "invalid_design_doc", "`views.a` field must have object type"},
		{`{"views":{"b":{"map":1},"a":5}}`, "invalid_design_doc", "`views.a` field must have object type"},
		{`{"views":{"a":{"map":1},"b":5}}`, "invalid_design_doc", "`views.a.map` field must have string type"},
		{`{"views":{"a":{"map":null}}}`, "invalid_design_doc", "`views.a.map` field must have string type"},
		{`{"views":{"a":{"reduce":1}}}`, "invalid_design_doc", "`views.a.reduce` field must have string type"},
		{`{"views":{"a":{"reduce":null}}}`, "invalid_design_doc", "`views.a.reduce` field must have string type"},
		{`{"views":{"a":{"map":"function(d){}","reduce":null}}}`, "invalid_design_doc", "`views.a.reduce` field must have string type"},
		{`{"views":{"a":{"map":5,"reduce":5}}}`, "invalid_design_doc", "`views.a.map` field must have string type"},
		{`{"views":{"a":{"map":"x","reduce":1}},"validate_doc_update":1}`, "invalid_design_doc", "`validate_doc_update` field must have string type"},
		{`{"views":{"a":{"map":"function(d){}","reduce":null}},"validate_doc_update":null}`, "invalid_design_doc", "`validate_doc_update` field must have string type"},
		{`{"language":"query","views":{"a":{"map":null}}}`, "invalid_design_doc", "`views.a.map` field must have object type"},
		{`{"language":"query","views":{"a":{"map":5,"reduce":5}}}`, "invalid_design_doc", "`views.a.map` field must have object type"},
		{`{"language":"query","views":{"a":{"map":{"fields":{"a":"asc"}},"reduce":null}}}`, "invalid_design_doc", "`views.a.reduce` field must have string type"},
		{`{"views":{"lib":null}}`, "invalid_design_doc", "`views.lib` field must have object type"},
		{`{"views":{"lib":"x"}}`, "invalid_design_doc", "`views.lib` field must have object type"},
		{`{"views":{"lib":5,"b":{"map":1}}}`, "invalid_design_doc", "`views.lib` field must have object type"},
		{`{"views":{"a":5,"lib":5}}`, "invalid_design_doc", "`views.lib` field must have object type"},
		{`{"views":{"a":{"map":5},"lib":5}}`, "invalid_design_doc", "`views.lib` field must have object type"},
		{`{"views":{"lib":5},"validate_doc_update":5}`, "invalid_design_doc", "`validate_doc_update` field must have string type"},
		{`{"views":{"lib":{"a":1}}}`, "", ""},
		{`{"views":{"a":{"map":""}}}`, "not_found", "missing function"},
		{`{"views":{"a":{"map":"function(d){}","reduce":""}}}`, "not_found", "missing function"},
		{`{"views":{"a":{"map":"function(d){}","reduce":"_sum"},"b":{"map":7}}}`, "invalid_design_doc", "`views.b.map` field must have string type"},
		{`{"views":{"a":{"map":"function(d){}","reduce":"_bogus"},"b":{"map":7}}}`, "invalid_design_doc", "`views.b.map` field must have string type"},
		{`{"views":{"a":{"map":"function(d){}","reduce":"_bogus"}}}`, "invalid_design_doc", "`_bogus` is not a supported reduce function."},
		{`{"views":{"a":{},"b":{"map":7}}}`, "invalid_design_doc", "`views.b.map` field must have string type"},
		{`{"views":{"a":{}}}`, "invalid_design_doc", "View `a` must contain map function"},
		{`{"views":{"a":{"map":"function(d){}","reduce":"_count"}}}`, "", ""},
	} {
		err := CheckFields([]byte(tc.body))
		if err == nil {
			_, err = ParseDesign("_design/x", []byte(tc.body))
		}
		var code, reason string
		if err != nil {
			de, ok := err.(*DesignError)
			if !ok {
				t.Errorf("%s: %v, want a DesignError", tc.body, err)
				continue
			}
			code, reason = de.Code, de.Reason
		}
		if code != tc.code || reason != tc.reason {
			t.Errorf("%s: %s %q, want %s %q", tc.body, code, reason, tc.code, tc.reason)
		}
	}
}
