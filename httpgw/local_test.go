package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// localDocSteps are the paths around _local docs and _design as
// chttpd_db:db_req routes them (found by the differential tester).
var localDocSteps = []wireStep{
	{method: "PUT", path: "/{db}/_local/l1", body: `{"_rev":"0-9","v":1}`, status: 201, inBody: `"rev":"0-10"`},
	{method: "PUT", path: "/{db}/src", body: `{"v":2}`, status: 201},
	// a local doc is read by its id alone
	{method: "GET", path: "/{db}/_local/l1?revs=true", status: 200,
		raw: `{"_id":"_local/l1","_rev":"0-10","v":1,"_revisions":{"start":0,"ids":["10"]}}` + "\n"},
	{method: "GET", path: "/{db}/_local/l1?rev=0-10", status: 404, err: "not_found", reason: "missing"},
	{method: "GET", path: "/{db}/_local/l1?rev=0-2", status: 404, err: "not_found", reason: "missing"},
	{method: "GET", path: "/{db}/_local/l1?rev=bad", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/_local/l1?open_revs=all", status: 404, err: "not_found", reason: "missing"},
	// the doc query is parsed as a doc's, its errors first; open_revs
	// lists find each rev missing
	{method: "GET", path: "/{db}/_local/l1?atts_since=bad", status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "GET", path: "/{db}/_local/l1?atts_since=[\"bad\"]", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/_local/l1?atts_since=[\"0-1\"]", status: 200, inBody: `"_rev":"0-10"`},
	{method: "GET", path: "/{db}/_local/l1?open_revs=[1]", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/_local/l1?rev=bad&open_revs=bad", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/_local/l1?open_revs=[]", status: 200, inBody: `"_rev":"0-10"`},
	{method: "GET", path: "/{db}/_local/l1?open_revs=[\"1-abc\"]", hdr: map[string]string{"Accept": "application/json"}, status: 200,
		raw: `[{"missing":"1-abc"}]` + "\n"},
	// multipart/mixed unless the client asks for JSON alone (mochiweb's
	// accepts_content_type: */* takes it)
	{method: "GET", path: "/{db}/_local/l1?open_revs=[\"1-abc\"]", hdr: map[string]string{"Accept": "*/*"}, status: 200,
		inBodyAll: []string{"Content-Type: application/json; error=\"true\"\r\n\r\n{\"missing\":\"1-abc\"}\r\n--"}},
	// and on a PUT: nothing is written
	{method: "PUT", path: "/{db}/_local/q?atts_since=bad", body: `{}`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/{db}/qq?open_revs=bad", body: `{}`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/{db}/qq?atts_since=bad&rev=x", body: `{}`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/{db}/_bad?rev=x&atts_since=bad", body: `{}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/_local/q", status: 404, err: "not_found", reason: "missing"},
	{method: "GET", path: "/{db}/qq?open_revs=bad&rev=x", status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "GET", path: "/{db}/qq", status: 404, err: "not_found", reason: "missing"},
	// an encoded slash names the doc (only _design%2F is redirected)
	{method: "GET", path: "/{db}/_local%2Fl1", status: 200, inBody: `"_rev":"0-10"`},
	{method: "GET", path: "/{db}/_local", status: 400, err: "bad_request", reason: "Invalid _local document id."},
	{method: "GET", path: "/{db}/_local/", status: 400, err: "bad_request", reason: "Invalid _local document id."},
	{method: "PUT", path: "/{db}/_local/l1/att", body: `x`, hdr: map[string]string{"Content-Type": "text/plain"},
		status: 400, err: "bad_request", reason: "_local documents do not accept attachments."},
	// COPY from and to local docs: the body, a local rev one past the given one
	{method: "COPY", path: "/{db}/_local/l1", hdr: map[string]string{"Destination": "_local/l2"}, status: 201,
		raw: `{"ok":true,"id":"_local/l2","rev":"0-1"}` + "\n"},
	{method: "COPY", path: "/{db}/_local/l1", hdr: map[string]string{"Destination": "_local/l2?rev=0-1"}, status: 201, inBody: `"rev":"0-2"`},
	{method: "GET", path: "/{db}/_local/l2", status: 200, raw: `{"_id":"_local/l2","_rev":"0-2","v":1}` + "\n"},
	{method: "COPY", path: "/{db}/src", hdr: map[string]string{"Destination": "_local/l3?rev=0-5"}, status: 201, inBody: `"rev":"0-6"`},
	{method: "GET", path: "/{db}/_local/l3", status: 200, raw: `{"_id":"_local/l3","_rev":"0-6","v":2}` + "\n"},
	{method: "COPY", path: "/{db}/_local/l1?rev=0-10", hdr: map[string]string{"Destination": "plain"}, status: 404, err: "not_found", reason: "missing"},
	{method: "COPY", path: "/{db}/_local/l1", hdr: map[string]string{"Destination": "plain"}, status: 201, inBody: `"id":"plain"`},
	// new_edits=false: the answer names the rev given; only "0-N" is
	// stored, as 0-(N+1), whatever the stored rev
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"_rev":"1-0123456789abcdef0123456789abcdef","v":1}`, status: 201,
		raw: `{"ok":true,"id":"_local/r1","rev":"1-0123456789abcdef0123456789abcdef"}` + "\n"},
	{method: "GET", path: "/{db}/_local/r1", status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"_rev":"0-4","v":2}`, status: 201, raw: `{"ok":true,"id":"_local/r1","rev":"0-4"}` + "\n"},
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"_rev":"0-1","v":3}`, status: 201, raw: `{"ok":true,"id":"_local/r1","rev":"0-1"}` + "\n"},
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"_rev":"0-x","v":4}`, status: 201, raw: `{"ok":true,"id":"_local/r1","rev":"0-x"}` + "\n"},
	{method: "GET", path: "/{db}/_local/r1", status: 200, raw: `{"_id":"_local/r1","_rev":"0-2","v":3}` + "\n"},
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"_revisions":{"start":0,"ids":["7"]},"v":5}`, status: 201, raw: `{"ok":true,"id":"_local/r1","rev":"0-7"}` + "\n"},
	{method: "GET", path: "/{db}/_local/r1", status: 200, raw: `{"_id":"_local/r1","_rev":"0-8","v":5}` + "\n"},
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"v":6}`, status: 400, err: "bad_request",
		reason: "When `new_edits: false`, the document needs `_rev` or `_revisions` specified"},
	{method: "PUT", path: "/{db}/_local/r1?new_edits=false", body: `{"_rev":"7"}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"_local/r2","_rev":"0-3"},{"_id":"_local/r3","_rev":"2-ab"}]}`, status: 201, raw: "[]\n"},
	{method: "GET", path: "/{db}/_local/r2", status: 200, raw: `{"_id":"_local/r2","_rev":"0-4"}` + "\n"},
	{method: "GET", path: "/{db}/_local/r3", status: 404, err: "not_found", reason: "missing"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"_local/r4","_rev":"0-3"},{"_id":"_local/r5"}]}`, status: 400, err: "bad_request",
		reason: "When `new_edits: false`, the document needs `_rev` or `_revisions` specified"},
	{method: "GET", path: "/{db}/_local/r4", status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/{db}/_local/r2?new_edits=false", body: `{"_rev":"0-1","_deleted":true}`, status: 200, raw: `{"ok":true,"id":"_local/r2","rev":"0-1"}` + "\n"},
	{method: "GET", path: "/{db}/_local/r2", status: 404, err: "not_found", reason: "missing"},
	// /db/_design and /db/_design/ are the doc "_design"
	{method: "PUT", path: "/{db}/_design", body: `{}`, status: 400, err: "illegal_docid", reason: "Only reserved document ids may start with underscore."},
	{method: "PUT", path: "/{db}/_design/", body: `{}`, status: 400, err: "illegal_docid", reason: "Only reserved document ids may start with underscore."},
	{method: "GET", path: "/{db}/_design", status: 404, err: "not_found", reason: "missing"},
}

func TestLocalDocPaths(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/ld", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "ld", localDocSteps)
}

func TestLocalDocPathsAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "ld", localDocSteps)
}
