package httpgw_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// rowAttDocs are docs with revs and attachment revpos the test sets
// itself (new_edits=false), so that the same docs stand on any server: a
// doc with a binary and a text attachment, one whose attachments date
// from two revisions, a deleted doc, a conflicted one whose losing leaf
// has an attachment, and one with an empty attachment.
const rowAttDocs = `{"new_edits":false,"docs":[
 {"_id":"a","_rev":"1-aaaa","v":1,"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","revpos":1}}},
 {"_id":"b","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"v":2,"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","revpos":1}}},
 {"_id":"c","_rev":"2-cccc","_revisions":{"start":2,"ids":["cccc","aaaa"]},"_deleted":true},
 {"_id":"d","_rev":"2-aaaa","_revisions":{"start":2,"ids":["aaaa","root"]},"v":1,"_attachments":{"x.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","revpos":2}}},
 {"_id":"d","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","root"]},"v":2},
 {"_id":"e","_rev":"1-eeee","v":5,"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","revpos":1}}}]}`

// attStep is one request and Apache CouchDB 3.5.2's answer to it (asked
// 2026-12-01), as normRowJSON makes it comparable: sequences, and the
// digest and encoded length of gzipped text (zlib's bytes, not Go's),
// are SEQ and GZIP; _changes rows are in id order (their order follows
// the shards').
type attStep struct {
	method, path, body string
	hdr                map[string]string
	status             int
	want               string
}

