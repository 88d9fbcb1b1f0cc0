package httpgw_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

func gz(parts ...string) []byte {
	var b bytes.Buffer
	for _, p := range parts { // one gzip member each
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(p))
		_ = w.Close()
	}
	return b.Bytes()
}

// gzipCase is one request with a Content-Encoding and what Apache CouchDB
// 3.5.2 answers it (asked 2026-12-01; TestGzipBodiesAsCouchDB asks again
// when a CouchDB is at hand).
type gzipCase struct {
	name, method, path, encoding string
	body                         []byte
	status                       int
	err, reason                  string // "" for a success
	// then, when set: GET this path and find this in the answer
	check, want string
}

var bigDoc = `{"x":"` + strings.Repeat("a", 9000000) + `"}`

var gzipCases = []gzipCase{
	{name: "doc", method: "PUT", path: "/{db}/d1", encoding: "gzip", body: gz(`{"a":1}`), status: 201,
		check: "/{db}/d1", want: `"a":1`},
	{name: "two members", method: "PUT", path: "/{db}/tm", encoding: "gzip", body: gz(`{"a":`, `3}`), status: 201,
		check: "/{db}/tm", want: `"a":3`},
	{name: "spaces around gzip", method: "PUT", path: "/{db}/sp", encoding: " gzip ", body: gz(`{"a":1}`), status: 201},
	{name: "identity", method: "PUT", path: "/{db}/id", encoding: "identity", body: []byte(`{"a":1}`), status: 201},
	{name: "post doc", method: "POST", path: "/{db}", encoding: "gzip", body: gz(`{"_id":"p1","b":2}`), status: 201,
		check: "/{db}/p1", want: `"b":2`},
	{name: "bulk docs", method: "POST", path: "/{db}/_bulk_docs", encoding: "gzip",
		body: gz(`{"docs":[{"_id":"x"},{"_id":"y","v":7}]}`), status: 201, check: "/{db}/y", want: `"v":7`},
	{name: "local doc", method: "PUT", path: "/{db}/_local/l1", encoding: "gzip", body: gz(`{"c":3}`), status: 201,
		check: "/{db}/_local/l1", want: `"c":3`},
	{name: "all_docs keys", method: "POST", path: "/{db}/_all_docs", encoding: "gzip", body: gz(`{"keys":["d1"]}`), status: 200},
	{name: "revs_diff", method: "POST", path: "/{db}/_revs_diff", encoding: "gzip", body: gz(`{"d1":["1-abc"]}`), status: 200},
	{name: "security", method: "PUT", path: "/{db}/_security", encoding: "gzip",
		body: gz(`{"members":{"names":["bob"],"roles":[]},"admins":{"names":[],"roles":[]}}`), status: 200,
		check: "/{db}/_security", want: `"bob"`},
	{name: "corrupt", method: "PUT", path: "/{db}/d2", encoding: "gzip", body: []byte("\x1f\x8b\x08\x00garbage"),
		status: 400, err: "bad_request", reason: "Request body is not properly gzipped."},
	{name: "not gzip", method: "PUT", path: "/{db}/d3", encoding: "gzip", body: []byte(`{"a":1}`),
		status: 400, err: "bad_request", reason: "Request body is not properly gzipped."},
	{name: "empty", method: "POST", path: "/{db}/_bulk_docs", encoding: "gzip", body: nil,
		status: 400, err: "bad_request", reason: "Request body is not properly gzipped."},
	{name: "trailing garbage", method: "PUT", path: "/{db}/tg", encoding: "gzip", body: append(gz(`{"a":2}`), "xx"...),
		status: 400, err: "bad_request", reason: "Request body is not properly gzipped."},
	{name: "truncated", method: "PUT", path: "/{db}/tr", encoding: "gzip", body: gz(`{"a":2,"b":"` + strings.Repeat("z", 100) + `"}`)[:20],
		status: 400, err: "bad_request", reason: "Request body is not properly gzipped."},
	{name: "deflate", method: "PUT", path: "/{db}/d4", encoding: "deflate", body: []byte(`{"a":1}`),
		status: 415, err: "bad_content_type", reason: "deflate is not a supported content encoding."},
	{name: "br", method: "PUT", path: "/{db}/d5", encoding: "br", body: []byte(`{"a":1}`),
		status: 415, err: "bad_content_type", reason: "br is not a supported content encoding."},
	{name: "upper case", method: "PUT", path: "/{db}/d6", encoding: "GZIP", body: gz(`{"a":1}`),
		status: 415, err: "bad_content_type", reason: "GZIP is not a supported content encoding."},
	{name: "a list", method: "PUT", path: "/{db}/d7", encoding: "gzip, identity", body: gz(`{"a":1}`),
		status: 415, err: "bad_content_type", reason: "gzip, identity is not a supported content encoding."},
	// 8.8 KB that inflates past max_document_size (8 MB)
	{name: "doc inflating past the limit", method: "PUT", path: "/{db}/big", encoding: "gzip", body: gz(bigDoc),
		status: 413, err: "document_too_large", reason: ""},
	{name: "bulk doc inflating past the limit", method: "POST", path: "/{db}/_bulk_docs", encoding: "gzip",
		body:   gz(`{"docs":[{"_id":"b","x":"` + strings.Repeat("a", 9000000) + `"}]}`),
		status: 413, err: "document_too_large", reason: "b"},
}

