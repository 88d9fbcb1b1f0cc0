package httpgw_test

import (
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// _rewrite: rewriteSteps are requests and what Apache CouchDB 3.5.2
// answers them (recorded from it with SETTEE_VIEWS_RECORD=1 and
// TestRewriteAsCouchDB, not written by hand); TestRewrite runs the same
// table on settee.

// rwShows are what the rewritten requests land on: they print what they
// were asked (the path without the database's name).
var rwShows = map[string]any{
	"hello":  `function(doc, req) { return {body: 'hello ' + (doc ? doc._id : 'nodoc') + ' ' + JSON.stringify(req.query) + ' ' + req.path.slice(1).join('/') + ' ' + req.method}; }`,
	"method": `function(doc, req) { return req.method + ' ' + req.body; }`,
	"q":      `function(doc, req) { return req.query.x + ' ' + req.raw_path.split('/').slice(2).join('/'); }`,
}

// rwFnDDoc is the function form, CouchDB 3.x's.
var rwFnDDoc = jsonOf(map[string]any{
	"rewrites": `function(req) {
  var p = req.path.slice(4);
  if (p[0] === 'doc') return '../../' + p.slice(1).join('/');
  if (p[0] === 'str') return p.slice(1).join('/');
  if (p[0] === 'show') return {path: '_show/hello/' + (p[1] || ''), query: {x: 'y'}};
  if (p[0] === 'keepq') return {path: '_show/hello'};
  if (p[0] === 'abs') return {path: '/' + p.slice(1).join('/')};
  if (p[0] === 'up3') return {path: '../../../' + p.slice(1).join('/')};
  if (p[0] === 'code') return {code: 418, headers: {'X-A': 'b'}, body: 'teapot'};
  if (p[0] === 'nocode') return {code: 99};
  if (p[0] === 'echo') return {code: 200};
  if (p[0] === 'method') return {code: 200, headers: {'X-M': req.method}, body: 'm'};
  if (p[0] === 'put') return {path: '../../' + p[1], method: 'PUT', body: '{"made":true}', headers: {'Content-Type': 'application/json'}};
  if (p[0] === 'nopath') return {query: {a: 'b'}};
  if (p[0] === 'badpath') return {path: 1};
  if (p[0] === 'badmethod') return {path: 'x', method: 2};
  if (p[0] === 'badbody') return {path: 'x', body: {}};
  if (p[0] === 'badq') return {path: 'x', query: {a: 1}};
  if (p[0] === 'badh') return {path: 'x', headers: {a: 1}};
  if (p[0] === 'badq2') return {path: 'x', query: 'a=b'};
  if (p[0] === 'arr') return [1];
  if (p[0] === 'num') return 7;
  if (p[0] === 'throw') throw({forbidden: 'no way'});
  if (p[0] === 'throws') throw('oops');
  if (p[0] === 'throwe') return null.x;
  if (p[0] === 'throwo') throw({error: 'custom', reason: 'mine'});
  if (p[0] === 'self') return {path: '_rewrite/' + p.slice(1).join('/')};
  if (p[0] === 'loop') return '_rewrite/loop';
  if (p[0] === 'm') return {path: '_show/method', method: p[1]};
  if (p[0] === 'q') return {path: '_show/q', query: {'a b': 'c&d', e: 'f/g'}};
  if (p[0] === 'this') return {path: '_show/' + this.target};
  if (p[0] === 'lib') return {path: '_show/' + require('lib/t').target};
  return false;
}`,
	"target": "hello",
	"shows":  rwShows,
	"lib":    map[string]any{"t": "exports.target = 'method';"},
})

// rwRulesDDoc is the legacy array of rules.
var rwRulesDDoc = jsonOf(map[string]any{
	"rewrites": []any{
		map[string]any{"from": "", "to": "_show/hello"},
		map[string]any{"from": "/doc/:id", "to": "../../:id"},
		map[string]any{"from": "/d2/:id", "to": "../../:id", "method": "GET"},
		map[string]any{"from": "/d2/:id", "to": "_show/hello/:id", "method": "POST"},
		map[string]any{"from": "/q/:a/:b", "to": "_show/q", "query": map[string]any{"x": ":a", "y": ":b", "k": "lit"}},
		map[string]any{"from": "/key/:k", "to": "_view/v", "query": map[string]any{"key": ":k"}},
		map[string]any{"from": "/ikey/:k", "to": "_view/v", "query": map[string]any{"key": ":k"}, "formats": map[string]any{"k": "int"}},
		map[string]any{"from": "/star/*", "to": "_show/hello/*"},
		map[string]any{"from": "/all/*", "to": "../../*"},
		map[string]any{"from": "/loop", "to": "_rewrite/loop"},
		map[string]any{"from": "/fmt/:n", "to": "_show/q", "query": map[string]any{"n": ":n", "b": ":b"}, "formats": map[string]any{"n": "int", "b": "bool"}},
		map[string]any{"from": "/views", "to": "_view/v"},
		map[string]any{"from": "/ddoc", "to": "."},
		map[string]any{"from": "/lit/x", "to": "_show/hello/lit"},
		map[string]any{"from": "/undef/:a", "to": "_show/hello/:zz"},
		"not a rule",
	},
	"shows": rwShows,
	"views": map[string]any{"v": map[string]any{"map": `function(doc) { if (doc.a) emit(doc.a, null); }`}},
})

// rwRules3DDoc has the rules of the finer points.
var rwRules3DDoc = jsonOf(map[string]any{
	"rewrites": []any{
		map[string]any{"from": "/anym", "to": "_show/hello", "method": "*"},
		map[string]any{"from": "/a/*/c", "to": "_show/hello/*", "query": map[string]any{"s": "*"}},
		map[string]any{"from": "/k", "to": "_view/v"},
		map[string]any{"from": "/ks", "to": "_view/v", "query": map[string]any{"keys": []any{":a", ":b"}}},
		map[string]any{"from": "/p/:id", "to": "_show/hello/:id"},
		map[string]any{"from": "/num", "to": "_show/hello", "query": map[string]any{"n": 5}},
		map[string]any{"from": "/obj", "to": "_view/v", "query": map[string]any{"key": map[string]any{"a": 1}}},
		map[string]any{"from": "/star/*", "to": "_show/hello/*"},
		map[string]any{"from": "/nomethod", "to": "_show/hello", "method": 1},
	},
	"shows": rwShows,
	"views": map[string]any{"v": map[string]any{"map": `function(doc) { if (doc.a) emit(doc.a, null); }`}},
})

var rewriteSteps = []ddocStep{
	{method: "PUT", path: "/{db}/doc1", body: `{"a":1}`, status: 201},
	{method: "PUT", path: "/{db}_other", status: 201},
	{method: "PUT", path: "/{db}_other/od", body: `{"o":1}`, status: 201},
	{method: "PUT", path: "/{db}/_design/fn", body: rwFnDDoc, status: 201},
	{method: "PUT", path: "/{db}/_design/rules", body: rwRulesDDoc, status: 201},
	// the function form
	{method: "GET", path: "/{db}/_design/fn/_rewrite/doc/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/str/_show/hello/doc1", status: 200, raw: `hello doc1 {} _design/fn/_show/hello/doc1 GET`, wantHdr: map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": "sandbox"}},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/show/doc1", status: 200, raw: `hello doc1 {"x":"y"} _design/fn/_show/hello/doc1 GET`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/keepq?k=v", status: 200, raw: `hello nodoc {"k":"v"} _design/fn/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/abs/_show/hello", status: 200, raw: `hello nodoc {} _design/fn/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/up3/{db}_other/od", status: 200, want: `{"_id":"od","_rev":"1-6e52dcb6275493780182469512b96dd9","o":1}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/doc/_all_docs?limit=0", status: 200, want: `{"total_rows":3,"offset":0,"rows":[]}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/code", status: 418, raw: "teapot", wantHdr: map[string]string{"X-A": "b", "Content-Type": ""}},
	{method: "HEAD", path: "/{db}/_design/fn/_rewrite/code", status: 418, wantHdr: map[string]string{"X-A": "b", "Content-Type": ""}},
	{method: "HEAD", path: "/{db}/_design/fn/_rewrite/method", status: 200, wantHdr: map[string]string{"X-M": "GET"}},
	{method: "DELETE", path: "/{db}/_design/fn/_rewrite/method", status: 200, raw: "m", wantHdr: map[string]string{"X-M": "DELETE"}},
	{method: "POST", path: "/{db}/_design/fn/_rewrite/echo", body: "mybody", hdr: map[string]string{"Content-Type": "text/plain"}, status: 200, raw: "mybody", wantHdr: map[string]string{"Content-Type": ""}},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/put/made", status: 201, want: `{"ok":true,"id":"made","rev":"1-b8ca9647c79798f0820e66ef27ab8598"}`},
	{method: "GET", path: "/{db}/made", status: 200, want: `{"_id":"made","_rev":"1-b8ca9647c79798f0820e66ef27ab8598","made":true}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/self/self/doc/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/m/DELETE", status: 200, raw: "DELETE undefined"},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/m/HEAD", status: 200, raw: "GET undefined"},
	{method: "POST", path: "/{db}/_design/fn/_rewrite/m/POST", body: "the body", hdr: map[string]string{"Content-Type": "text/plain"}, status: 200, raw: "POST the body"},
	{method: "PUT", path: "/{db}/_design/fn/_rewrite/m/POST", body: "put body", hdr: map[string]string{"Content-Type": "text/plain"}, status: 200, raw: "POST put body"},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/q", status: 200, raw: `undefined _design/fn/_show/q?a+b=c%26d&e=f%2Fg`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/this", status: 200, raw: `hello nodoc {} _design/fn/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/lib", status: 200, raw: `GET undefined`},
	// what the function answers wrong
	{method: "GET", path: "/{db}/_design/fn/_rewrite/nothing", status: 404, want: `{"error":"rewrite_error","reason":"Invalid path."}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite", status: 404, want: `{"error":"rewrite_error","reason":"Invalid path."}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/nocode", status: 500, want: `{"error":"rewrite_error","reason":"bad code"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/nopath", status: 500, want: `{"error":"rewrite_error","reason":"Rewrite result must produce a new path."}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/badpath", status: 500, want: `{"error":"rewrite_error","reason":"bad path"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/badmethod", status: 500, want: `{"error":"rewrite_error","reason":"bad method"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/badbody", status: 500, want: `{"error":"rewrite_error","reason":"bad body"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/badq", status: 500, want: `{"error":"rewrite_error","reason":"object key/value must be strings <<\"a\">>=1"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/badh", status: 500, want: `{"error":"rewrite_error","reason":"object key/value must be strings <<\"a\">>=1"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/badq2", status: 500, want: `{"error":"rewrite_error","reason":"bad query"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/arr", status: 500, want: `{"error":"rewrite_error","reason":"bad rewrite"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/num", status: 500, want: `{"error":"rewrite_error","reason":"bad rewrite"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/throw", status: 500, want: `{"error":"rewrite_error","reason":"function raised error: ({forbidden:\"no way\"}) \nstacktrace: undefined"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/throws", status: 500, want: `{"error":"rewrite_error","reason":"function raised error: (new String(\"oops\")) \nstacktrace: undefined"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/throwe", status: 500, err: "rewrite_error", reasonPrefix: "function raised error: (new TypeError("},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/throwo", status: 500, want: `{"error":"custom","reason":"mine"}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/loop", status: 400, want: `{"error":"bad_request","reason":"Exceeded rewrite recursion limit"}`},
	// chttpd/rewrite_limit: three rewrites pass, a fourth is refused
	{method: "PUT", path: "/_node/_local/_config/chttpd/rewrite_limit", body: `"3"`, status: 200},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/self/self/doc/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/self/self/self/doc/doc1", status: 400, want: `{"error":"bad_request","reason":"Exceeded rewrite recursion limit"}`},
	{method: "DELETE", path: "/_node/_local/_config/chttpd/rewrite_limit", status: 200},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/self/self/self/doc/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	// the rules
	{method: "GET", path: "/{db}/_design/rules/_rewrite", status: 200, raw: `hello nodoc {} _design/rules/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite?x=1", status: 200, raw: `hello nodoc {"x":"1"} _design/rules/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/doc/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/d2/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "POST", path: "/{db}/_design/rules/_rewrite/d2/doc1", body: `{}`, status: 200, raw: `hello doc1 {"id":"doc1"} _design/rules/_show/hello/doc1 POST`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/q/1/2", status: 200, raw: `1 _design/rules/_show/q?k=lit&x=1&y=2&a=1&b=2`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/q/1/2?z=3&x=9&w=4", status: 200, raw: `1 _design/rules/_show/q?k=lit&x=1&y=2&w=4&z=3&a=1&b=2`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/key/1", status: 200, want: `{"total_rows":1,"offset":1,"rows":[]}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/ikey/1", status: 200, want: `{"total_rows":1,"offset":0,"rows":[{"id":"doc1","key":1,"value":null}]}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/views", status: 200, want: `{"total_rows":1,"offset":0,"rows":[{"id":"doc1","key":1,"value":null}]}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/star/a/b", status: 200, raw: `hello nodoc {} _design/rules/_show/hello/a/b GET`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/star", status: 200, raw: `hello nodoc {} _design/rules/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/all/doc1", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/all/_all_docs?limit=0", status: 200, want: `{"total_rows":4,"offset":0,"rows":[]}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/fmt/x?b=no", status: 200, raw: `undefined _design/rules/_show/q?b=no&n=x`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/ddoc", status: 200},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/lit/x", status: 200, raw: `hello nodoc {} _design/rules/_show/hello/lit GET`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/lit/y", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/undef/q", status: 200, raw: `hello nodoc {"a":"q"} _design/rules/_show/hello/undefined GET`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/nomatch", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "GET", path: "/{db}/_design/rules/_rewrite/loop", status: 400, want: `{"error":"bad_request","reason":"Exceeded rewrite recursion limit"}`},
	// more rules: any method, a "*" inside from, JSON query values
	{method: "PUT", path: "/{db}/_design/r3", body: rwRules3DDoc, status: 201},
	{method: "POST", path: "/{db}/_design/r3/_rewrite/anym", body: `{}`, status: 200, raw: `hello nodoc {} _design/r3/_show/hello POST`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/a/b/c", status: 200, raw: `hello nodoc {"s":"b"} _design/r3/_show/hello GET`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/k?key=abc", status: 400, want: `{"error":"bad_request","reason":"invalid UTF-8 JSON"}`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/k?key=1", status: 200, want: `{"total_rows":1,"offset":0,"rows":[{"id":"doc1","key":1,"value":null}]}`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/ks?a=1&b=x", status: 200, want: `{"total_rows":1,"offset":1,"rows":[]}`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/ks?a=1&b=1", status: 200, want: `{"total_rows":1,"offset":1,"rows":[]}`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/p/x?id=y", status: 200, raw: `hello nodoc {"id":"x"} _design/r3/_show/hello/x GET`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/num", status: 500, err: "unknown_error", reasonPrefix: "badarg"},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/obj", status: 200, want: `{"total_rows":1,"offset":1,"rows":[]}`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/star/a%20b", status: 200, raw: `hello nodoc {} _design/r3/_show/hello/a b GET`},
	{method: "GET", path: "/{db}/_design/r3/_rewrite/nomethod", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "PUT", path: "/{db}/_design/r4", body: `{"rewrites":[{"from":5,"to":"x"}]}`, status: 201},
	{method: "GET", path: "/{db}/_design/r4/_rewrite/a", status: 500, err: "unknown_error", reasonPrefix: "badarg"},
	{method: "PUT", path: "/{db}/_design/fn3", body: `{"rewrites":"function(req) { return {code: 201.5}; }"}`, status: 201},
	{method: "GET", path: "/{db}/_design/fn3/_rewrite/a", status: 500, want: `{"error":"rewrite_error","reason":"bad code"}`},
	// design docs that cannot rewrite
	{method: "GET", path: "/{db}/_design/nope/_rewrite/foo", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "PUT", path: "/{db}/_design/none", body: `{}`, status: 201},
	{method: "GET", path: "/{db}/_design/none/_rewrite/foo", status: 404, want: `{"error":"rewrite_error","reason":"Invalid path."}`},
	{method: "PUT", path: "/{db}/_design/empty", body: `{"rewrites":[]}`, status: 201},
	{method: "GET", path: "/{db}/_design/empty/_rewrite/foo", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "PUT", path: "/{db}/_design/noto", body: `{"rewrites":[{"from":"a"}]}`, status: 201},
	{method: "GET", path: "/{db}/_design/noto/_rewrite/a", status: 500, want: `{"error":"error","reason":"invalid_rewrite_target"}`},
	{method: "PUT", path: "/{db}/_design/up3", body: `{"rewrites":[{"from":"a","to":"../../doc1"},{"from":"b","to":"../../../_all_dbs"}]}`, status: 201},
	{method: "GET", path: "/{db}/_design/up3/_rewrite/a", status: 500, want: `{"error":"insecure_rewrite_rule","reason":"too many ../.. segments"}`},
	// a ".." of from and two of to: each path is counted alone
	{method: "PUT", path: "/{db}/_design/up2", body: `{"rewrites":[{"from":"../a","to":"../../doc1"}]}`, status: 201},
	{method: "GET", path: "/{db}/_design/up2/_rewrite/a", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "GET", path: "/{db}/_design/up2/_rewrite/../a", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "PUT", path: "/{db}/_design/syn", body: `{"rewrites":"function(req) { return {path: ; }"}`, status: 201},
	{method: "GET", path: "/{db}/_design/syn/_rewrite/a", status: 500, err: "compilation_error"},
	{method: "PUT", path: "/{db}/_design/notfn", body: `{"rewrites":"42"}`, status: 201},
	{method: "GET", path: "/{db}/_design/notfn/_rewrite/a", status: 500, want: `{"error":"compilation_error","reason":"Expression does not eval to a function. (42)"}`},
	{method: "PUT", path: "/{db}/_design/semi", body: `{"rewrites":"function(req) { return \"../../doc1\"; };\n"}`, status: 201},
	{method: "GET", path: "/{db}/_design/semi/_rewrite/a", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	// (CouchDB refuses a design doc whose rewrites is neither, 400
	// invalid_design_doc "`rewrites` field must have array or string
	// type"; settee stores it, and answers its _rewrite "Invalid path.")
	// a member's rights: the database's, then the target's
	{method: "GET", path: "/{db}/_design/fn/_rewrite/doc/doc1", as: "bob:pw", status: 200, want: `{"_id":"doc1","_rev":"1-23202479633c2b380f79507a776743d5","a":1}`},
	{method: "PUT", path: "/{db}_other/_security", body: `{"members":{"names":["alice"]},"admins":{"names":[]}}`, status: 200},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/up3/{db}_other/od", as: "bob:pw", status: 403, want: `{"error":"forbidden","reason":"You are not allowed to access this db."}`},
	{method: "GET", path: "/{db}/_design/fn/_rewrite/up3/{db}_other/od", as: "alice:pw", status: 200, want: `{"_id":"od","_rev":"1-6e52dcb6275493780182469512b96dd9","o":1}`, retry: 5 * time.Second},
}

func runRewriteTable(t *testing.T, base, user, pw string, mkdb func(db string)) {
	runDDocSteps(t, base, user, pw, "", ddocUserSteps[:2], 0)
	mkdb("rw_db")
	runDDocSteps(t, base, user, pw, "rw_db", append(append([]ddocStep{}, ddocUserSteps[2:]...), rewriteSteps...), 0)
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	runRewriteTable(t, s.URL, testserver.AdminUser, testserver.AdminPassword, func(db string) {
		mustCall(t, s, 201, "PUT", "/"+db, nil, nil)
	})
}

func TestRewriteAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	runRewriteTable(t, cs.URL, cs.User, cs.Password, func(db string) {
		runDDocSteps(t, cs.URL, cs.User, cs.Password, "", []ddocStep{{method: "PUT", path: "/" + db, status: 201}}, 0)
	})
}
