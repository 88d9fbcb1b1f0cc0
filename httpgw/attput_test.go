package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// How CouchDB reads a doc's _attachments and a multipart/related PUT
// (asked 2026-12-02), found by the differential tester: a member that is
// not an object is dropped; one that is neither a stub nor follows must
// have base64 data ("Invalid attachment data for x"); stub and follows
// count when true, any other value is no flag; a part of another length
// than its entry says is "attachment shorter/longer than expected"; only
// a Content-Type beginning "multipart/related;" is multipart, a bare
// "multipart/related" body is read as JSON.
var attPutSteps = []wireStep{
	{method: "PUT", path: "/{db}/j", body: `{"_attachments":{"x":{"content_type":"text/plain","data":"not base64!"}}}`,
		status: 400, err: "bad_request", reason: "Invalid attachment data for x"},
	{method: "PUT", path: "/{db}/j", body: `{"_attachments":{"x":{"content_type":"text/plain"}}}`,
		status: 400, err: "bad_request", reason: "Invalid attachment data for x"},
	{method: "PUT", path: "/{db}/j", body: `{"_attachments":{"x":{"data":5}}}`,
		status: 400, err: "bad_request", reason: "Invalid attachment data for x"},
	{method: "PUT", path: "/{db}/j", body: `{"_attachments":{"x":{"stub":"yes"}}}`,
		status: 400, err: "bad_request", reason: "Invalid attachment data for x"},
	// the rev of an empty doc: the attachment is gone
	{method: "PUT", path: "/{db}/j", body: `{"_attachments":{"x":"nope"}}`, status: 201,
		inBody: `"rev":"1-967a00dff5e02add41819138abb3284d"`},
	{method: "GET", path: "/{db}/j", status: 200, raw: `{"_id":"j","_rev":"1-967a00dff5e02add41819138abb3284d"}` + "\n"},
	{method: "PUT", path: "/{db}/j", body: `{"_attachments":{"x":{"data":"aGk="}}}`, status: 409, err: "conflict", reason: "Document update conflict."},
	{method: "PUT", path: "/{db}/j2", body: `{"_attachments":{"x":{"data":"aGk="},"x":1,"y":null,"z":[1]}}`, status: 201,
		inBody: `"rev":"1-967a00dff5e02add41819138abb3284d"`},
	{method: "PUT", path: "/{db}/j3", body: `{"_attachments":{"x":{"stub":false,"data":"aGk="}}}`, status: 201,
		inBody: `"rev":"1-615dabe1edc64d6481b1aa9cbb51be54"`},
	{method: "PUT", path: "/{db}/j4", body: `{"_attachments":"x"}`,
		status: 400, err: "doc_validation", reason: "Bad special document member: _attachments"},
	// multipart
	{method: "PUT", path: "/{db}/mp1", hdr: map[string]string{"Content-Type": `multipart/related;boundary="abc"`},
		body: "--abc\r\nContent-Type: application/json\r\n\r\n" +
			`{"_attachments":{"f":{"follows":true,"length":9}}}` + "\r\n--abc\r\n\r\nhello\r\n--abc--",
		status: 400, err: "bad_request", reason: "attachment shorter than expected"},
	{method: "PUT", path: "/{db}/mp1", hdr: map[string]string{"Content-Type": `multipart/related;boundary="abc"`},
		body: "--abc\r\nContent-Type: application/json\r\n\r\n" +
			`{"_attachments":{"f":{"follows":true,"length":3}}}` + "\r\n--abc\r\n\r\nhello\r\n--abc--",
		status: 400, err: "bad_request", reason: "attachment longer than expected"},
	{method: "PUT", path: "/{db}/mp2", hdr: map[string]string{"Content-Type": "multipart/related"}, body: "garbage",
		status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/{db}/mp3", hdr: map[string]string{"Content-Type": "multipart/related"}, body: `{"a":1}`,
		status: 201, inBody: `"rev":"1-23202479633c2b380f79507a776743d5"`},
	{method: "PUT", path: "/{db}/mp4", hdr: map[string]string{"Content-Type": "Multipart/Related; boundary=x"}, body: `{"a":1}`,
		status: 201, inBody: `"rev":"1-23202479633c2b380f79507a776743d5"`},
}

func TestAttachmentPuts(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/ap", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "ap", attPutSteps)
}

func TestAttachmentPutsAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "ap", attPutSteps)
}