// gzipSteps are c's request and, when c says so, the read that checks it.
func gzipSteps(c gzipCase) []wireStep {
	steps := []wireStep{{method: c.method, path: c.path, body: string(c.body), hdr: map[string]string{"Content-Encoding": c.encoding},
		status: c.status, err: c.err, reason: c.reason}}
	if c.check != "" {
		steps = append(steps, wireStep{method: "GET", path: c.check, status: 200, inBody: c.want})
	}
	return steps
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// Request bodies sent gzip-encoded (kivik's default) are read as CouchDB
// reads them, wherever a body is read; bad encodings get CouchDB's errors.
func TestGzipBodies(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, c := range gzipCases {
		t.Run(c.name, func(t *testing.T) {
			db := "gz-" + strings.ReplaceAll(c.name, " ", "-")
			mustCall(t, s, 201, "PUT", "/"+db, nil, nil)
			runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, db, gzipSteps(c))
		})
	}
}

// The same requests against a real Apache CouchDB 3.5.2, when one is at
// hand: the table says what CouchDB answers.
func TestGzipBodiesAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	for _, c := range gzipCases {
		t.Run(c.name, func(t *testing.T) {
			db := "gz-" + strings.ReplaceAll(c.name, " ", "-")
			runSteps(t, cs.URL, cs.User, cs.Password, "", []wireStep{{method: "PUT", path: "/" + db, status: 201}})
			runSteps(t, cs.URL, cs.User, cs.Password, db, gzipSteps(c))
		})
	}
}

// A body that inflates past the request size limit is a 413 once the
// limit is passed: the bytes inflated are bounded by it, whatever the
// body would inflate to, and nothing is written.
func TestGzipBombIsBoundedByTheRequestLimit(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, func(c *node.Config) { c.MaxRequestSize = 1 << 20 })
	mustCall(t, s, 201, "PUT", "/bomb", nil, nil)
	// 64 MB of zeros in a 64 KB body; then bodies just past and within the limit
	var bomb bytes.Buffer
	w, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	_, _ = w.Write([]byte(`{"docs":[{"_id":"a","x":"`))
	zeros := bytes.Repeat([]byte("0"), 1<<20)
	for range 64 {
		_, _ = w.Write(zeros)
	}
	_, _ = w.Write([]byte(`"}]}`))
	_ = w.Close()
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"inflates to 64 MB", bomb.Bytes(), 413},
		{"inflates to 1 MB + 1", gz(`{"docs":[{"_id":"b","x":"` + strings.Repeat("0", 1<<20) + `"}]}`), 413},
		{"within the limit", gz(`{"docs":[{"_id":"c","x":"` + strings.Repeat("0", 1<<19) + `"}]}`), 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := s.NewRequest(t, "POST", "/bomb/_bulk_docs", tc.body)
			req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Encoding", "gzip")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, clip(b))
			}
			if tc.status == 413 && !strings.Contains(string(b), `"error":"too_large"`) {
				t.Fatalf("answer %s, want too_large", b)
			}
		})
	}
	var info struct {
		DocCount int `json:"doc_count"`
	}
	mustCall(t, s, 200, "GET", "/bomb", nil, &info)
	if info.DocCount != 1 {
		t.Fatalf("doc_count %d, want 1 (only the body within the limit)", info.DocCount)
	}
}
