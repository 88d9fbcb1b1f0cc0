package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// _bulk_get's item errors and the revs CouchDB's parse_rev takes (asked
// 2026-12-02), found by the differential tester: an item CouchDB cannot
// read is an error in the results (its id and the rev at fault as sent,
// null where there is none), not a 400; a rev is digits, a dash and any
// hash, so "2-" or "0-x" is no bad rev but one no doc has (a conflict to
// edit, missing to read); a bad _rev fails all of _bulk_docs in either
// mode; an attachment written on a rev that is not there is CouchDB's
// 409 missing_rev.
var bulkWireSteps = []wireStep{
	{method: "PUT", path: "/{db}/d1", body: `{}`, status: 201},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"rev":"1-x"}]}`, status: 200,
		inBodyAll: []string{`{"results":[{"id":null,"docs":[{"error":{`, `"id":null`, `"rev":null`, `"error":"bad_request"`, `"reason":"document id missed"`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[1,null]}`, status: 200,
		inBodyAll: []string{`"id":null`, `"id":null`, `"rev":null`, `"error":"bad_request"`, `"reason":"document must be a JSON object"`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":""}]}`, status: 200,
		inBodyAll: []string{`"id":""`, `"rev":null`, `"error":"illegal_docid"`, `"reason":"Document id must not be empty"`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"_bad"}]}`, status: 200,
		inBodyAll: []string{`"id":"_bad"`, `"rev":null`, `"error":"illegal_docid"`, `"reason":"Only reserved document ids may start with underscore."`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"d1","rev":5}]}`, status: 200,
		inBodyAll: []string{`"id":"d1"`, `"rev":5`, `"error":"bad_request"`, `"reason":"Invalid rev format"`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"d1","atts_since":"x"}]}`, status: 200,
		inBodyAll: []string{`"id":"d1"`, `"rev":"x"`, `"error":"bad_request"`, `"reason":"att_since value must be array of revs."`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"d1","atts_since":["bad"]}]}`, status: 200,
		inBodyAll: []string{`"id":"d1"`, `"rev":"bad"`, `"error":"bad_request"`, `"reason":"Invalid rev format"`}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"d1","rev":"1-"},{"id":"nope"}]}`, status: 200,
		inBodyAll: []string{`"id":"d1"`, `"rev":"1-"`, `"error":"not_found"`, `"reason":"missing"`, `"id":"nope"`, `"id":"nope"`, `"rev":"undefined"`, `"error":"not_found"`, `"reason":"missing"`}},
	// revs parse_rev takes
	{method: "PUT", path: "/{db}/d1", body: `{"_rev":"2-"}`, status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "PUT", path: "/{db}/d1?rev=0-1", body: `{}`, status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "DELETE", path: "/{db}/d1?rev=2-", status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "GET", path: "/{db}/d1?rev=2-", status: 404, err: "not_found", reason: "missing"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"d1","_rev":"1-"},{"_id":"d1","_rev":"0-abc"}]}`, status: 201,
		raw: `[{"id":"d1","error":"conflict","reason":"Document update conflict."},{"id":"d1","error":"conflict","reason":"Document update conflict."}]` + "\n"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"ne","_rev":"bad"}]}`,
		status: 400, err: "bad_request", reason: "Invalid rev format"},
	// an attachment on a rev that is not there
	{method: "PUT", path: "/{db}/d1/a.bin?rev=1-0123456789abcdef0123456789abcdef", body: "x",
		hdr: map[string]string{"Content-Type": "application/octet-stream"}, status: 409, err: "not_found", reason: "missing_rev"},
	{method: "PUT", path: "/{db}/nodoc/a.bin?rev=1-abc", body: "x",
		hdr: map[string]string{"Content-Type": "application/octet-stream"}, status: 409, err: "not_found", reason: "missing_rev"},
	{method: "GET", path: "/{db}/d1/a.bin?rev=1-", status: 404, err: "not_found", reason: "missing"},
}

func TestBulkWire(t *testing.T) {
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/bw", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "bw", bulkWireSteps)
}

func TestBulkWireAsCouchDB(t *testing.T) { runOnCouchDB(t, "bw", bulkWireSteps) }
