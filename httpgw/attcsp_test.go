package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// attCSPSteps are CouchDB 3.5.2's Content-Security-Policy on attachments
// (asked 2026-12-07): "sandbox" on an attachment's GET, HEAD and single
// range (HTML, SVG, anything), none on a 304 or an error, none on the doc
// read with its attachments (JSON or multipart); [csp]
// attachments_header_value changes it and attachments_enable = "false"
// drops it at once, any other value keeps it; the keys are not listed in
// _config until written.
var attCSPSteps = []wireStep{
	{method: "PUT", path: "/{db}/d/x.html", hdr: map[string]string{"Content-Type": "text/html"},
		body: `<script>alert(document.cookie)</script>`, status: 201, keep: "r1"},
	{method: "PUT", path: "/{db}/d/x.svg?rev={r1}", hdr: map[string]string{"Content-Type": "image/svg+xml"},
		body: `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`, status: 201, keep: "r2"},
	{method: "PUT", path: "/{db}/d/x.bin?rev={r2}", hdr: map[string]string{"Content-Type": "application/octet-stream"},
		body: `abcdefghij`, status: 201, keep: "r3"},
	{method: "GET", path: "/{db}/d/x.html", status: 200, raw: `<script>alert(document.cookie)</script>`,
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html"}},
	{method: "GET", path: "/{db}/d/x.html", hdr: map[string]string{"Accept-Encoding": "gzip"}, status: 200,
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Encoding": "gzip"}},
	{method: "GET", path: "/{db}/d/x.svg", status: 200,
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "image/svg+xml"}},
	{method: "GET", path: "/{db}/d/x.bin", status: 200, raw: "abcdefghij",
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox"}},
	{method: "GET", path: "/{db}/d/x.bin?rev={r3}", status: 200, raw: "abcdefghij",
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox"}},
	{method: "HEAD", path: "/{db}/d/x.bin", status: 200,
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Length": "10"}},
	{method: "GET", path: "/{db}/d/x.bin", hdr: map[string]string{"Range": "bytes=0-3"}, status: 206, raw: "abcd",
		wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Range": "bytes 0-3/10"}},
	{method: "GET", path: "/{db}/d/x.bin", hdr: map[string]string{"If-None-Match": `"qSVXaULpSy71egZhAbSIdg=="`}, status: 304,
		wantHdr: map[string]string{"Content-Security-Policy": ""}},
	{method: "GET", path: "/{db}/d/nope", status: 404, err: "not_found", reason: "Document is missing attachment",
		wantHdr: map[string]string{"Content-Security-Policy": ""}},
	{method: "GET", path: "/{db}/d?attachments=true", hdr: map[string]string{"Accept": "application/json"}, status: 200,
		wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/d?attachments=true", hdr: map[string]string{"Accept": "multipart/related"}, status: 200,
		wantHdr: map[string]string{"Content-Security-Policy": ""}},
	{method: "GET", path: "/_node/_local/_config/csp", status: 200, raw: "{}\n"},
	// set at runtime
	{method: "PUT", path: "/_node/_local/_config/csp/attachments_header_value", body: `"sandbox allow-scripts"`, status: 200, raw: "\"\"\n"},
	{method: "GET", path: "/{db}/d/x.html", status: 200, wantHdr: map[string]string{"Content-Security-Policy": "sandbox allow-scripts"}},
	{method: "PUT", path: "/_node/_local/_config/csp/attachments_enable", body: `"false"`, status: 200},
	{method: "GET", path: "/{db}/d/x.html", status: 200, wantHdr: map[string]string{"Content-Security-Policy": ""}},
	{method: "HEAD", path: "/{db}/d/x.bin", status: 200, wantHdr: map[string]string{"Content-Security-Policy": ""}},
	{method: "GET", path: "/{db}/d/x.bin", hdr: map[string]string{"Range": "bytes=0-3"}, status: 206,
		wantHdr: map[string]string{"Content-Security-Policy": ""}},
	{method: "PUT", path: "/_node/_local/_config/csp/attachments_enable", body: `"garbage"`, status: 200, raw: "\"false\"\n"},
	{method: "GET", path: "/{db}/d/x.html", status: 200, wantHdr: map[string]string{"Content-Security-Policy": "sandbox allow-scripts"}},
	{method: "DELETE", path: "/_node/_local/_config/csp/attachments_enable", status: 200},
	{method: "DELETE", path: "/_node/_local/_config/csp/attachments_header_value", status: 200},
	{method: "GET", path: "/{db}/d/x.svg", status: 200, wantHdr: map[string]string{"Content-Security-Policy": "sandbox"}},
	{method: "GET", path: "/_node/_local/_config/csp", status: 200, raw: "{}\n"},
}

// attCSPSetteeSteps are where settee sends more than CouchDB, on purpose
// (docs/api.md): X-Content-Type-Options: nosniff on every attachment
// answer with its data's headers, whatever [csp] says, and the policy on
// a multi-range answer too (CouchDB's multipart/byteranges has none).
var attCSPSetteeSteps = []wireStep{
	{method: "GET", path: "/{db}/d/x.html", status: 200, wantHdr: map[string]string{"X-Content-Type-Options": "nosniff"}},
	{method: "HEAD", path: "/{db}/d/x.bin", status: 200, wantHdr: map[string]string{"X-Content-Type-Options": "nosniff"}},
	{method: "GET", path: "/{db}/d/x.bin", hdr: map[string]string{"Range": "bytes=0-3"}, status: 206,
		wantHdr: map[string]string{"X-Content-Type-Options": "nosniff"}},
	{method: "GET", path: "/{db}/d/x.bin", hdr: map[string]string{"Range": "bytes=0-1,4-5"}, status: 206,
		wantHdr: map[string]string{"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}},
	{method: "GET", path: "/{db}/d?attachments=true", hdr: map[string]string{"Accept": "application/json"}, status: 200,
		wantHdr: map[string]string{"X-Content-Type-Options": ""}},
	{method: "PUT", path: "/_node/_local/_config/csp/attachments_enable", body: `"false"`, status: 200},
	{method: "GET", path: "/{db}/d/x.html", status: 200,
		wantHdr: map[string]string{"X-Content-Type-Options": "nosniff", "Content-Security-Policy": ""}},
	{method: "DELETE", path: "/_node/_local/_config/csp/attachments_enable", status: 200},
}

func TestAttachmentCSP(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/acsp", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "acsp", attCSPSteps)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "acsp", attCSPSetteeSteps)
}

func TestAttachmentCSPAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "acsp", attCSPSteps)
}