var rowAttSteps = []attStep{
	// _all_docs: data inline with include_docs, with no length; the
	// encoding with att_encoding_info; nothing without include_docs;
	// atts_since is not read; a deleted doc's row has "doc":null
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&attachments=true", status: 200,
		want: `{"offset":0,"rows":[{"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","key":"a","value":{"rev":"1-aaaa"}},{"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","key":"b","value":{"rev":"2-bbbb"}},{"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","key":"d","value":{"rev":"2-bbbb"}},{"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","revpos":1}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","key":"e","value":{"rev":"1-eeee"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&attachments=true&att_encoding_info=true&keys=%5B%22a%22,%22c%22,%22zz%22%5D", status: 200,
		want: `{"offset":null,"rows":[{"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","key":"a","value":{"rev":"1-aaaa"}},{"doc":null,"id":"c","key":"c","value":{"deleted":true,"rev":"2-cccc"}},{"error":"not_found","key":"zz"}],"total_rows":4}`},
	{method: "POST", path: "/{db}/_all_docs", body: `{"keys":["b"],"include_docs":true,"attachments":true}`, status: 200,
		want: `{"offset":null,"rows":[{"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","key":"b","value":{"rev":"2-bbbb"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?attachments=true&limit=1", status: 200,
		want: `{"offset":0,"rows":[{"id":"a","key":"a","value":{"rev":"1-aaaa"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&att_encoding_info=true&key=%22a%22", status: 200,
		want: `{"offset":0,"rows":[{"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true},"t.txt":{"content_type":"text/plain","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","length":11,"revpos":1,"stub":true}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","key":"a","value":{"rev":"1-aaaa"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&atts_since=%5B%221-aaaa%22%5D&key=%22b%22", status: 200,
		want: `{"offset":1,"rows":[{"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","digest":"GZIP","length":11,"revpos":2,"stub":true},"old.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","key":"b","value":{"rev":"2-bbbb"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&conflicts=true&attachments=true&key=%22d%22", status: 200,
		want: `{"offset":2,"rows":[{"doc":{"_conflicts":["2-aaaa"],"_id":"d","_rev":"2-bbbb","v":2},"id":"d","key":"d","value":{"rev":"2-bbbb"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&attachments=true", hdr: map[string]string{"Accept": "multipart/mixed"}, status: 200,
		want: `{"offset":0,"rows":[{"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","key":"a","value":{"rev":"1-aaaa"}},{"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","key":"b","value":{"rev":"2-bbbb"}},{"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","key":"d","value":{"rev":"2-bbbb"}},{"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","revpos":1}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","key":"e","value":{"rev":"1-eeee"}}],"total_rows":4}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&attachments=maybe", status: 400,
		want: `{"error":"query_parse_error","reason":"Invalid boolean parameter: \"maybe\""}`},
	{method: "GET", path: "/{db}/_all_docs?include_docs=true&att_encoding_info=maybe", status: 400,
		want: `{"error":"query_parse_error","reason":"Invalid boolean parameter: \"maybe\""}`},

	// _changes: the same docs; a deleted doc is its tombstone
	{method: "GET", path: "/{db}/_changes?include_docs=true&attachments=true", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"doc":{"_deleted":true,"_id":"c","_rev":"2-cccc"},"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","revpos":1}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","seq":"SEQ"}]}`},
	{method: "GET", path: "/{db}/_changes?include_docs=true&attachments=true&att_encoding_info=true&style=all_docs&conflicts=true", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"doc":{"_deleted":true,"_id":"c","_rev":"2-cccc"},"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"},{"rev":"2-aaaa"}],"doc":{"_conflicts":["2-aaaa"],"_id":"d","_rev":"2-bbbb","v":2},"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","revpos":1}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","seq":"SEQ"}]}`},
	{method: "GET", path: "/{db}/_changes?attachments=true", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"id":"e","seq":"SEQ"}]}`},
	{method: "GET", path: "/{db}/_changes?include_docs=true&att_encoding_info=true", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true},"t.txt":{"content_type":"text/plain","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","length":11,"revpos":1,"stub":true}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","length":11,"revpos":2,"stub":true},"old.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"doc":{"_deleted":true,"_id":"c","_rev":"2-cccc"},"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","length":0,"revpos":1,"stub":true}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","seq":"SEQ"}]}`},
	{method: "GET", path: "/{db}/_changes?include_docs=true&atts_since=%5B%221-aaaa%22%5D", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true},"t.txt":{"content_type":"text/plain","digest":"GZIP","length":11,"revpos":1,"stub":true}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","digest":"GZIP","length":11,"revpos":2,"stub":true},"old.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"doc":{"_deleted":true,"_id":"c","_rev":"2-cccc"},"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","length":0,"revpos":1,"stub":true}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","seq":"SEQ"}]}`},
	{method: "GET", path: "/{db}/_changes?include_docs=true&attachments=true", hdr: map[string]string{"Accept": "multipart/related"}, status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"doc":{"_deleted":true,"_id":"c","_rev":"2-cccc"},"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","revpos":1}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","seq":"SEQ"}]}`},
	// _changes ignores a flag that is not "true"
	{method: "GET", path: "/{db}/_changes?include_docs=true&attachments=maybe&att_encoding_info=maybe", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"doc":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true},"t.txt":{"content_type":"text/plain","digest":"GZIP","length":11,"revpos":1,"stub":true}},"_id":"a","_rev":"1-aaaa","v":1},"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_attachments":{"new.txt":{"content_type":"text/plain","digest":"GZIP","length":11,"revpos":2,"stub":true},"old.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true}},"_id":"b","_rev":"2-bbbb","v":2},"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"doc":{"_deleted":true,"_id":"c","_rev":"2-cccc"},"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"doc":{"_id":"d","_rev":"2-bbbb","v":2},"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"doc":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","length":0,"revpos":1,"stub":true}},"_id":"e","_rev":"1-eeee","v":5},"id":"e","seq":"SEQ"}]}`},
	{method: "GET", path: "/{db}/_changes?include_docs=maybe&attachments=true&descending=maybe&conflicts=maybe", status: 200,
		want: `{"last_seq":"SEQ","pending":0,"results":[{"changes":[{"rev":"1-aaaa"}],"id":"a","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"id":"b","seq":"SEQ"},{"changes":[{"rev":"2-cccc"}],"deleted":true,"id":"c","seq":"SEQ"},{"changes":[{"rev":"2-bbbb"}],"id":"d","seq":"SEQ"},{"changes":[{"rev":"1-eeee"}],"id":"e","seq":"SEQ"}]}`},

	// _bulk_get: no rev is every leaf; an item's atts_since wins over
	// attachments=true
	{method: "POST", path: "/{db}/_bulk_get?attachments=true&att_encoding_info=true",
		body: `{"docs":[{"id":"a"},{"id":"b","atts_since":["1-aaaa"]},{"id":"c"},{"id":"d"},{"id":"d","rev":"2-aaaa"},{"id":"e"},{"id":"zz"}]}`, status: 200,
		want: `{"results":[{"docs":[{"ok":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1},"t.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","revpos":1}},"_id":"a","_rev":"1-aaaa","v":1}}],"id":"a"},{"docs":[{"ok":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","revpos":2},"old.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true}},"_id":"b","_rev":"2-bbbb","v":2}}],"id":"b"},{"docs":[{"ok":{"_deleted":true,"_id":"c","_rev":"2-cccc"}}],"id":"c"},{"docs":[{"ok":{"_attachments":{"x.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":2}},"_id":"d","_rev":"2-aaaa","v":1}},{"ok":{"_id":"d","_rev":"2-bbbb","v":2}}],"id":"d"},{"docs":[{"ok":{"_attachments":{"x.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":2}},"_id":"d","_rev":"2-aaaa","v":1}}],"id":"d"},{"docs":[{"ok":{"_attachments":{"empty.bin":{"content_type":"application/octet-stream","data":"","digest":"md5-1B2M2Y8AsgTpgAmY7PhCfg==","revpos":1}},"_id":"e","_rev":"1-eeee","v":5}}],"id":"e"},{"docs":[{"error":{"error":"not_found","id":"zz","reason":"missing","rev":"undefined"}}],"id":"zz"}]}`},
	{method: "POST", path: "/{db}/_bulk_get?attachments=true&revs=true",
		body: `{"docs":[{"id":"b"},{"id":"c","rev":"2-cccc"}]}`, status: 200,
		want: `{"results":[{"docs":[{"ok":{"_attachments":{"new.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ=","digest":"GZIP","revpos":2},"old.bin":{"content_type":"application/octet-stream","data":"AAEC//4=","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","revpos":1}},"_id":"b","_rev":"2-bbbb","_revisions":{"ids":["bbbb","aaaa"],"start":2},"v":2}}],"id":"b"},{"docs":[{"ok":{"_deleted":true,"_id":"c","_rev":"2-cccc","_revisions":{"ids":["cccc","aaaa"],"start":2}}}],"id":"c"}]}`},
	{method: "POST", path: "/{db}/_bulk_get?att_encoding_info=true", body: `{"docs":[{"id":"a"}]}`, status: 200,
		want: `{"results":[{"docs":[{"ok":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true},"t.txt":{"content_type":"text/plain","digest":"GZIP","encoded_length":"GZIP","encoding":"gzip","length":11,"revpos":1,"stub":true}},"_id":"a","_rev":"1-aaaa","v":1}}],"id":"a"}]}`},
	// and ignores a flag that is not "true"
	{method: "POST", path: "/{db}/_bulk_get?attachments=maybe&revs=maybe&latest=maybe", body: `{"docs":[{"id":"a"}]}`, status: 200,
		want: `{"results":[{"docs":[{"ok":{"_attachments":{"b.bin":{"content_type":"application/octet-stream","digest":"md5-OOx4u8Gk1j7aJfR0uZpU7w==","length":5,"revpos":1,"stub":true},"t.txt":{"content_type":"text/plain","digest":"GZIP","length":11,"revpos":1,"stub":true}},"_id":"a","_rev":"1-aaaa","v":1}}],"id":"a"}]}`},
}

var gzipOnly = map[string]bool{"digest": true, "encoded_length": true}

// normRowJSON makes an answer comparable across servers (see attStep).
func normRowJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, clip(b))
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			text := false
			if ct, ok := x["content_type"].(string); ok && strings.HasPrefix(ct, "text/") {
				text = true
			}
			for k, e := range x {
				switch {
				case (k == "seq" || k == "last_seq") && e != nil:
					x[k] = "SEQ"
				case text && gzipOnly[k]:
					x[k] = "GZIP"
				default:
					x[k] = walk(e)
				}
			}
			if rs, ok := x["results"].([]any); ok {
				sort.SliceStable(rs, func(i, j int) bool {
					a, _ := rs[i].(map[string]any)
					b, _ := rs[j].(map[string]any)
					return fmt.Sprint(a["id"]) < fmt.Sprint(b["id"])
				})
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
			return x
		}
		return v
	}
	out, _ := json.Marshal(walk(v))
	return string(out)
}

func rawRequest(t *testing.T, ctx context.Context, base, user, pw, method, path, body string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pw)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// a connection each: CouchDB sends a stray chunk after some ended
	// event streams, which a reused connection would read as an answer
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func runAttSteps(t *testing.T, base, user, pw, db string, steps []attStep) {
	t.Helper()
	for i, st := range steps {
		path := strings.ReplaceAll(st.path, "{db}", db)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, b, err := rawRequest(t, ctx, base, user, pw, st.method, path, st.body, st.hdr)
		cancel()
		if err != nil {
			t.Fatalf("step %d: %s %s: %v", i, st.method, path, err)
		}
		if resp.StatusCode != st.status {
			t.Fatalf("step %d: %s %s: status %d, want %d: %s", i, st.method, path, resp.StatusCode, st.status, clip(b))
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("step %d: %s %s: Content-Type %q, want JSON", i, st.method, path, ct)
		}
		got := normRowJSON(t, b)
		if st.want == "" {
			t.Logf("step %d: %s %s: %s", i, st.method, path, got)
			continue
		}
		if got != st.want {
			t.Errorf("step %d: %s %s:\n got %s\nwant %s", i, st.method, path, got, st.want)
		}
	}
}

func setUpRowAtts(t *testing.T, base, user, pw, db string) {
	t.Helper()
	ctx := context.Background()
	if resp, b, err := rawRequest(t, ctx, base, user, pw, "PUT", "/"+db, "", nil); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT /%s: %v %s", db, err, b)
	}
	if resp, b, err := rawRequest(t, ctx, base, user, pw, "POST", "/"+db+"/_bulk_docs", rowAttDocs, nil); err != nil || resp.StatusCode != 201 {
		t.Fatalf("_bulk_docs: %v %s", err, b)
	}
}

