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
	// every ?rev= a read or a PUT is given must be a rev, an empty one too
	{method: "GET", path: "/{db}/d1?rev=", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/d1?rev=&latest=true", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "PUT", path: "/{db}/d1?rev=", body: `{}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "PUT", path: "/{db}/d1?rev=1-967a00dff5e02add41819138abb3284d&rev=", body: `{}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "DELETE", path: "/{db}/d1?rev=", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/d1/a.bin?rev=", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/d1?rev=bad&open_revs=all", status: 400, err: "bad_request", reason: "Invalid rev format"},
	// a _rev of "" is no rev: every write refuses it
	{method: "PUT", path: "/{db}/e1", body: `{"_rev":""}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"e2","_rev":""}]}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "PUT", path: "/{db}/_local/e3", body: `{"_rev":""}`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	// atts_since as parse_doc_query reads it
	{method: "GET", path: `/{db}/d1?atts_since=["bad"]`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: `/{db}/d1?atts_since=[5]`, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: `/{db}/d1?atts_since="x"`, status: 400, err: "bad_request", reason: "Invalid list of revisions"},
	{method: "GET", path: `/{db}/d1?atts_since=bad`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	// _bulk_get's per-doc parameters are the items', not the query's
	{method: "POST", path: "/{db}/_bulk_get?revs=true&w=1&rev=x", body: `{"docs":[{"id":"d1"}]}`,
		status: 400, err: "bad_request", reason: `"w" query parameter is not acceptable`},
	{method: "POST", path: "/{db}/_bulk_get?atts_since=[]", body: `{"docs":[{"id":"d1"}]}`,
		status: 400, err: "bad_request", reason: `"atts_since" query parameter is not acceptable`},
	// an unknown _name is a doc id: its parameters are read, it is missing,
	// only its writes are illegal ids
	{method: "GET", path: "/{db}/_bad?rev=bad", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: "/{db}/_bad", status: 404, err: "not_found", reason: "missing"},
	{method: "GET", path: "/{db}/_bad/a?rev=bad", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "DELETE", path: "/{db}/_bad", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/_bad/a", status: 404, err: "not_found", reason: "missing"},
	{method: "PATCH", path: "/{db}/_bad", status: 405, err: "method_not_allowed", reason: "Only DELETE,GET,HEAD,POST,PUT,COPY allowed"},
	{method: "PUT", path: "/{db}/_bad/a", body: "x", status: 400, err: "illegal_docid", reason: "Only reserved document ids may start with underscore."},
	// an attachment's DELETE without a rev: the doc, the attachment, then a conflict
	{method: "DELETE", path: "/{db}/nodoc/a", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/d1/zz", status: 404, err: "not_found", reason: "Document is missing attachment"},
	// COPY reads its source's rev and its Destination's before the source
	{method: "COPY", path: "/{db}/nodoc", hdr: map[string]string{"Destination": "d3?rev=bad"}, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "COPY", path: "/{db}/nodoc?rev=", hdr: map[string]string{"Destination": "d3"}, status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "COPY", path: "/{db}/nodoc", hdr: map[string]string{"Destination": "d3"}, status: 404, err: "not_found", reason: "missing"},
	// an attachment on a rev that is not there
	{method: "PUT", path: "/{db}/d1/a.bin?rev=1-0123456789abcdef0123456789abcdef", body: "x",
		hdr: map[string]string{"Content-Type": "application/octet-stream"}, status: 409, err: "not_found", reason: "missing_rev"},
	{method: "PUT", path: "/{db}/nodoc/a.bin?rev=1-abc", body: "x",
		hdr: map[string]string{"Content-Type": "application/octet-stream"}, status: 409, err: "not_found", reason: "missing_rev"},
	{method: "GET", path: "/{db}/d1/a.bin?rev=1-", status: 404, err: "not_found", reason: "missing"},
	// POST /db/doc: the HTML form upload, its Referer checked first
	{method: "POST", path: "/{db}/_nope", body: `{}`, status: 400, err: "bad_request", reason: "Referer header required."},
	{method: "POST", path: "/{db}/d1", body: `{}`, hdr: map[string]string{"Referer": "http://elsewhere.example/"},
		status: 400, err: "bad_request", reason: "Referer header must match host."},
	{method: "POST", path: "/{db}/_nope", body: `{}`, hdr: formHdr(""),
		status: 400, err: "illegal_docid", reason: "Only reserved document ids may start with underscore."},
	{method: "POST", path: "/{db}/d1", body: `{}`, hdr: formHdr("application/json"),
		status: 415, err: "bad_content_type", reason: "Content-Type must be multipart/form-data"},
	{method: "POST", path: "/{db}/form", hdr: formHdr("multipart/form-data; boundary=B"), body: "--B\r\n" +
		"Content-Disposition: form-data; name=\"_doc\"\r\n\r\n{\"b\":2}\r\n--B\r\n" +
		"Content-Disposition: form-data; name=\"_attachments\"; filename=\"f.bin\"\r\nContent-Type: application/x-test\r\n\r\n" +
		"abc\r\n--B--\r\n", status: 201, keep: "f1", inBody: `"rev":"1-8ae738a86256f0b34f8e9e5ace23e087"`},
	{method: "GET", path: "/{db}/form", status: 200, inBody: `"b":2,"_attachments":{"f.bin":{"content_type":"application/x-test","revpos":1,"digest":"md5-kAFQmDzST7DWlj99KOF/cg==","length":3,"stub":true}}`},
	{method: "POST", path: "/{db}/form", hdr: formHdr("multipart/form-data; boundary=B"), body: "--B\r\n" +
		"Content-Disposition: form-data; name=\"_rev\"\r\n\r\n{f1}\r\n--B\r\n" +
		"Content-Disposition: form-data; name=\"_attachments\"; filename=\"g.bin\"\r\n\r\n" +
		"defg\r\n--B--\r\n", status: 201, keep: "f2", wantHdr: map[string]string{"ETag": `"{f2}"`, "Location": ""}},
	// a file part without a Content-Type is no file (mochiweb's parser)
	{method: "GET", path: "/{db}/form", status: 200, inBody: `"_rev":"2-dc74071514729d35017e6a23c17bd84a","b":2,"_attachments":{"f.bin":{`},
	{method: "POST", path: "/{db}/form", hdr: formHdr("multipart/form-data; boundary=B"), body: "--B\r\n" +
		"Content-Disposition: form-data; name=\"_rev\"\r\n\r\n{f2}\r\n--B\r\n" +
		"Content-Disposition: form-data; name=\"_attachments\"; filename=\"g.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
		"defg\r\n--B--\r\n", status: 201},
	{method: "GET", path: "/{db}/form", status: 200, inBodyAll: []string{`"g.bin":{"content_type":"application/octet-stream","revpos":3`, `"f.bin":{`}},
}

// formHdr are the headers of a form posted from the server's own page
// (X-Forwarded-Host names the host the Referer must match), with the
// given Content-Type.
func formHdr(ct string) map[string]string {
	h := map[string]string{"X-Forwarded-Host": "couch.example", "Referer": "http://couch.example/_utils/"}
	if ct != "" {
		h["Content-Type"] = ct
	}
	return h
}

func TestBulkWire(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/bw", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "bw", bulkWireSteps)
}

func TestBulkWireAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "bw", bulkWireSteps)
}
