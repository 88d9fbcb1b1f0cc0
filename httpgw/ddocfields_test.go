package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// A design doc with badly typed function members is refused as CouchDB
// 3.5.2 refuses it (views.CheckFields has the whole table), on PUT and in
// _bulk_docs; a write that conflicts answers its conflict first, as
// CouchDB checks the rev before the body.
func TestDesignFieldTypes(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/fd", nil, nil)
	var e struct{ Error, Reason string }
	mustCall(t, s, 400, "PUT", "/fd/_design/a", `{"shows":5}`, &e)
	if e.Error != "invalid_design_doc" || e.Reason != "`shows` field must have object type" {
		t.Errorf("shows 5: %+v", e)
	}
	mustCall(t, s, 400, "PUT", "/fd/_design/a", `{"rewrites":5,"lists":{"l":true}}`, &e)
	if e.Reason != "`lists.l` field must have string or object type" {
		t.Errorf("lists.l true: %+v", e)
	}
	mustCall(t, s, 404, "GET", "/fd/_design/a", nil, nil)
	mustCall(t, s, 201, "PUT", "/fd/_design/a", `{"shows":{"s":"function(doc, req) { return 'x'; }"},"rewrites":[]}`, nil)
	mustCall(t, s, 409, "PUT", "/fd/_design/a", `{"validate_doc_update":5}`, &e)
	if e.Error != "conflict" {
		t.Errorf("a conflicting bad ddoc: %+v", e)
	}
	var res []map[string]any
	mustCall(t, s, 201, "POST", "/fd/_bulk_docs", `{"docs":[{"_id":"_design/b","updates":{"u":5}},{"_id":"_design/a","filters":5},{"_id":"ok"}]}`, &res)
	if len(res) != 3 || res[0]["error"] != "invalid_design_doc" || res[0]["reason"] != "`updates.u` field must have string or object type" ||
		res[1]["error"] != "conflict" || res[2]["ok"] != true {
		t.Errorf("_bulk_docs: %v", res)
	}
}
