package httpgw_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// The headers of CouchDB's answers (asked 2026-12-02), found by the
// differential tester: Cache-Control: must-revalidate goes with JSON
// answers only (not a 304, a redirect, a multipart body, a multi-range
// attachment or what _show/_list/_update send); a doc's ETag only when no
// meta member (revs_info, local_seq, conflicts that exist) is rendered;
// POST /db has no ETag, batch=ok neither ETag nor Location; Locations are
// encoded as couch_util:url_encode does.
var headerSteps = []wireStep{
	{method: "PUT", path: "/{db}/doc1", body: `{"a":1}`, status: 201, keep: "r1",
		wantHdr: map[string]string{"ETag": `"{r1}"`, "Cache-Control": "must-revalidate"}},
	{method: "GET", path: "/{db}/doc1", status: 200,
		wantHdr: map[string]string{"ETag": `"{r1}"`, "Cache-Control": "must-revalidate"}},
	{method: "GET", path: "/{db}/doc1", hdr: map[string]string{"If-None-Match": `"{r1}"`}, status: 304,
		wantHdr: map[string]string{"ETag": `"{r1}"`, "Cache-Control": ""}},
	{method: "GET", path: "/{db}/doc1?revs_info=true", status: 200, inBody: `"_revs_info"`, wantHdr: map[string]string{"ETag": ""}},
	{method: "GET", path: "/{db}/doc1?revs_info=true", hdr: map[string]string{"If-None-Match": `"{r1}"`}, status: 200},
	{method: "GET", path: "/{db}/doc1?local_seq=true", status: 200, wantHdr: map[string]string{"ETag": ""}},
	{method: "GET", path: "/{db}/doc1?meta=true", status: 200, wantHdr: map[string]string{"ETag": ""}},
	{method: "GET", path: "/{db}/doc1?conflicts=true&deleted_conflicts=true&revs=true", status: 200,
		wantHdr: map[string]string{"ETag": `"{r1}"`}},
	// a rev read renders no meta at all
	{method: "GET", path: "/{db}/doc1?rev={r1}&meta=true&local_seq=true", status: 200,
		raw: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}` + "\n", wantHdr: map[string]string{"ETag": `"{r1}"`}},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[
		{"_id":"c","_rev":"1-aaaa","v":"a"},{"_id":"c","_rev":"1-bbbb","v":"b"},
		{"_id":"c","_rev":"2-cccc","_revisions":{"start":2,"ids":["cccc","aaaa"]},"_deleted":true}]}`, status: 201},
	{method: "GET", path: "/{db}/c?deleted_conflicts=true", status: 200, inBody: `"_deleted_conflicts":["2-cccc"]`,
		wantHdr: map[string]string{"ETag": ""}},
	{method: "GET", path: "/{db}/c?conflicts=true", status: 200, wantHdr: map[string]string{"ETag": `"1-bbbb"`}},
	{method: "GET", path: "/{db}/c?rev=1-aaaa&conflicts=true", status: 200, raw: `{"_id":"c","_rev":"1-aaaa","v":"a"}` + "\n"},
	// latest=true opens the winner, whatever the rev
	{method: "GET", path: "/{db}/c?rev=1-aaaa&latest=true", status: 200, raw: `{"_id":"c","_rev":"1-bbbb","v":"b"}` + "\n",
		wantHdr: map[string]string{"ETag": `"1-bbbb"`}},
	// open_revs as parse_doc_query reads it; an empty list is none
	{method: "GET", path: "/{db}/c?open_revs=[1]", status: 400, err: "bad_request", reason: "Invalid rev format"},
	{method: "GET", path: `/{db}/c?open_revs="x"`, status: 400, err: "bad_request", reason: "Invalid list of revisions"},
	{method: "GET", path: "/{db}/c?open_revs=bad", status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "GET", path: "/{db}/c?open_revs=[]", status: 200, raw: `{"_id":"c","_rev":"1-bbbb","v":"b"}` + "\n",
		wantHdr: map[string]string{"ETag": `"1-bbbb"`}},
	{method: "GET", path: `/{db}/c?open_revs=["1-aaaa","1-","2-abc"]`, hdr: map[string]string{"Accept": "application/json"}, status: 200,
		raw: `[{"ok":{"_id":"c","_rev":"1-aaaa","v":"a"}},{"missing":"1-"},{"missing":"2-abc"}]` + "\n"},
	{method: "GET", path: "/{db}/c?open_revs=all", hdr: map[string]string{"Accept": "multipart/mixed"}, status: 200,
		wantHdr: map[string]string{"Cache-Control": ""}},
	{method: "GET", path: "/{db}/c?open_revs=all", hdr: map[string]string{"Accept": "application/json"}, status: 200,
		wantHdr: map[string]string{"Cache-Control": "must-revalidate"}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"c"}]}`, hdr: map[string]string{"Accept": "multipart/mixed"},
		status: 200, wantHdr: map[string]string{"Cache-Control": ""}},
	{method: "POST", path: "/{db}/_bulk_get", body: `{"docs":[{"id":"c"}]}`, status: 200,
		wantHdr: map[string]string{"Cache-Control": "must-revalidate"}},
	// writes
	{method: "POST", path: "/{db}", body: `{"_id":"p1"}`, hdr: map[string]string{"X-Forwarded-Host": "proxy.example"}, status: 201,
		wantHdr: map[string]string{"ETag": "", "Location": "http://proxy.example/{db}/p1"}},
	{method: "POST", path: "/{db}?batch=ok", body: `{"_id":"b1"}`, status: 202, wantHdr: map[string]string{"ETag": "", "Location": ""}},
	{method: "PUT", path: "/{db}/b2?batch=ok", body: `{}`, status: 202, wantHdr: map[string]string{"ETag": "", "Location": ""}},
	{method: "PUT", path: "/{db}/a~b%20c", body: `{}`, hdr: map[string]string{"X-Forwarded-Host": "proxy.example"}, status: 201,
		wantHdr: map[string]string{"Location": "http://proxy.example/{db}/a%7Eb%20c"}},
	{method: "PUT", path: "/{db}/_design/d/att.bin", body: "hi", status: 201,
		hdr:     map[string]string{"Content-Type": "application/octet-stream", "X-Forwarded-Host": "proxy.example"},
		wantHdr: map[string]string{"Location": "http://proxy.example/{db}/_design%2Fd/att.bin"}},
	{method: "PUT", path: "/{db}/new/deep/name.bin", body: "abcdef", status: 201,
		hdr:     map[string]string{"Content-Type": "application/octet-stream", "X-Forwarded-Host": "proxy.example"},
		wantHdr: map[string]string{"Location": "http://proxy.example/{db}/new/deep%2Fname.bin"}},
	// attachments: the handler's headers on a whole or single-range
	// answer, none of them on an error or a multipart one
	{method: "GET", path: "/{db}/new/deep/name.bin", status: 200, raw: "abcdef",
		wantHdr: map[string]string{"Cache-Control": "must-revalidate", "Accept-Ranges": "bytes"}},
	{method: "GET", path: "/{db}/new/deep/name.bin", hdr: map[string]string{"Range": "bytes=1-2"}, status: 206, raw: "bc",
		wantHdr: map[string]string{"Cache-Control": "must-revalidate", "Accept-Ranges": "bytes"}},
	{method: "GET", path: "/{db}/new/deep/name.bin", hdr: map[string]string{"Range": "bytes=100-200"}, status: 416,
		wantHdr: map[string]string{"Cache-Control": "must-revalidate", "Accept-Ranges": "", "ETag": ""}},
	{method: "GET", path: "/{db}/new/deep/name.bin", hdr: map[string]string{"Range": "bytes=0-0,2-3"}, status: 206,
		wantHdr: map[string]string{"Cache-Control": "", "Accept-Ranges": "", "ETag": ""}},
	{method: "GET", path: "/{db}/new?attachments=true", hdr: map[string]string{"Accept": "multipart/related"}, status: 200,
		wantHdr: map[string]string{"Cache-Control": ""}},
	// what a design doc's functions send
	{method: "PUT", path: "/{db}/_design/v", status: 201, body: `{
		"views":{"by_k":{"map":"function(doc){ emit(doc._id, null); }"}},
		"shows":{"s":"function(doc, req){ return {body: 'shown'}; }"},
		"lists":{"l":"function(head, req){ send('listed'); }"},
		"updates":{"u":"function(doc, req){ return [null, 'updated']; }"}}`},
	{method: "GET", path: "/{db}/_design/v/_show/s/doc1", status: 200, raw: "shown", wantHdr: map[string]string{"Cache-Control": ""}},
	{method: "GET", path: "/{db}/_design/v/_show/s/nope", status: 200, raw: "shown", wantHdr: map[string]string{"Cache-Control": ""}},
	{method: "GET", path: "/{db}/_design/v/_list/l/by_k", status: 200, raw: "listed", wantHdr: map[string]string{"Cache-Control": ""}},
	{method: "POST", path: "/{db}/_design/v/_update/u", status: 200, raw: "updated", wantHdr: map[string]string{"Cache-Control": ""}},
	{method: "GET", path: "/{db}/_design/v/_show/nope/doc1", status: 404, wantHdr: map[string]string{"Cache-Control": "must-revalidate"}},
}

func TestAnswerHeaders(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/hd", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "hd", headerSteps)
	checkRedirectHeaders(t, s.URL, testserver.AdminUser, testserver.AdminPassword)
}

func TestAnswerHeadersAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	runSteps(t, cs.URL, cs.User, cs.Password, "", []wireStep{{method: "PUT", path: "/hd", status: 201}})
	runSteps(t, cs.URL, cs.User, cs.Password, "hd", headerSteps)
	checkRedirectHeaders(t, cs.URL, cs.User, cs.Password)
}

// checkRedirectHeaders: the redirect of an encoded slash in a design doc's
// id (headerSteps wrote _design/d) is no JSON answer: no Cache-Control.
func checkRedirectHeaders(t *testing.T, base, user, pw string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/hd/_design%2Fd", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pw)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 || resp.Header.Get("Cache-Control") != "" || !strings.HasSuffix(resp.Header.Get("Location"), "/hd/_design/d") {
		t.Fatalf("GET /hd/_design%%2Fd: %d, Cache-Control %q, Location %q; want 301, none, …/hd/_design/d",
			resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Location"))
	}
}
