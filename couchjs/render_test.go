package couchjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCouchNumbers(t *testing.T) {
	// Left: JSON.stringify's text; right: what CouchDB 3.5.2 answers.
	for _, tc := range [][2]string{
		{`1e+21`, `1.0e21`}, {`0.000001`, `1.0e-6`}, {`1e-7`, `1.0e-7`}, {`123.456`, `123.456`},
		{`1e+300`, `1.0e300`}, {`2e-300`, `2.0e-300`}, {`0.5`, `0.5`}, {`0.0001`, `0.0001`},
		{`0.00001`, `1.0e-5`}, {`0.00012345`, `1.2345e-4`}, {`5e-324`, `5.0e-324`},
		{`1.7976931348623157e+308`, `1.7976931348623157e308`}, {`-1e-7`, `-1.0e-7`},
		{`[100,"1e+21",{"a":1.5e+21}]`, `[100,"1e+21",{"a":1.5e21}]`},
		{`"\ud800x\ud83d\ude00"`, "\"\uFFFDx\\ud83d\\ude00\""},
	} {
		if got := string(couchNumbers([]byte(tc[0]))); got != tc[1] {
			t.Errorf("%s: got %s, want %s", tc[0], got, tc[1])
		}
	}
}

func TestReduce(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	ctx := context.Background()
	keys := [][]byte{[]byte(`["a","d1"]`), []byte(`["b","d2"]`)}
	vals := [][]byte{[]byte(`1`), []byte(`2.5`)}
	for _, tc := range []struct {
		name, src string
		rereduce  bool
		want      string
	}{
		{"sum", `function(k, v, re) { return sum(v); }`, false, `3.5`},
		{"keys", `function(k, v, re) { return k.map(function(x){ return x[1]; }); }`, false, `["d1","d2"]`},
		{"rereduce", `function(k, v, re) { return [k, re]; }`, true, `[null,true]`},
		{"undefined", `function(k, v) { }`, false, `null`},
		{"throws", `function(k, v) { throw new Error('x'); }`, false, `null`},
		{"float", `function(k, v) { return 1e21; }`, false, `1.0e21`},
	} {
		got, err := p.Reduce(ctx, tc.src, keys, vals, tc.rereduce)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %s %v, want %s", tc.name, got, err, tc.want)
		}
	}
	_, err := p.Reduce(ctx, `function(k, v) { throw ["fatal", "f", "r"]; }`, keys, vals, false)
	var e *Error
	if !errors.As(err, &e) || e.Code != "f" {
		t.Errorf("fatal: %v", err)
	}
}

func TestFilter(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	docs := [][]byte{[]byte(`{"_id":"a","n":1}`), []byte(`{"_id":"b","n":2}`), []byte(`{"_id":"c"}`)}
	for _, tc := range []struct{ src, want string }{
		{`function(doc, req) { return doc.n > 1; }`, "[false true false]"},
		{`function(doc, req) { return doc.n; }`, "[true true false]"},
		{`function(doc, req) { return doc._id == req.query.id; }`, "[false false true]"},
		{`function(doc, req) { doc.x = 1; return doc.x === 1; }`, "[true true true]"}, // filter docs are not frozen
	} {
		got, err := p.Filter(context.Background(), tc.src, docs, []byte(`{"query":{"id":"c"}}`))
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.src, got, err, tc.want)
		}
	}
}

func TestValidateDocUpdate(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	for _, tc := range []struct{ body, code, reason string }{
		{``, "", ""},
		{`throw({forbidden: 'no way'})`, "forbidden", "no way"},
		{`throw({unauthorized: 'who'})`, "unauthorized", "who"},
		{`if (!userCtx.roles.length) throw({forbidden: 'no roles'})`, "forbidden", "no roles"},
		{`if (oldDoc === null) throw({forbidden: 'new ' + newDoc._id})`, "forbidden", "new t"},
		{`if (secObj.admins) throw({forbidden: 'sec'})`, "forbidden", "sec"},
		{`throw({other: 1})`, "unknown_error", "1"},
		{`throw('str')`, "unknown_error", "str"},
		{`throw(new Error('boom'))`, "Error", "{[]}"},
	} {
		src := "function(newDoc, oldDoc, userCtx, secObj) { " + tc.body + " }"
		err := p.ValidateDocUpdate(context.Background(), src, []byte(`{"_id":"t"}`), nil, []byte(`{"name":null,"roles":[]}`), []byte(`{"admins":{}}`))
		var e *Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason):
			t.Errorf("%s: %v, want %s: %s", tc.body, err, tc.code, tc.reason)
		}
	}
}

