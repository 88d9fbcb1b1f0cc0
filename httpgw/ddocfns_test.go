package httpgw_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// Issue 16: design doc functions (validate_doc_update, _changes filters,
// _show, _list, _update). ddocSteps are requests and what Apache CouchDB
// 3.5.2 (single node, q=2 n=1) answers them: recorded with
// SETTEE_VIEWS_RECORD=1 from TestDDocFunctionsAsCouchDB (the runner logs
// "REC <step> <status> <headers> <body>"), not written by hand. The same
// tables run on settee (TestDDocFunctions).

// ddocStep is one request and CouchDB's answer to it.
type ddocStep struct {
	method, path, body string
	hdr                map[string]string // request headers; Content-Type is application/json unless set
	as                 string            // "user:password"; "-" for none; "": the admin
	status             int
	// want is a JSON answer, compared as JSON after normDDoc on both
	// sides; raw instead is the exact body (a show's or list's text)
	want, raw string
	// err and reasonPrefix instead of want: an error whose reason ends in
	// the JavaScript engine's own words (SpiderMonkey's message and stack)
	err, reasonPrefix string
	wantHdr           map[string]string // response headers, exactly ("" absent); revs normalised
	keep              string            // keeps the answer's "rev" (or _rev) as {keep}
	retry             time.Duration     // asks again (GET only, or a refused write) until the status is right
	// lags: CouchDB answers from its design doc cache, which follows an
	// edit a little after the write: asked again on CouchDB for some
	// seconds, once on settee
	lags bool
}

// jsonOf is v's JSON, for design docs written with Go's quoting.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The users and the database's security the functions look at: alice is
// an editor, bob has no role, both are members.
var ddocUserSteps = []ddocStep{
	{method: "PUT", path: "/_users/org.couchdb.user:alice", body: `{"name":"alice","password":"pw","roles":["editor"],"type":"user"}`, status: 201},
	{method: "PUT", path: "/_users/org.couchdb.user:bob", body: `{"name":"bob","password":"pw","roles":[],"type":"user"}`, status: 201},
	{method: "PUT", path: "/{db}/_security", body: `{"members":{"names":["alice","bob"]},"admins":{"names":[]}}`, status: 200, want: `{"ok":true}`},
	{method: "GET", path: "/{db}", as: "alice:pw", status: 200, retry: 5 * time.Second},
	{method: "GET", path: "/{db}", as: "bob:pw", status: 200, retry: 5 * time.Second},
}

// vduDDoc refuses by what the new doc says, reads its design doc (this)
// and a CommonJS module, and checks oldDoc, userCtx and secObj.
var vduDDoc = jsonOf(map[string]any{
	"validate_doc_update": `function (newDoc, oldDoc, userCtx, secObj) {
  var lib = require('lib/rules');
  if (newDoc.forbid) throw({forbidden: 'no ' + newDoc.forbid});
  if (newDoc.unauth) throw({unauthorized: 'who are you'});
  if (newDoc.str) throw('a string');
  if (newDoc.one) throw({bad: 'thing'});
  if (newDoc.big > this.limits.max) throw({forbidden: 'too big: ' + newDoc.big});
  if (newDoc.libcheck && !lib.ok(newDoc)) throw({forbidden: 'lib says no'});
  if (oldDoc && oldDoc.author && oldDoc.author !== userCtx.name) throw({forbidden: 'only ' + oldDoc.author + ' may edit, not ' + userCtx.name});
  if (newDoc.needs && userCtx.roles.indexOf(newDoc.needs) < 0) throw({unauthorized: 'needs ' + newDoc.needs});
  if (newDoc.secname && secObj.members.names.indexOf(userCtx.name) < 0) throw({forbidden: userCtx.name + ' is not a member of ' + userCtx.db});
  if (newDoc._deleted && oldDoc && oldDoc.keep) throw({forbidden: 'keep ' + oldDoc._id + ' at ' + oldDoc._rev.split('-')[0]});
  if (newDoc.seeold) throw({forbidden: 'old ' + JSON.stringify(oldDoc)});
  if (newDoc._attachments && newDoc._attachments['no.txt']) throw({forbidden: 'no no.txt'});
}`,
	"limits": map[string]any{"max": 10},
	"lib":    map[string]any{"rules": `exports.ok = function (d) { return d.libcheck === 'yes'; };`},
})

