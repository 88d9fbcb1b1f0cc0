package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// bodySteps are request bodies and JSON parameters of the wrong shape, and
// the reason CouchDB gives for each: a body that is not JSON, one that is
// not an object, a member of the wrong type (found by the differential
// tester, tools/difftest).
var bodySteps = []wireStep{
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"a"},{"_id":"b"},{"_id":"c"}]}`, status: 201},
	// not JSON, not an object
	{method: "POST", path: "/{db}/_all_docs", body: `nope`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "POST", path: "/{db}/_all_docs", body: `[]`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	{method: "POST", path: "/{db}/_all_docs", body: `null`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	{method: "POST", path: "/{db}/_revs_diff", body: `[]`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	{method: "POST", path: "/{db}/_missing_revs", body: `[]`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	{method: "POST", path: "/_dbs_info", body: `[]`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	// a member of the wrong type
	{method: "POST", path: "/{db}/_all_docs", body: `{"keys":"x"}`, status: 400, err: "bad_request", reason: "`keys` body member must be an array."},
	{method: "POST", path: "/{db}/_all_docs", body: `{"keys":null}`, status: 400, err: "bad_request", reason: "`keys` body member must be an array."},
	{method: "GET", path: `/{db}/_all_docs?keys="a"`, status: 400, err: "bad_request", reason: "`keys` parameter must be an array."},
	{method: "GET", path: `/{db}/_all_docs?keys=nope`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "POST", path: "/_dbs_info", body: `{"keys":"x"}`, status: 400, err: "bad_request", reason: "`keys` member must be an array."},
	{method: "POST", path: "/_dbs_info", body: `{"keys":null}`, status: 400, err: "bad_request", reason: "`keys` member must be an array."},
	{method: "POST", path: "/_dbs_info", body: `{"KEYS":["{db}"]}`, status: 400, err: "bad_request", reason: "`keys` member must exist."},
	// keys that name no database are not_found rows, echoed as sent
	{method: "POST", path: "/_dbs_info", body: `{"keys":[1,null]}`, status: 200,
		raw: `[{"key":1,"error":"not_found"},{"key":null,"error":"not_found"}]` + "\n"},
	{method: "POST", path: "/{db}/_all_docs/queries", body: `{"queries":"x"}`, status: 400, err: "bad_request", reason: "`queries` member must be an array."},
	{method: "POST", path: "/{db}/_all_docs/queries", body: `{}`, status: 400, err: "bad_request", reason: "POST body must include `queries` parameter."},
	// a query's one key is a range with an offset; two keys are a lookup
	{method: "POST", path: "/{db}/_all_docs/queries", body: `{"queries":[{"keys":["b"]},{"keys":["zz"]},{"keys":["c","a"]}]}`, status: 200,
		inBody: `"total_rows":3,"offset":1,`},
	{method: "POST", path: "/{db}/_all_docs/queries", body: `{"queries":[{"keys":["zz"]}]}`, status: 200,
		inBody: `"total_rows":3,"offset":3,`},
	{method: "POST", path: "/{db}/_changes", body: `nope`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "POST", path: "/{db}/_changes", body: `[]`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	{method: "POST", path: "/{db}/_changes", body: `{}`, status: 200},
	{method: "POST", path: "/{db}/_changes?filter=_doc_ids", body: `{"doc_ids":"a"}`, status: 400, err: "bad_request", reason: "`doc_ids` filter parameter is not a list of doc ids."},
	{method: "POST", path: "/{db}/_changes?filter=_doc_ids", body: `{"doc_ids":[1]}`, status: 400, err: "bad_request", reason: "`doc_ids` filter parameter is not a list of doc ids."},
	{method: "POST", path: `/{db}/_changes?filter=_doc_ids&doc_ids=["a"]`, body: `{}`, status: 400, err: "bad_request", reason: "`doc_ids` filter parameter is not a list of doc ids."},
	{method: "GET", path: `/{db}/_changes?filter=_doc_ids&doc_ids="a"`, status: 400, err: "bad_request", reason: "`doc_ids` filter parameter is not a list of doc ids."},
	{method: "GET", path: `/{db}/_changes?filter=_doc_ids`, status: 400, err: "bad_request", reason: "`doc_ids` filter parameter is not a list of doc ids."},
	{method: "GET", path: `/{db}/_changes?filter=_doc_ids&doc_ids=nope`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	// revision lists (couch_doc:parse_revs)
	{method: "GET", path: `/{db}/a?open_revs=[1]`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: `/{db}/a?open_revs="a"`, status: 400, err: "bad_request", reason: "Invalid list of revisions"},
	{method: "GET", path: `/{db}/a?open_revs=nope`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "POST", path: "/{db}/_purge", body: `{"a":"1-abc"}`, status: 400, err: "bad_request", reason: "Invalid list of revisions"},
	{method: "POST", path: "/{db}/_purge", body: `{"a":null}`, status: 400, err: "bad_request", reason: "Invalid list of revisions"},
	{method: "POST", path: "/{db}/_purge", body: `{"a":["x"]}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "POST", path: "/{db}/_purge", body: `[]`, status: 400, err: "bad_request", reason: "Request body must be a JSON object"},
	// not JSON before not an integer
	{method: "PUT", path: "/{db}/_revs_limit", body: `abc`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/{db}/_purged_infos_limit", body: `x`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/{db}/_purged_infos_limit", body: `0`, status: 400, err: "bad_request", reason: "`purged_infos_limit` must be positive integer"},
}

func TestRequestBodies(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/rb", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "rb", bodySteps)
}

func TestRequestBodiesAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "rb", bodySteps)
}