func TestShowListUpdate(t *testing.T) {
	p := newPool(t, Config{MaxWorkers: 1})
	ctx := context.Background()
	doc := []byte(`{"_id":"d1","title":"T"}`)
	for _, tc := range []struct{ name, src, req, want string }{
		{"string", `function(doc, req) { return '<h1>' + doc.title + '</h1>'; }`, `{}`, `200 text/html; charset=utf-8 <h1>T</h1>`},
		{"object", `function(doc, req) { return {code: 404, headers: {'Content-Type': 'text/plain'}, body: 'no'}; }`, `{}`, `404 text/plain no`},
		{"json", `function(doc, req) { return {json: [1, 0.5]}; }`, `{}`, "200 application/json [1,0.5]\n"},
		{"base64", `function(doc, req) { return {base64: 'aGk='}; }`, `{}`, `200 application/binary hi`},
		{"send and return", `function(doc, req) { send('a'); return 'b'; }`, `{}`, `200 text/html; charset=utf-8 ab`},
		{"provides format", `function(doc, req) { provides('html', function(){ return 'H'; }); provides('json', function(){ return '{}'; }); }`, `{"query":{"format":"json"},"headers":{}}`, `200 application/json {}`},
		{"provides accept */*", `function(doc, req) { provides('json', function(){ return 'J'; }); provides('html', function(){ return 'H'; }); }`, `{"query":{},"headers":{"Accept":"*/*"}}`, `200 text/x-json J`},
		{"registerType", `function(doc, req) { registerType('foo', 'application/foo'); provides('foo', function(){ return 'F'; }); }`, `{"query":{},"headers":{"Accept":"application/foo"}}`, `200 application/foo F`},
		{"this is the ddoc", `function(doc, req) { return this.name + require('lib/x').v; }`, `{}`, `200 text/html; charset=utf-8 ddx`},
	} {
		resp, err := p.DDoc("db", []byte(`{"_id":"_design/dd","name":"dd","lib":{"x":"exports.v = 'x'"}}`)).Show(ctx, tc.src, doc, []byte(tc.req))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := fmt.Sprintf("%d %s %s", resp.Code, resp.Headers["Content-Type"], resp.Body); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}

	var e *Error
	if _, err := p.Show(ctx, `function(doc, req) { provides('json', function(){}); }`, doc, []byte(`{"query":{},"headers":{"Accept":"image/png"}}`)); !errors.As(err, &e) || e.Code != "not_acceptable" {
		t.Errorf("not acceptable: %v", err)
	}
	if _, err := p.Show(ctx, `function(doc, req) { return doc.x.y; }`, nil, []byte(`{"path":["db","_design","d","_show","s","missing"]}`)); !errors.As(err, &e) || e.Code != "not_found" {
		t.Errorf("missing doc: %v", err)
	}
	if _, err := p.Show(ctx, `function(doc, req) { return doc.x.y; }`, doc, []byte(`{}`)); !errors.As(err, &e) || e.Code != "render_error" {
		t.Errorf("render error: %v", err)
	}

	rows := []string{`{"key":1}`, `{"key":2}`}
	var chunks []string
	var started *Response
	err := p.DDoc("db", nil).ListStream(ctx, `function(head, req) { send('total ' + head.total_rows + ';'); var r; while (r = getRow()) send(r.key); return 'end'; }`,
		[]byte(`{"total_rows":2}`), []byte(`{}`),
		func() ([]byte, bool) {
			if len(rows) == 0 {
				return nil, false
			}
			r := rows[0]
			rows = rows[1:]
			return []byte(r), true
		},
		func(r *Response) error {
			if chunks != nil {
				t.Error("start after a chunk")
			}
			started = r
			return nil
		},
		func(s string) error { chunks = append(chunks, s); return nil })
	if err != nil || started == nil || started.Code != 200 || strings.Join(chunks, "|") != "total 2;|1|2|end" {
		t.Errorf("list: %v %+v %q", err, started, chunks)
	}

	for _, tc := range []struct{ name, src, doc, req, wantDoc, want string }{
		{"new doc", `function(doc, req) { return [{_id: req.uuid, v: 1}, 'made']; }`, ``, `{"method":"POST","uuid":"u1"}`, `{"_id":"u1","v":1}`, `201 made`},
		{"edit", `function(doc, req) { doc.v = JSON.parse(req.body).v; return [doc, {code: 202, json: {ok: true}}]; }`, `{"_id":"a","v":0}`, `{"method":"PUT","body":"{\"v\":5}"}`, `{"_id":"a","v":5}`, "202 {\"ok\":true}\n"},
		{"no doc", `function(doc, req) { return [null, 'nothing']; }`, ``, `{"method":"POST"}`, ``, `200 nothing`},
	} {
		nd, resp, err := p.Update(ctx, tc.src, []byte(tc.doc), []byte(tc.req))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(nd) != tc.wantDoc || fmt.Sprintf("%d %s", resp.Code, resp.Body) != tc.want {
			t.Errorf("%s: got %s, %d %q", tc.name, nd, resp.Code, resp.Body)
		}
	}
	if _, _, err := p.Update(ctx, `function(doc, req) { return [null, 'x']; }`, nil, []byte(`{"method":"GET"}`)); !errors.As(err, &e) || e.Code != "method_not_allowed" {
		t.Errorf("GET update: %v", err)
	}
}
