package couchjs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testcouch"
)

// couch is a small client of the real CouchDB the side-by-side tests ask.
type couch struct {
	t   *testing.T
	srv *testcouch.Server
}

func (c couch) do(method, path string, body any, hdr ...string) (int, http.Header, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				c.t.Fatal(err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.srv.URL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.SetBasicAuth(c.srv.User, c.srv.Password)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (c couch) ok(method, path string, body any) []byte {
	c.t.Helper()
	code, _, b := c.do(method, path, body)
	if code >= 300 {
		c.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return b
}

// TestCouchDBSideBySide runs the same functions on CouchDB 3.5.2 and here
// and compares the answers: map emits of tricky values, compile errors,
// validate_doc_update errors, shows, lists and updates.
func TestCouchDBSideBySide(t *testing.T) {
	c := couch{t, testcouch.Start(t, "")}
	p := newPool(t, Config{MaxWorkers: 2})
	ctx := context.Background()
	c.ok("PUT", "/db", nil)
	docs := map[string]string{"d1": `{"a":1,"n":{"x":[1,2]}}`, "d2": `{"a":"boom","n":{"x":[]}}`}
	for id, d := range docs {
		c.ok("PUT", "/db/"+id, []byte(d))
	}

	t.Run("map", func(t *testing.T) {
		maps := map[string]string{
			"undef":  `function(doc){ emit(undefined, undefined); emit([undefined], {a: undefined}); }`,
			"nums":   `function(doc){ emit(NaN, Infinity); emit(-0, 1e21); emit(0.1+0.2, 9007199254740993); emit(0.00012345, [0.000001, 1e-7, 123.456, 5e-324, 0.0001, 1.5e21, 12345678901234567000.5]); }`,
			"fn":     `function(doc){ emit(function(){}, [function(){}]); }`,
			"date":   `function(doc){ emit(new Date(0), new Error('bad')); }`,
			"mut":    `function(doc){ doc.a = 42; emit(doc.a, doc.n); }`,
			"push":   `function(doc){ doc.n.x.push(3); emit(doc._id, doc.n); }`,
			"throw":  `function(doc){ if (doc.a === 'boom') throw new Error('kaput'); emit(doc._id, null); }`,
			"fields": `function(doc){ emit(Object.keys(doc), JSON.stringify(doc)); }`,
			"strs":   `function(doc){ emit('\u2028\u00e9\ud800', '<>&'); }`,
		}
		views := map[string]any{}
		for name, fn := range maps {
			views[name] = map[string]string{"map": fn}
		}
		c.ok("PUT", "/db/_design/m", map[string]any{"views": views})
		for name, fn := range maps {
			var res struct {
				Rows []struct {
					ID         string
					Key, Value json.RawMessage
				}
			}
			if err := json.Unmarshal(c.ok("GET", "/db/_design/m/_view/"+name, nil), &res); err != nil {
				t.Fatal(err)
			}
			want := map[string][]string{}
			for _, r := range res.Rows {
				want[r.ID] = append(want[r.ID], string(r.Key)+"="+string(r.Value))
			}
			m, err := p.NewMapSet([]string{fn}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for id := range docs {
				doc := c.ok("GET", "/db/"+id, nil)
				out, err := m.MapDoc(ctx, doc)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var got []string
				for _, e := range out[0] {
					got = append(got, string(e.Key)+"="+string(e.Value))
				}
				// CouchDB sorts a doc's rows by key.
				sort.Strings(got)
				sort.Strings(want[id])
				if strings.Join(got, " ") != strings.Join(want[id], " ") {
					t.Errorf("%s on %s:\n here    %v\n CouchDB %v", name, id, got, want[id])
				}
			}
		}
	})

	t.Run("compile", func(t *testing.T) {
		for _, src := range []string{"function(doc) { emit(doc._id, }", "1+1", "function f(doc){}", `function(doc) { var x = "unterminated; }`} {
			code, _, b := c.do("PUT", "/db/_design/bad", map[string]any{"views": map[string]any{"v": map[string]string{"map": src}}})
			var ce struct{ Error, Reason string }
			_ = json.Unmarshal(b, &ce)
			err := p.Compile(src)
			var e *Error
			if code != 400 || !errors.As(err, &e) || e.Code != ce.Error ||
				"Compilation of the map function in the 'v' view failed: "+e.Reason != ce.Reason {
				t.Errorf("%q:\n CouchDB %d %s\n here    %v", src, code, b, err)
			}
		}
	})

	t.Run("validate", func(t *testing.T) {
		for i, body := range []string{
			`throw({forbidden: 'no way'})`,
			`throw({unauthorized: 'who'})`,
			`throw({forbidden: {nested: 1}})`,
			`if (oldDoc) throw({forbidden: 'has old ' + oldDoc._id})`,
			`if (userCtx.name !== null) throw({forbidden: 'user ' + userCtx.name})`,
			`throw({other: 1})`,
			`throw('str')`,
			`throw(new Error('boom'))`,
			`throw(['error', 'e1', 'r1'])`,
		} {
			db := fmt.Sprintf("/v%d", i)
			c.ok("PUT", db, nil)
			src := "function(newDoc, oldDoc, userCtx, secObj) { if (newDoc._id == 't') { " + body + " } }"
			c.ok("PUT", db+"/_design/v", map[string]any{"validate_doc_update": src})
			code, _, b := c.do("PUT", db+"/t", []byte(`{"x":1}`))
			userCtx := []byte(`{"db":"v","name":"admin","roles":["_admin"]}`)
			err := p.ValidateDocUpdate(ctx, src, []byte(`{"_id":"t","x":1}`), nil, userCtx, []byte(`{}`))
			t.Logf("%s: CouchDB %d %s; here %v", body, code, bytes.TrimSpace(b), err)
			var ce struct {
				Error  string
				Reason json.RawMessage
			}
			_ = json.Unmarshal(b, &ce)
			var e *Error
			switch {
			case code < 300:
				if err != nil {
					t.Errorf("%s: CouchDB accepts, here %v", body, err)
				}
			case !errors.As(err, &e) || e.Code != ce.Error || (code != 500 && e.Reason != reasonOf(ce.Reason)) || (ce.Error == "unknown_error" && e.Reason != reasonOf(ce.Reason)):
				t.Errorf("%s: CouchDB %d %s, here %v", body, code, b, err)
			}
		}
	})

	t.Run("render", func(t *testing.T) {
		shows := map[string]string{
			"str":   "function(doc, req){ return 'hello ' + (doc ? doc._id : 'none'); }",
			"obj":   "function(doc, req){ return {code: 201, headers: {'X-A': 'b'}, body: 'x'}; }",
			"json":  "function(doc, req){ return {json: {a: 1, f: 1e21}}; }",
			"b64":   "function(doc, req){ return {base64: 'aGVsbG8='}; }",
			"prov":  "function(doc, req){ provides('json', function(){ return toJSON({p:1}); }); provides('html', function(){ return '<p>'; }); }",
			"undef": "function(doc, req){ }",
			"send":  "function(doc, req){ send('a'); send('b'); return 'c'; }",
		}
		list := "function(head, req){ start({code: 202, headers: {'X-L': '1'}}); send('H'); var r; while (r = getRow()) { send(r.key + ';'); } return 'T'; }"
		upd := "function(doc, req){ var d = doc || {_id: req.id || req.uuid}; d.c = (d.c || 0) + 1; return [d, {json: {c: d.c}}]; }"
		c.ok("PUT", "/db/_design/r", map[string]any{
			"shows":   shows,
			"lists":   map[string]string{"l": list},
			"updates": map[string]string{"u": upd},
			"views":   map[string]any{"v": map[string]string{"map": "function(doc){ emit(doc._id, null) }"}},
		})
		doc := c.ok("GET", "/db/d1", nil)
		for name, src := range shows {
			for _, accept := range []string{"*/*", "text/html", "application/json"} {
				code, hdr, body := c.do("GET", "/db/_design/r/_show/"+name+"/d1", nil, "Accept", accept)
				req := fmt.Appendf(nil, `{"method":"GET","path":["db","_design","r","_show","%s","d1"],"query":{},"headers":{"Accept":%q},"body":"undefined","id":"d1","userCtx":{"name":null,"roles":[]}}`, name, accept)
				resp, err := p.Show(ctx, src, doc, req)
				if err != nil {
					t.Errorf("show %s: %v", name, err)
					continue
				}
				if resp.Code != code || string(resp.Body) != string(body) || resp.Headers["Content-Type"] != hdr.Get("Content-Type") {
					t.Errorf("show %s (Accept %s):\n CouchDB %d %q %s\n here    %d %q %s", name, accept, code, hdr.Get("Content-Type"), body, resp.Code, resp.Headers["Content-Type"], resp.Body)
				}
			}
		}

		code, hdr, body := c.do("GET", "/db/_design/r/_list/l/v", nil)
		rows := []string{`{"id":"d1","key":"d1","value":null}`, `{"id":"d2","key":"d2","value":null}`}
		var chunks []string
		resp, err := p.List(ctx, list, []byte(`{"total_rows":2,"offset":0}`), []byte(`{"method":"GET","query":{},"headers":{}}`),
			func() ([]byte, bool) {
				if len(rows) == 0 {
					return nil, false
				}
				r := rows[0]
				rows = rows[1:]
				return []byte(r), true
			}, func(s string) error { chunks = append(chunks, s); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != code || strings.Join(chunks, "") != string(body) || resp.Headers["Content-Type"] != hdr.Get("Content-Type") || resp.Headers["X-L"] != hdr.Get("X-L") {
			t.Errorf("list:\n CouchDB %d %v %s\n here    %d %v %q", code, hdr, body, resp.Code, resp.Headers, chunks)
		}

		code, hdr, body = c.do("POST", "/db/_design/r/_update/u/d1", nil)
		newDoc, uresp, err := p.Update(ctx, upd, doc, []byte(`{"method":"POST","query":{},"headers":{},"id":"d1"}`))
		if err != nil {
			t.Fatal(err)
		}
		var nd map[string]any
		if err := json.Unmarshal(newDoc, &nd); err != nil || nd["c"] != float64(1) || nd["_id"] != "d1" {
			t.Errorf("update doc %s", newDoc)
		}
		// CouchDB answers 201 for an update that saved a doc, its own rule.
		if code != 201 || string(uresp.Body) != string(body) || uresp.Headers["Content-Type"] != hdr.Get("Content-Type") {
			t.Errorf("update:\n CouchDB %d %q %s\n here    %d %q %s", code, hdr.Get("Content-Type"), body, uresp.Code, uresp.Headers["Content-Type"], uresp.Body)
		}
	})
}

// reasonOf is a CouchDB reason as settee's Error holds it: a string as
// is, other JSON as its text.
func reasonOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