// attachments=true (and att_encoding_info, atts_since) in _all_docs,
// _changes and _bulk_get rows, as CouchDB answers them (issue 15).
func TestRowAttachments(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	setUpRowAtts(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "ra")
	runAttSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "ra", rowAttSteps)
}

func TestRowAttachmentsAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	setUpRowAtts(t, cs.URL, cs.User, cs.Password, "ra")
	runAttSteps(t, cs.URL, cs.User, cs.Password, "ra", rowAttSteps)
}

var rowSeqRE = regexp.MustCompile(`"[0-9]+-[A-Za-z0-9_-]{20,}"`)

// esStep is one eventsource request and CouchDB 3.5.2's body for it
// (sequences as "<seq>"). lastEventID "{s1}" is the feed's last_seq after
// the first doc. heartbeat steps never end on their own: they are read
// for readFor, and the body must be prefix followed by repeats of each.
type esStep struct {
	path        string
	lastEventID string
	status      int
	body        string
	readFor     time.Duration
	prefix      string
	each        string
}

var esSteps = []esStep{
	// nothing to send: a newline when it starts to wait, no end line
	{path: "/{db}/_changes?feed=eventsource&since=now&timeout=100", status: 200, body: "\n"},
	// a limited stream ends with a newline; a timed-out one does not
	{path: "/{db}/_changes?feed=eventsource&limit=1", status: 200,
		body: "data: {\"seq\":\"<seq>\",\"id\":\"x\",\"changes\":[{\"rev\":\"1-aaaa\"}]}\nid: \"<seq>\"\n\n\n"},
	{path: "/{db}/_changes?feed=eventsource&limit=0&timeout=100", status: 200, body: ""},
	{path: "/{db}/_changes?feed=eventsource&since=now&limit=1&timeout=100", status: 200, body: "\n"},
	// Last-Event-ID (as the id line has it, or bare) wins over since
	{path: "/{db}/_changes?feed=eventsource&timeout=100&since=0", lastEventID: "{s1}", status: 200,
		body: "data: {\"seq\":\"<seq>\",\"id\":\"y\",\"changes\":[{\"rev\":\"1-bbbb\"}]}\nid: \"<seq>\"\n\n"},
	{path: "/{db}/_changes?feed=eventsource&timeout=100", lastEventID: `"{s1}"`, status: 200,
		body: "data: {\"seq\":\"<seq>\",\"id\":\"y\",\"changes\":[{\"rev\":\"1-bbbb\"}]}\nid: \"<seq>\"\n\n"},
	{path: "/{db}/_changes?feed=eventsource&timeout=100", lastEventID: "now", status: 200, body: "\n"},
	{path: "/{db}/_changes?feed=eventsource&timeout=100", lastEventID: "garbage", status: 400,
		body: `{"error":"bad_request","reason":"Malformed sequence supplied in 'since' parameter."}` + "\n"},
	// only eventsource reads it
	{path: "/{db}/_changes?feed=continuous&timeout=100&since=now", lastEventID: "{s1}", status: 200,
		body: "{\"last_seq\":\"<seq>\",\"pending\":0}\n\n", prefix: "\n"},
	// heartbeats: an event each, the timeout no longer ends the feed
	{path: "/{db}/_changes?feed=eventsource&since=now&heartbeat=50&timeout=10", status: 200,
		readFor: 400 * time.Millisecond, prefix: "\n", each: "event: heartbeat\ndata: \n\n"},
	{path: "/{db}/_changes?feed=eventsource&heartbeat=50&limit=5", status: 200,
		readFor: 400 * time.Millisecond,
		prefix: "data: {\"seq\":\"<seq>\",\"id\":\"x\",\"changes\":[{\"rev\":\"1-aaaa\"}]}\nid: \"<seq>\"\n\n" +
			"data: {\"seq\":\"<seq>\",\"id\":\"y\",\"changes\":[{\"rev\":\"1-bbbb\"}]}\nid: \"<seq>\"\n\n",
		each: "event: heartbeat\ndata: \n\n"},
	// the other feeds' framing, byte for byte
	{path: "/{db}/_changes?since=now", status: 200, body: "{\"results\":[\n\n],\n\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
	{path: "/{db}/_changes?since={s1}", status: 200,
		body: "{\"results\":[\n{\"seq\":\"<seq>\",\"id\":\"y\",\"changes\":[{\"rev\":\"1-bbbb\"}]}\n],\n\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
	{path: "/{db}/_changes?feed=longpoll&since=now&timeout=100", status: 200,
		body: "{\"results\":[\n\n\n],\n\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
	{path: "/{db}/_changes?feed=longpoll&since={s1}&timeout=100", status: 200,
		body: "{\"results\":[\n{\"seq\":\"<seq>\",\"id\":\"y\",\"changes\":[{\"rev\":\"1-bbbb\"}]}\n],\n\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
	{path: "/{db}/_changes?feed=continuous&since={s1}&timeout=100", status: 200,
		body: "{\"seq\":\"<seq>\",\"id\":\"y\",\"changes\":[{\"rev\":\"1-bbbb\"}]}\n{\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
	{path: "/{db}/_changes?feed=longpoll&since=now&heartbeat=50", status: 200,
		readFor: 400 * time.Millisecond, prefix: "{\"results\":[\n\n", each: "\n"},
	{path: "/{db}/_changes?feed=continuous&since=now&heartbeat=50", status: 200,
		readFor: 400 * time.Millisecond, prefix: "\n", each: "\n"},
}

func runESSteps(t *testing.T, base, user, pw, db string) {
	t.Helper()
	ctx := context.Background()
	put := func(id, rev string) {
		body := fmt.Sprintf(`{"new_edits":false,"docs":[{"_id":%q,"_rev":%q}]}`, id, rev)
		if resp, b, err := rawRequest(t, ctx, base, user, pw, "POST", "/"+db+"/_bulk_docs", body, nil); err != nil || resp.StatusCode != 201 {
			t.Fatalf("_bulk_docs: %v %s", err, b)
		}
	}
	if resp, b, err := rawRequest(t, ctx, base, user, pw, "PUT", "/"+db, "", nil); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT /%s: %v %s", db, err, b)
	}
	put("x", "1-aaaa")
	_, b, err := rawRequest(t, ctx, base, user, pw, "GET", "/"+db+"/_changes", "", nil)
	var ch struct {
		LastSeq string `json:"last_seq"`
	}
	if err != nil || json.Unmarshal(b, &ch) != nil {
		t.Fatalf("_changes: %v %s", err, b)
	}
	s1 := ch.LastSeq
	for i, st := range esSteps {
		if i == 4 {
			put("y", "1-bbbb") // after the steps that see x alone
		}
		path := strings.ReplaceAll(strings.ReplaceAll(st.path, "{db}", db), "{s1}", s1)
		hdr := map[string]string{"Accept": "text/event-stream"}
		if st.lastEventID != "" {
			hdr["Last-Event-ID"] = strings.ReplaceAll(st.lastEventID, "{s1}", s1)
		}
		wait := 10 * time.Second
		if st.readFor > 0 {
			wait = st.readFor
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		resp, got, err := rawRequest(t, rctx, base, user, pw, "GET", path, "", hdr)
		cancel()
		where := fmt.Sprintf("step %d: GET %s (Last-Event-ID %q)", i, path, hdr["Last-Event-ID"])
		if resp == nil || (err != nil && st.readFor == 0) {
			t.Fatalf("%s: %v", where, err)
		}
		if resp.StatusCode != st.status {
			t.Fatalf("%s: status %d, want %d: %q", where, resp.StatusCode, st.status, got)
		}
		if st.status == 200 && strings.Contains(path, "eventsource") {
			if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-cache" {
				t.Fatalf("%s: Content-Type %q, Cache-Control %q", where, ct, cc)
			}
		}
		norm := rowSeqRE.ReplaceAllString(string(got), `"<seq>"`)
		if st.readFor == 0 {
			if want := st.prefix + st.body; norm != want {
				t.Errorf("%s:\n got %q\nwant %q", where, norm, want)
			}
			continue
		}
		// the read ends at a deadline, perhaps inside a heartbeat
		rest, ok := strings.CutPrefix(norm, st.prefix)
		n := strings.Count(rest, st.each)
		if left := strings.ReplaceAll(rest, st.each, ""); !ok || n < 2 || !strings.HasPrefix(st.each, left) {
			t.Errorf("%s: got %q, want %q then %q repeated (at least twice)", where, norm, st.prefix, st.each)
		}
	}
	// a change while the feed waits: a heartbeat when it wakes, heartbeat
	// or not, then the row; the newline it sent on starting to wait is not
	// sent again when it waits after the row
	row := func(id, rev string) string {
		return `{"seq":"<seq>","id":"` + id + `","changes":[{"rev":"` + rev + `"}]}`
	}
	for _, tc := range []struct{ feed, id, want string }{
		{"eventsource", "z1", "\nevent: heartbeat\ndata: \n\ndata: " + row("z1", "1-cccc") + "\nid: \"<seq>\"\n\n"},
		{"continuous", "z2", "\n\n" + row("z2", "1-cccc") + "\n{\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
		{"longpoll", "z3", "{\"results\":[\n\n\n" + row("z3", "1-cccc") + "\n],\n\"last_seq\":\"<seq>\",\"pending\":0}\n\n"},
	} {
		done := make(chan []byte, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, got, _ := rawRequest(t, rctx, base, user, pw, "GET", "/"+db+"/_changes?feed="+tc.feed+"&since=now&timeout=3000", "", nil)
			done <- got
		}()
		// the feed is waiting by then; its timeout leaves a loaded machine
		// time to make the write
		time.Sleep(500 * time.Millisecond)
		put(tc.id, "1-cccc")
		if got := rowSeqRE.ReplaceAllString(string(<-done), `"<seq>"`); got != tc.want {
			t.Errorf("%s with a change while it waits:\n got %q\nwant %q", tc.feed, got, tc.want)
		}
	}
}

// feed=eventsource as CouchDB frames it: Last-Event-ID, heartbeats, the
// newlines at the start and the end; and the other feeds' bytes (issue 15).
func TestEventSourceFraming(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	runESSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "es")
}

func TestEventSourceFramingAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	runESSteps(t, cs.URL, cs.User, cs.Password, "es")
}