var vduSteps = []ddocStep{
	{method: "PUT", path: "/{db}/_design/auth", body: vduDDoc, status: 201},
	// PUT, POST, DELETE refused by the thrown object's name
	{method: "PUT", path: "/{db}/p1", body: `{"forbid":"put"}`, status: 403, want: `{"error":"forbidden","reason":"no put"}`},
	{method: "PUT", path: "/{db}/p1", body: `{"unauth":1}`, status: 401, want: `{"error":"unauthorized","reason":"who are you"}`},
	{method: "PUT", path: "/{db}/p1", body: `{"str":1}`, status: 500, want: `{"error":"unknown_error","reason":"a string"}`},
	{method: "PUT", path: "/{db}/p1", body: `{"one":1}`, status: 500, want: `{"error":"unknown_error","reason":"thing"}`},
	{method: "GET", path: "/{db}/p1", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "POST", path: "/{db}", body: `{"_id":"p2","forbid":"post"}`, status: 403, want: `{"error":"forbidden","reason":"no post"}`},
	{method: "POST", path: "/{db}", body: `{"_id":"p2","unauth":1}`, status: 401, want: `{"error":"unauthorized","reason":"who are you"}`},
	// this is the design doc, require() its modules
	{method: "PUT", path: "/{db}/big", body: `{"big":11}`, status: 403, want: `{"error":"forbidden","reason":"too big: 11"}`},
	{method: "PUT", path: "/{db}/big", body: `{"big":10,"libcheck":"no"}`, status: 403, want: `{"error":"forbidden","reason":"lib says no"}`},
	{method: "PUT", path: "/{db}/big", body: `{"big":10,"libcheck":"yes"}`, status: 201, keep: "big"},
	// a new doc's oldDoc is null; an edit's is the doc it edits
	{method: "PUT", path: "/{db}/old1", body: `{"seeold":1}`, status: 403, want: `{"error":"forbidden","reason":"old null"}`},
	{method: "PUT", path: "/{db}/big", body: `{"_rev":"{big}","seeold":1}`, status: 403, want: `{"error":"forbidden","reason":"old {\"_id\":\"big\",\"_rev\":\"1-cb0fc536d3efbf110210451c42c6b5e1\",\"big\":10,\"libcheck\":\"yes\",\"_revisions\":{\"start\":1,\"ids\":[\"cb0fc536d3efbf110210451c42c6b5e1\"]}}"}`},
	{method: "PUT", path: "/{db}/k1", body: `{"keep":true}`, status: 201, keep: "k1"},
	{method: "DELETE", path: "/{db}/k1?rev={k1}", status: 403, want: `{"error":"forbidden","reason":"keep k1 at 1"}`},
	{method: "PUT", path: "/{db}/k1", body: `{"_rev":"{k1}","_deleted":true}`, status: 403, want: `{"error":"forbidden","reason":"keep k1 at 1"}`},
	// _bulk_docs: each doc its own answer
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"b1","forbid":"b1"},{"_id":"b2"},{"_id":"b3","unauth":1},{"_id":"b4","str":1},{"_id":"k1","_rev":"{k1}","_deleted":true}]}`,
		status: 201, want: `[{"id":"b1","error":"forbidden","reason":"no b1"},{"ok":true,"id":"b2","rev":"1-967a00dff5e02add41819138abb3284d"},{"id":"b3","error":"unauthorized","reason":"who are you"},{"id":"b4","error":"unknown_error","reason":"a string"},{"id":"k1","error":"forbidden","reason":"keep k1 at 1"}]`},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"r1","_rev":"1-abc","forbid":"r1"},{"_id":"r2","_rev":"1-abc"},{"_id":"r3","_rev":"1-abc","seeold":1}]}`,
		status: 201, want: `[{"id":"r1","rev":"1-abc","error":"forbidden","reason":"no r1"},{"id":"r3","rev":"1-abc","error":"forbidden","reason":"old null"}]`},
	// the author rule: only alice edits what alice wrote
	{method: "PUT", path: "/{db}/au", as: "alice:pw", body: `{"author":"alice"}`, status: 201, keep: "au"},
	{method: "PUT", path: "/{db}/au", as: "bob:pw", body: `{"_rev":"{au}","author":"bob"}`, status: 403, want: `{"error":"forbidden","reason":"only alice may edit, not bob"}`},
	{method: "DELETE", path: "/{db}/au?rev={au}", as: "bob:pw", status: 403, want: `{"error":"forbidden","reason":"only alice may edit, not bob"}`},
	{method: "POST", path: "/{db}/_bulk_docs", as: "bob:pw", body: `{"docs":[{"_id":"au","_rev":"{au}","x":1}]}`, status: 201, want: `[{"id":"au","error":"forbidden","reason":"only alice may edit, not bob"}]`},
	// a replicated revision's oldDoc is the doc at its parent when the
	// database has it (alice's 1-aaaa here), else null
	{method: "POST", path: "/{db}/_bulk_docs", as: "alice:pw", body: `{"new_edits":false,"docs":[{"_id":"ra","_rev":"1-aaaa","author":"alice"}]}`, status: 201, want: `[]`},
	{method: "POST", path: "/{db}/_bulk_docs", as: "bob:pw", body: `{"new_edits":false,"docs":[{"_id":"ra","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"author":"bob"}]}`, status: 201, want: `[{"id":"ra","rev":"2-bbbb","error":"forbidden","reason":"only alice may edit, not bob"}]`},
	{method: "PUT", path: "/{db}/ra?new_edits=false", as: "bob:pw", body: `{"_rev":"2-cccc","_revisions":{"start":2,"ids":["cccc","aaaa"]},"author":"bob"}`, status: 403, want: `{"error":"forbidden","reason":"only alice may edit, not bob"}`},
	{method: "POST", path: "/{db}/_bulk_docs", as: "bob:pw", body: `{"new_edits":false,"docs":[{"_id":"ra","_rev":"5-eeee","_revisions":{"start":5,"ids":["eeee","dddd"]},"author":"bob"}]}`, status: 201, want: `[]`},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"ra","_rev":"3-ffff","_revisions":{"start":3,"ids":["ffff","bbbb","aaaa"]},"seeold":1}]}`, status: 201, want: `[{"id":"ra","rev":"3-ffff","error":"forbidden","reason":"only alice may edit, not admin"}]`},
	// the same revision again is not validated (it is in the tree)
	{method: "POST", path: "/{db}/_bulk_docs", as: "bob:pw", body: `{"new_edits":false,"docs":[{"_id":"ra","_rev":"1-aaaa","author":"alice","forbid":"again"}]}`, status: 201, want: `[]`},
	// attachments: the doc with its new attachment (or without the
	// removed one) is validated
	{method: "PUT", path: "/{db}/au/a.txt?rev={au}", as: "bob:pw", body: "hi", hdr: map[string]string{"Content-Type": "text/plain"}, status: 403, want: `{"error":"forbidden","reason":"only alice may edit, not bob"}`},
	{method: "PUT", path: "/{db}/au/a.txt?rev={au}", as: "alice:pw", body: "hi", hdr: map[string]string{"Content-Type": "text/plain"}, status: 201, keep: "au"},
	{method: "DELETE", path: "/{db}/au/a.txt?rev={au}", as: "bob:pw", status: 403, want: `{"error":"forbidden","reason":"only alice may edit, not bob"}`},
	{method: "PUT", path: "/{db}/at1/no.txt", body: "hi", hdr: map[string]string{"Content-Type": "text/plain"}, status: 403, want: `{"error":"forbidden","reason":"no no.txt"}`},
	{method: "PUT", path: "/{db}/at1/yes.txt", body: "hi", hdr: map[string]string{"Content-Type": "text/plain"}, status: 201},
	// COPY: the copy is a write of the destination
	{method: "COPY", path: "/{db}/au", as: "bob:pw", hdr: map[string]string{"Destination": "au2"}, status: 201},
	{method: "COPY", path: "/{db}/big", as: "bob:pw", hdr: map[string]string{"Destination": "au?rev={au}"}, status: 403, want: `{"error":"forbidden","reason":"only alice may edit, not bob"}`},
	// roles and the security object
	{method: "PUT", path: "/{db}/role1", as: "alice:pw", body: `{"needs":"editor"}`, status: 201},
	{method: "PUT", path: "/{db}/role2", as: "bob:pw", body: `{"needs":"editor"}`, status: 401, want: `{"error":"unauthorized","reason":"needs editor"}`},
	{method: "PUT", path: "/{db}/sec1", as: "bob:pw", body: `{"secname":1}`, status: 201},
	{method: "PUT", path: "/{db}/sec2", body: `{"secname":1}`, status: 403, want: `{"error":"forbidden","reason":"admin is not a member of fns_vdu"}`},
	// design docs are not validated
	{method: "PUT", path: "/{db}/_design/x", body: `{"forbid":"ddoc"}`, status: 201},
	// every design doc's function must pass
	{method: "PUT", path: "/{db}/_design/two", body: jsonOf(map[string]any{"validate_doc_update": `function (newDoc) { if (newDoc.two) throw({forbidden: 'two says no'}); }`}), status: 201},
	{method: "PUT", path: "/{db}/t2", body: `{"two":1}`, status: 403, want: `{"error":"forbidden","reason":"two says no"}`, lags: true},
	{method: "PUT", path: "/{db}/t2", body: `{"ok":1}`, status: 201},
	// a function added, then removed
	{method: "PUT", path: "/{db}/_design/tmp", body: jsonOf(map[string]any{"validate_doc_update": `function (newDoc) { if (newDoc.tmp) throw({forbidden: 'tmp says no'}); }`}), status: 201, keep: "tmp"},
	{method: "POST", path: "/{db}", body: `{"tmp":1}`, status: 403, want: `{"error":"forbidden","reason":"tmp says no"}`, lags: true},
	{method: "DELETE", path: "/{db}/_design/tmp?rev={tmp}", status: 200},
	{method: "PUT", path: "/{db}/tmp2", body: `{"tmp":1}`, status: 201, lags: true},
}

// filterDocs have the test's own revs: types a and b, an owner, a deleted
// doc whose tombstone says type a, a doc in conflict.
const filterDocs = `{"new_edits":false,"docs":[
 {"_id":"f1","_rev":"1-abc","type":"a","n":1},
 {"_id":"f2","_rev":"1-abc","type":"b","n":2},
 {"_id":"f3","_rev":"1-abc","type":"a","n":3,"owner":"alice"},
 {"_id":"f4","_rev":"1-abc","type":"b","n":4,"owner":"bob"},
 {"_id":"gone","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"_deleted":true,"type":"a"},
 {"_id":"cf","_rev":"1-aaaa","type":"b","n":5},
 {"_id":"cf","_rev":"1-bbbb","type":"a","n":6}]}`

var filterDDoc = jsonOf(map[string]any{
	"wanted": "b",
	"filters": map[string]any{
		"by_type": `function (doc, req) { return doc.type === req.query.type; }`,
		"mine":    `function (doc, req) { return doc.owner === req.userCtx.name; }`,
		"deleted": `function (doc, req) { return !!doc._deleted; }`,
		"body":    `function (doc, req) { return req.method === 'POST' && doc.type === req.body.type; }`,
		"this":    `function (doc, req) { return doc.type === this.wanted && require('lib/f').keep(doc); }`,
		"throws":  `function (doc, req) { return doc.no.such.thing; }`,
		"truthy":  `function (doc, req) { return doc.n; }`,
	},
	"lib":   map[string]any{"f": `exports.keep = function (doc) { return doc.n > 0; };`},
	"views": map[string]any{"as": map[string]any{"map": `function (doc) { if (doc.type === 'a') emit(doc.n, null); }`}},
})

var filterSteps = []ddocStep{
	{method: "POST", path: "/{db}/_bulk_docs", body: filterDocs, status: 201, want: `[]`},
	{method: "PUT", path: "/{db}/_design/f", body: filterDDoc, status: 201},
	{method: "GET", path: "/{db}/_changes?filter=f/by_type&type=a", status: 200, want: `{"results":[{"seq":"2-g1AAAACIeJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_IHMTGbIAJqIjpA","id":"f1","changes":[{"rev":"1-abc"}]},{"seq":"4-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA-eSyo","id":"cf","changes":[{"rev":"1-bbbb"}]},{"seq":"6-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZwOYmGxtYphqZ49ScBQA_dyyq","id":"gone","changes":[{"rev":"2-bbbb"}],"deleted":true},{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_xSys","id":"f3","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/by_type&type=b", status: 200, want: `{"results":[{"seq":"5-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZwOYmGxtYphqZ49ScBQA--Cyp","id":"f4","changes":[{"rev":"1-abc"}]},{"seq":"7-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZweYmGxtYphqZ49ScBQA_niyr","id":"f2","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/by_type&type=a&style=all_docs", status: 200, want: `{"results":[{"seq":"2-g1AAAACIeJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_IHMTGbIAJqIjpA","id":"f1","changes":[{"rev":"1-abc"}]},{"seq":"4-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA-eSyo","id":"cf","changes":[{"rev":"1-bbbb"}]},{"seq":"6-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZwOYmGxtYphqZ49ScBQA_dyyq","id":"gone","changes":[{"rev":"2-bbbb"}],"deleted":true},{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_xSys","id":"f3","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/by_type&type=a&include_docs=true", status: 200, want: `{"results":[{"seq":"2-g1AAAACIeJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_IHMTGbIAJqIjpA","id":"f1","changes":[{"rev":"1-abc"}],"doc":{"_id":"f1","_rev":"1-abc","type":"a","n":1}},{"seq":"4-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA-eSyo","id":"cf","changes":[{"rev":"1-bbbb"}],"doc":{"_id":"cf","_rev":"1-bbbb","type":"a","n":6}},{"seq":"7-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZwOYmGxtYphqZ49ScBQA_Riyr","id":"f3","changes":[{"rev":"1-abc"}],"doc":{"_id":"f3","_rev":"1-abc","type":"a","n":3,"owner":"alice"}},{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_xSys","id":"gone","changes":[{"rev":"2-bbbb"}],"deleted":true,"doc":{"_id":"gone","_rev":"2-bbbb","type":"a","_deleted":true}}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/mine", as: "alice:pw", status: 200, want: `{"results":[{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_xSys","id":"f3","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/mine", as: "bob:pw", status: 200, want: `{"results":[{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_bSys","id":"f4","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/deleted", status: 200, want: `{"results":[{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_xSys","id":"gone","changes":[{"rev":"2-bbbb"}],"deleted":true}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "POST", path: "/{db}/_changes?filter=f/body", body: `{"type":"b"}`, status: 200, want: `{"results":[{"seq":"5-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZwOYmGxtYphqZ49ScBQA--Cyp","id":"f4","changes":[{"rev":"1-abc"}]},{"seq":"7-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZweYmGxtYphqZ49ScBQA_niyr","id":"f2","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/this", status: 200, want: `{"results":[{"seq":"5-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZwOYmGxtYphqZ49ScBQA--Cyp","id":"f4","changes":[{"rev":"1-abc"}]},{"seq":"6-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_Hyyq","id":"f2","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=f/truthy", status: 200, want: `{"results":[{"seq":"2-g1AAAACIeJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_IHMTGbIAJqIjpA","id":"f1","changes":[{"rev":"1-abc"}]},{"seq":"4-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA-eSyo","id":"cf","changes":[{"rev":"1-bbbb"}]},{"seq":"5-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZwOYmGxtYphqZ49ScBQA--Cyp","id":"f4","changes":[{"rev":"1-abc"}]},{"seq":"6-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_Hyyq","id":"f2","changes":[{"rev":"1-abc"}]},{"seq":"7-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZc4EC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZwOYmGxtYphqZ49ScBQA_Riyr","id":"f3","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	// (no filter with limit=1: CouchDB 3.5.2 answered f1 or cf, the two
	// type-a docs of one _bulk_docs, from run to run, even on one shard;
	// a filtered feed's limit is checked in changes_filter_test.go)
	// errors
	{method: "GET", path: "/{db}/_changes?filter=nope/by_type", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "GET", path: "/{db}/_changes?filter=f/nope", status: 404, want: `{"error":"not_found","reason":"missing json key: nope"}`},
	{method: "GET", path: "/{db}/_changes?filter=f/throws", status: 500, err: "error", reasonPrefix: `{<<"TypeError">>`},
	// filter=_view: the docs the map emits for
	{method: "GET", path: "/{db}/_changes?filter=_view&view=f/as", status: 200, want: `{"results":[{"seq":"2-g1AAAACIeJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_IHMTGbIAJqIjpA","id":"f1","changes":[{"rev":"1-abc"}]},{"seq":"4-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBOZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA-eSyo","id":"cf","changes":[{"rev":"1-bbbb"}]},{"seq":"7-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHOZweYmGxtYphqZ49ScBQA_niyr","id":"gone","changes":[{"rev":"2-bbbb"}],"deleted":true},{"seq":"8-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_KOYmGxtYphqZ49ScBQA_xSys","id":"f3","changes":[{"rev":"1-abc"}]}],"last_seq":"9-g1AAAACveJzLYWBgYMpgTmEQS84vTc5ISTI2NzOzdDA0MtczAELDHJB8IkNS_f___7MymBNZcoEC7EZJyZbm5sk4dREyMI8FSDI0AKn_UHNZweYmGxtYphqZ49ScBQA_7Cyt","pending":0}`},
	{method: "GET", path: "/{db}/_changes?filter=_view&view=f/nope", status: 404, want: `{"error":"not_found","reason":"missing json key: nope"}`},
	{method: "GET", path: "/{db}/_changes?filter=_view&view=nope/as", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "GET", path: "/{db}/_changes?filter=_view", status: 400, want: "{\"error\":\"bad_request\",\"reason\":\"`view` filter parameter is not provided.\"}"},
}

var renderDDoc = jsonOf(map[string]any{
	"title": "Render",
	"lib":   map[string]any{"greet": `exports.hi = function (n) { return 'hi ' + n; };`},
	"shows": map[string]any{
		"hello": `function (doc, req) { return 'Hello ' + (doc ? doc._id + ' n=' + doc.n : 'nobody') + ' q=' + req.query.q; }`,
		"full":  `function (doc, req) { return {code: 202, headers: {'X-My': 'yes', 'Content-Type': 'text/plain'}, body: 'body of ' + req.id}; }`,
		"req": `function (doc, req) { return {json: {id: req.id, doc: doc, method: req.method, query: req.query, path: req.path,
  requested_path: req.requested_path, raw_path: req.raw_path, body: req.body, userCtx: req.userCtx, secObj: req.secObj,
  db_name: req.info.db_name, doc_count: req.info.doc_count, uuid: typeof req.uuid, peer: req.peer, form: req.form,
  cookie: req.cookie, accept: req.headers.Accept || null, xh: req.headers['X-Hdr'] || null}}; }`,
		"b64":   `function (doc, req) { return {base64: 'aGVsbG8gd29ybGQ=', headers: {'X-B': '64'}}; }`,
		"prov":  `function (doc, req) { provides('json', function () { return {json: {ok: true, id: doc && doc._id}}; }); provides('html', function () { return '<p>' + (doc ? doc._id : 'none') + '</p>'; }); }`,
		"reg":   `function (doc, req) { registerType('foo', 'application/x-foo'); provides('foo', function () { return 'foo!'; }); provides('text', function () { return 'text!'; }); }`,
		"this":  `function (doc, req) { return this.title + ' ' + require('lib/greet').hi(req.query.who); }`,
		"throw": `function (doc, req) { throw({forbidden: 'show says no'}); }`,
		"oops":  `function (doc, req) { return doc.nothing.here; }`,
		"num":   `function (doc, req) { return {code: 200, body: 42}; }`,
	},
	"views": map[string]any{
		"by_n":  map[string]any{"map": `function (doc) { if (doc.n) emit(doc.n, doc.type); }`},
		"count": map[string]any{"map": `function (doc) { if (doc.type) emit(doc.type, 1); }`, "reduce": "_count"},
	},
	"lists": map[string]any{
		"basic": `function (head, req) { start({headers: {'Content-Type': 'text/plain', 'X-L': '1'}}); send('total=' + head.total_rows + ' offset=' + head.offset + '\n'); var row; while ((row = getRow())) { send(row.id + ' ' + JSON.stringify(row.key) + ' ' + JSON.stringify(row.value) + (row.doc ? ' doc ' + row.doc._id : '') + '\n'); } return 'end ' + req.query.tail; }`,
		"code":  `function (head, req) { start({code: 203, headers: {'X-C': 'c'}}); return 'no rows read'; }`,
		"json":  `function (head, req) { var rows = []; var row; while ((row = getRow())) rows.push(row.key); send(JSON.stringify({head: head, keys: rows})); }`,
		"prov":  `function (head, req) { provides('json', function () { send('['); var row, first = true; while ((row = getRow())) { send((first ? '' : ',') + JSON.stringify(row.key)); first = false; } return ']'; }); provides('html', function () { return '<ul></ul>'; }); }`,
		"oops":  `function (head, req) { getRow(); throw({forbidden: 'list says no'}); }`,
		"this":  `function (head, req) { return this.title; }`,
	},
	"updates": map[string]any{
		"bump":    `function (doc, req) { if (!doc) return [null, {code: 404, body: 'no doc ' + req.id}]; doc.n = (doc.n || 0) + 1; return [doc, 'bumped ' + doc._id + ' to ' + doc.n]; }`,
		"create":  `function (doc, req) { if (doc) return [null, 'exists ' + doc._id]; var d = JSON.parse(req.body); d._id = req.id || req.query.id; return [d, {json: {made: d._id, method: req.method}}]; }`,
		"nothing": `function (doc, req) { return [null, {code: 202, headers: {'X-U': 'u'}, body: 'nothing ' + req.id}]; }`,
		"coded":   `function (doc, req) { return [{_id: req.id, v: 1}, {code: 200, body: 'saved with 200'}]; }`,
		"form":    `function (doc, req) { return [null, {json: {form: req.form, body: req.body}}]; }`,
		"notarr":  `function (doc, req) { return 'not an array'; }`,
		"noid":    `function (doc, req) { return [{v: 1}, 'no id']; }`,
		"throws":  `function (doc, req) { throw({forbidden: 'update says no'}); }`,
		"vdu":     `function (doc, req) { return [{_id: req.id, forbid: 'by update'}, 'saved?']; }`,
	},
	"validate_doc_update": `function (newDoc) { if (newDoc.forbid) throw({forbidden: 'no ' + newDoc.forbid}); }`,
})

var renderSteps = []ddocStep{
	{method: "PUT", path: "/{db}/_design/r", body: renderDDoc, status: 201},
	{method: "PUT", path: "/{db}/_design/o", body: jsonOf(map[string]any{"views": map[string]any{"t": map[string]any{"map": `function (doc) { if (doc.type) emit(doc.type, doc.n); }`}}}), status: 201},
	// _show
	{method: "GET", path: "/{db}/_design/r/_show/hello", status: 200, raw: "Hello nobody q=undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/hello/f1?q=x", status: 200, raw: "Hello f1 n=1 q=x", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/hello/nodoc?q=y", status: 200, raw: "Hello nobody q=y", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/hello/gone", status: 200, raw: "Hello nobody q=undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/full/f2", status: 202, raw: "body of f2", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "Vary": "Accept", "X-My": "yes"}},
	{method: "GET", path: "/{db}/_design/r/_show/req/f1?a=1&b=two", hdr: map[string]string{"X-Hdr": "h1", "Accept": "application/json"}, status: 200, want: `{"id":"f1","doc":{"_id":"f1","_rev":"1-abc","type":"a","n":1,"_revisions":{"start":1,"ids":["abc"]}},"method":"GET","query":{"a":"1","b":"two"},"path":["fns_render","_design","r","_show","req","f1"],"requested_path":["fns_render","_design","r","_show","req","f1?a=1&b=two"],"raw_path":"/fns_render/_design/r/_show/req/f1?a=1&b=two","body":"undefined","userCtx":{"db":"fns_render","name":"admin","roles":["_admin"]},"secObj":{"members":{"names":["alice","bob"]},"admins":{"names":[]}},"db_name":"fns_render","doc_count":7,"uuid":"string","peer":"127.0.0.1","form":{},"cookie":{},"accept":"application/json","xh":"h1"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json", "Vary": "Accept"}},
	{method: "POST", path: "/{db}/_design/r/_show/req", body: `{"posted":true}`, as: "alice:pw", status: 200, want: `{"id":null,"doc":null,"method":"POST","query":{},"path":["fns_render","_design","r","_show","req"],"requested_path":["fns_render","_design","r","_show","req"],"raw_path":"/fns_render/_design/r/_show/req","body":"{\"posted\":true}","userCtx":{"db":"fns_render","name":"alice","roles":["editor"]},"secObj":{"members":{"names":["alice","bob"]},"admins":{"names":[]}},"db_name":"fns_render","doc_count":7,"uuid":"string","peer":"127.0.0.1","form":{},"cookie":{},"accept":null,"xh":null}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/b64", status: 200, raw: "hello world", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/binary", "Vary": "Accept", "X-B": "64"}},
	{method: "GET", path: "/{db}/_design/r/_show/prov/f1", hdr: map[string]string{"Accept": "application/json"}, status: 200, raw: "", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/prov/f1", hdr: map[string]string{"Accept": "text/html"}, status: 200, raw: "<p>f1</p>", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/prov", status: 200, raw: "", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/prov/f1?format=json", status: 200, raw: "", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/prov/f1", hdr: map[string]string{"Accept": "image/png"}, status: 406, want: `{"error":"not_acceptable","reason":"Content-Type image/png not supported, try one of: text/html; charset=utf-8, application/json, text/x-json"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_show/reg", hdr: map[string]string{"Accept": "application/x-foo"}, status: 200, raw: "foo!", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/x-foo", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/reg", hdr: map[string]string{"Accept": "text/plain"}, status: 200, raw: "text!", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/this?who=you", status: 200, raw: "Render hi you", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "Vary": "Accept"}},
	{method: "GET", path: "/{db}/_design/r/_show/throw", status: 500, want: `{"error":"render_error","reason":"function raised error: ({forbidden:\"show says no\"}) \nstacktrace: undefined"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_show/oops", status: 500, err: "render_error", reasonPrefix: "function raised error: (new TypeError(", wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_show/num", status: 500, want: `{"error":"unknown_error","reason":"badarg"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_show/nope", status: 404, want: `{"error":"not_found","reason":"missing json key: nope"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/nope/_show/hello", status: 404, want: `{"error":"not_found","reason":"missing"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	// _list over a view: head, rows, the view's query parameters
	{method: "GET", path: "/{db}/_design/r/_list/basic/by_n?tail=t", status: 200, raw: "total=5 offset=0\nf1 1 \"a\"\nf2 2 \"b\"\nf3 3 \"a\"\nf4 4 \"b\"\ncf 6 \"a\"\nend t", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/by_n?limit=2&tail=t", status: 200, raw: "total=5 offset=0\nf1 1 \"a\"\nf2 2 \"b\"\nend t", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/by_n?startkey=3&endkey=5", status: 200, raw: "total=5 offset=2\nf3 3 \"a\"\nf4 4 \"b\"\nend undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/by_n?descending=true&skip=1&include_docs=true", status: 200, raw: "total=5 offset=1\nf4 4 \"b\" doc f4\nf3 3 \"a\" doc f3\nf2 2 \"b\" doc f2\nf1 1 \"a\" doc f1\nend undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/by_n?key=2", status: 200, raw: "total=5 offset=1\nf2 2 \"b\"\nend undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/count?group=true", status: 200, raw: "total=undefined offset=undefined\nundefined \"a\" 3\nundefined \"b\" 2\nend undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/count", status: 200, raw: "total=undefined offset=undefined\nundefined null 5\nend undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/o/t", status: 200, raw: "total=5 offset=0\ncf \"a\" 6\nf1 \"a\" 1\nf3 \"a\" 3\nf2 \"b\" 2\nf4 \"b\" 4\nend undefined", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/plain", "X-L": "1"}},
	{method: "GET", path: "/{db}/_design/r/_list/json/by_n?limit=3", status: 200, raw: "{\"head\":{\"total_rows\":5,\"offset\":0},\"keys\":[1,2,3]}", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_list/code/by_n", status: 203, raw: "no rows read", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json", "X-C": "c"}},
	{method: "GET", path: "/{db}/_design/r/_list/prov/by_n", hdr: map[string]string{"Accept": "application/json"}, status: 200, raw: "[1,2,3,4,6]", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_list/prov/by_n", hdr: map[string]string{"Accept": "text/html"}, status: 200, raw: "<ul></ul>", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8"}},
	{method: "GET", path: "/{db}/_design/r/_list/this/by_n", status: 200, raw: "Render", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_list/oops/by_n", status: 500, raw: "\n{\"code\":500,\"error\":\"render_error\",\"reason\":\"function raised error: ({forbidden:\\\"list says no\\\"}) \\nstacktrace: undefined\"}\n", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_list/nope/by_n", status: 404, want: `{"error":"not_found","reason":"missing json key: nope"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/nope", status: 404, want: `{"error":"not_found","reason":"missing_named_view"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_list/basic/by_n?limit=x", status: 400, want: `{"error":"query_parse_error","reason":"Invalid value for integer: \"x\""}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	// _update
	{method: "POST", path: "/{db}/_design/r/_update/bump/f1", status: 201, raw: "bumped f1 to 2", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "X-Couch-Id": "f1", "X-Couch-Update-Newrev": "2-<rev>"}},
	{method: "GET", path: "/{db}/f1", status: 200, want: `{"_id":"f1","_rev":"2-de8cff6ba63a5f49f27cce998c35459e","type":"a","n":2}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "PUT", path: "/{db}/_design/r/_update/bump/nodoc", status: 404, raw: "no doc nodoc", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8"}},
	{method: "POST", path: "/{db}/_design/r/_update/bump", status: 404, raw: "no doc null", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8"}},
	{method: "POST", path: "/{db}/_design/r/_update/create/u1", body: `{"v":"one"}`, status: 201, raw: "{\"made\":\"u1\",\"method\":\"POST\"}\n", wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json", "X-Couch-Id": "u1", "X-Couch-Update-Newrev": "1-<rev>"}},
	{method: "POST", path: "/{db}/_design/r/_update/create?id=u2", body: `{"v":"two"}`, status: 201, raw: "{\"made\":\"u2\",\"method\":\"POST\"}\n", wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json", "X-Couch-Id": "u2", "X-Couch-Update-Newrev": "1-<rev>"}},
	{method: "GET", path: "/{db}/u2", status: 200, want: `{"_id":"u2","_rev":"1-d8e9d41189840569ddd22ddd98706234","v":"two"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "PUT", path: "/{db}/_design/r/_update/create/u1", body: `{}`, status: 200, raw: "exists u1", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8"}},
	{method: "POST", path: "/{db}/_design/r/_update/nothing/x", status: 202, raw: "nothing x", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "X-U": "u"}},
	{method: "POST", path: "/{db}/_design/r/_update/coded/c1", status: 200, raw: "saved with 200", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8", "X-Couch-Id": "c1", "X-Couch-Update-Newrev": "1-<rev>"}},
	{method: "POST", path: "/{db}/_design/r/_update/form", body: `a=1&b=two%20words`, hdr: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 200, want: `{"form":{"a":"1","b":"two words"},"body":"a=1&b=two%20words"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "GET", path: "/{db}/_design/r/_update/bump/f1", status: 405, want: `{"error":"method_not_allowed","reason":"Update functions do not allow GET"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "POST", path: "/{db}/_design/r/_update/notarr", status: 200, raw: "o", wantHdr: map[string]string{"Content-Security-Policy": "sandbox", "Content-Type": "text/html; charset=utf-8"}},
	{method: "POST", path: "/{db}/_design/r/_update/noid", status: 400, want: `{"error":"illegal_docid","reason":"Document id must not be empty"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "POST", path: "/{db}/_design/r/_update/throws", status: 500, want: `{"error":"render_error","reason":"function raised error: ({forbidden:\"update says no\"}) \nstacktrace: undefined"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "POST", path: "/{db}/_design/r/_update/vdu/v1", status: 403, want: `{"error":"forbidden","reason":"no by update"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "POST", path: "/{db}/_design/r/_update/nope", status: 404, want: `{"error":"not_found","reason":"missing json key: nope"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
	{method: "POST", path: "/{db}/_design/nope/_update/bump", status: 404, want: `{"error":"not_found","reason":"missing"}`, wantHdr: map[string]string{"Content-Security-Policy": "", "Content-Type": "application/json"}},
}

// normDDoc makes answers comparable: normView's revs; changes' rows sorted
// by id and their seqs typed (a seq is the server's own).
func normDDoc(v any) any {
	v = normHashes(normView(v, ""))
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for _, k := range []string{"last_seq", "pending"} {
		if x, ok := m[k]; ok {
			m[k] = jsonType(x)
		}
	}
	if rows, ok := m["results"].([]any); ok {
		for _, r := range rows {
			if rm, ok := r.(map[string]any); ok {
				rm["seq"] = jsonType(rm["seq"])
			}
		}
		sort.Slice(rows, func(i, j int) bool { return jsonText(rows[i]) < jsonText(rows[j]) })
	}
	return m
}

// normHashes normalises the revs inside strings (a doc a function
// stringified into an error's reason).
func normHashes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normHashes(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normHashes(e)
		}
	case string:
		return bareHash.ReplaceAllString(normText(x), "<hash>")
	}
	return v
}

var bareHash = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

// revText normalises the revs in a text answer or header.
var revText = regexp.MustCompile(`\b(\d+)-[0-9a-f]{32}\b`)

func normText(s string) string { return revText.ReplaceAllString(s, "$1-<rev>") }

// skipHdr are the headers the recorder leaves out: each server's own.
var skipHdr = map[string]bool{"Date": true, "Server": true, "X-Couch-Request-Id": true, "Content-Length": true,
	"Cache-Control": true, "X-Content-Type-Options": true, "Transfer-Encoding": true}

func runDDocSteps(t *testing.T, base, user, pw, db string, steps []ddocStep, settle time.Duration) {
	t.Helper()
	kept := []string{"{db}", db}
	for i, st := range steps {
		subst := strings.NewReplacer(kept...)
		where := fmt.Sprintf("step %d: %s %s", i, st.method, st.path)
		do := func() (*http.Response, []byte) {
			req := stepRequest(t, base, user, pw, st.as, st.method, st.path, st.body, st.hdr, subst)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s: reading the answer: %v", where, err)
			}
			return resp, b
		}
		resp, b := do()
		for until := time.Now().Add(st.retry); resp.StatusCode != st.status && time.Now().Before(until); {
			time.Sleep(50 * time.Millisecond)
			resp, b = do()
		}
		if recordViews {
			var hs []string
			for k, v := range resp.Header {
				if !skipHdr[k] {
					hs = append(hs, k+"="+normText(strings.Join(v, ",")))
				}
			}
			sort.Strings(hs)
			var c bytes.Buffer
			todo := st.want == "TODO" || st.raw == "TODO"
			if json.Compact(&c, b) == nil && st.raw == "" {
				t.Logf("REC %d %d %t %q %s", i, resp.StatusCode, todo, hs, c.Bytes())
			} else {
				t.Logf("REC %d %d %t %q RAW %q", i, resp.StatusCode, todo, hs, normText(string(b)))
			}
		} else {
			err := st.check(resp, b, subst)
			wait := time.Duration(0)
			if st.lags {
				wait = settle
			}
			for until := time.Now().Add(wait); err != nil && time.Now().Before(until); {
				time.Sleep(100 * time.Millisecond)
				resp, b = do()
				err = st.check(resp, b, subst)
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
		if st.keep != "" {
			var r struct {
				Rev    string `json:"rev"`
				DocRev string `json:"_rev"`
			}
			_ = json.Unmarshal(b, &r)
			// first, so that it wins over an older value of the same name
			kept = append([]string{"{" + st.keep + "}", r.Rev + r.DocRev}, kept...)
		}
	}
}

func (st ddocStep) check(resp *http.Response, b []byte, subst *strings.Replacer) error {
	if resp.StatusCode != st.status {
		return fmt.Errorf("status %d, want %d: %s", resp.StatusCode, st.status, clip(b))
	}
	if st.raw != "" && normText(string(b)) != st.raw {
		return fmt.Errorf("body %q, want %q", normText(string(b)), st.raw)
	}
	if st.err != "" {
		var e struct{ Error, Reason string }
		if json.Unmarshal(b, &e) != nil || e.Error != st.err || !strings.HasPrefix(e.Reason, st.reasonPrefix) {
			return fmt.Errorf("answer %s, want %q/%q…", clip(b), st.err, st.reasonPrefix)
		}
	}
	if st.want != "" {
		got, err := decodeJSON(b)
		if err != nil {
			return fmt.Errorf("answer %s: %v", clip(b), err)
		}
		want, err := decodeJSON([]byte(subst.Replace(st.want)))
		if err != nil {
			return fmt.Errorf("the table's want %s: %v", st.want, err)
		}
		got, want = normDDoc(got), normDDoc(want)
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("\n got  %s\n want %s", jsonText(got), jsonText(want))
		}
	}
	for k, v := range st.wantHdr {
		if g := normText(resp.Header.Get(k)); g != v {
			return fmt.Errorf("header %s %q, want %q", k, g, v)
		}
	}
	return nil
}

// ddocTables are the tables and the database each runs on.
var ddocTables = []struct {
	db    string
	steps []ddocStep
}{
	{"fns_vdu", vduSteps},
	{"fns_filter", filterSteps},
	{"fns_render", renderSteps},
}

func runDDocTables(t *testing.T, base, user, pw string, settle time.Duration, mkdb func(db string)) {
	runDDocSteps(t, base, user, pw, "", ddocUserSteps[:2], 0)
	for _, tb := range ddocTables {
		t.Run(tb.db, func(t *testing.T) {
			mkdb(tb.db)
			steps := append(append([]ddocStep{}, ddocUserSteps[2:]...), tb.steps...)
			if tb.db == "fns_render" {
				// the render table reads the filter table's docs
				steps = append([]ddocStep{{method: "POST", path: "/{db}/_bulk_docs", body: filterDocs, status: 201, want: `[]`}}, steps...)
			}
			runDDocSteps(t, base, user, pw, tb.db, steps, settle)
		})
	}
}

func TestDDocFunctions(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	runDDocTables(t, s.URL, testserver.AdminUser, testserver.AdminPassword, 0, func(db string) {
		mustCall(t, s, 201, "PUT", "/"+db, nil, nil)
	})
}

func TestDDocFunctionsAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	// CouchDB's design doc cache has taken over 5 s to drop a removed
	// validate_doc_update (2 runs in 5): a lagging step is asked again
	// for up to 20 s; one that answers at once costs nothing
	runDDocTables(t, cs.URL, cs.User, cs.Password, 20*time.Second, func(db string) {
		runDDocSteps(t, cs.URL, cs.User, cs.Password, "", []ddocStep{{method: "PUT", path: "/" + db, status: 201}}, 0)
	})
}
