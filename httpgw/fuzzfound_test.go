package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// fuzzFoundSteps are answers the differential tester's fuzzer found
// different from CouchDB's, each checked here against both.
var fuzzFoundSteps = []wireStep{
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"d1"},{"_id":"d2"},{"_id":"d3"},{"_id":"d4"}]}`, status: 201},
	// of a key's aliases the last in the query string counts, each one
	// parsed
	{method: "GET", path: `/{db}/_all_docs?startkey="d4"&start_key="d2"`, status: 200, inBody: `"offset":1`, rows: 3},
	{method: "GET", path: `/{db}/_all_docs?start_key="d2"&startkey="d4"`, status: 200, inBody: `"offset":3`, rows: 1},
	{method: "GET", path: `/{db}/_all_docs?endkey="d1"&end_key="d3"`, status: 200, rows: 3},
	{method: "GET", path: `/{db}/_all_docs?startkey=bad&start_key="d2"`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	// a descending feed never reads since
	{method: "GET", path: "/{db}/_changes?since=garbage&descending=true", status: 200, inBody: `"id":"d1"`},
	{method: "GET", path: "/{db}/_changes?since=garbage", status: 400, err: "bad_request", reason: "Malformed sequence supplied in 'since' parameter."},
	// open_revs of a missing doc: multipart unless JSON alone is asked for
	{method: "GET", path: `/{db}/nope?open_revs=["1-abc"]`, hdr: map[string]string{"Accept": "application/json"}, status: 200, raw: `[{"missing":"1-abc"}]` + "\n"},
	{method: "GET", path: `/{db}/nope?open_revs=["1-abc"]`, hdr: map[string]string{"Accept": "*/*"}, status: 200,
		inBodyAll: []string{"Content-Type: application/json; error=\"true\"\r\n\r\n{\"missing\":\"1-abc\"}"}},
	// a revs_diff keeps duplicates
	{method: "POST", path: "/{db}/_revs_diff", body: `{"nope":["1-b","1-a","1-b"]}`, status: 200, raw: `{"nope":{"missing":["1-b","1-a","1-b"]}}` + "\n"},
	// generation 0 parses (and is missing), printed as CouchDB prints it
	{method: "POST", path: "/{db}/_missing_revs", body: `{"d1":["0-1","00-x"]}`, status: 200, raw: `{"missing_revs":{"d1":["0-1","0-x"]}}` + "\n"},
	{method: "POST", path: "/{db}/_revs_diff", body: `{"zz":["0-1"]}`, status: 200, raw: `{"zz":{"missing":["0-1"]}}` + "\n"},
	// an empty hash is a rev: a replication may store one, a read and an
	// edit find it
	{method: "PUT", path: "/{db}/e1?new_edits=false", body: `{"_rev":"1-"}`, status: 201, raw: `{"ok":true,"id":"e1","rev":"1-"}` + "\n"},
	{method: "GET", path: "/{db}/e1?revs=true", status: 200, raw: `{"_id":"e1","_rev":"1-","_revisions":{"start":1,"ids":[""]}}` + "\n"},
	{method: "GET", path: "/{db}/e1?rev=1-", status: 200, raw: `{"_id":"e1","_rev":"1-"}` + "\n"},
	{method: "PUT", path: "/{db}/e1", body: `{"_rev":"1-","v":2}`, status: 201, inBody: `"rev":"2-86a729ab00a00b826d496eec8ee230c1"`},
	{method: "PUT", path: "/{db}/e2?new_edits=false", body: `{"_rev":"2-","_revisions":{"start":2,"ids":["","x"]}}`, status: 201, raw: `{"ok":true,"id":"e2","rev":"2-"}` + "\n"},
	{method: "POST", path: "/{db}/_revs_diff", body: `{"e1":["1-","2-"]}`, status: 200, raw: `{"e1":{"missing":["2-"]}}` + "\n"},
}

func TestFuzzFound(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/ff", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "ff", fuzzFoundSteps)
}

func TestFuzzFoundAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "ff", fuzzFoundSteps)
}
