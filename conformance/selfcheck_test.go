package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestHarnessSelfCheck replays every scenario against answers synthesised from
// the records themselves (placeholders filled with made-up values): each must
// match, and every request must be buildable from the bindings of earlier steps.
// A failure here is a harness bug, not a settee one.
func TestHarnessSelfCheck(t *testing.T) {
	scs, _ := loadAll(t)
	h := newHarness("http://127.0.0.1:1", corpusAdmin, "pw")
	for _, sc := range scs {
		st := newScenarioState(sc, h)
		for _, r := range sc.records {
			req, err := h.buildRequest(st, r)
			if err != nil {
				t.Errorf("%s: build request: %v", r.Name, err)
				continue
			}
			if strings.Contains(req.URL.RequestURI(), "{") || strings.Contains(req.URL.RequestURI(), "<") {
				t.Errorf("%s: unsubstituted request line %s", r.Name, req.URL.RequestURI())
			}
			if req.ContentLength > 0 && strings.HasPrefix(r.reqBody.text, "<generated") {
				m := generatedRe.FindStringSubmatch(r.reqBody.text)
				if want, _ := strconv.Atoi(m[2]); int(req.ContentLength) != want {
					t.Errorf("%s: generated body is %d bytes, want %d", r.Name, req.ContentLength, want)
				}
			}
			hdr := http.Header{}
			for k, v := range r.Response.Headers {
				hdr.Set(k, fillText(st.names.apply(v)))
			}
			var body []byte
			switch r.resBody.kind {
			case bodyJSON:
				body = encodeJSON(fillJSON(r.resBody.json, st.names))
			case bodyText:
				body = []byte(fillText(st.names.apply(r.resBody.text)))
			}
			m := &matcher{b: st.b.clone(), names: st.names, norm: r.norm, unordered: r.unorderedLists()}
			m.compareResponse(r, r.Response.Status, hdr, body)
			for _, d := range m.diffs {
				t.Errorf("%s: synthetic answer does not match: %s", r.Name, d)
			}
			st.b = m.b
			st.afterResponse(r, r.Response.Status, hdr)
		}
	}
}

// fake values: distinct per K, of the shape a server would send.
func fakeText(p placeholder) string {
	k := 0
	if p.key != "" {
		k, _ = strconv.Atoi(strings.TrimPrefix(p.key, p.kind+":"))
	}
	switch p.kind {
	case "rev":
		return fmt.Sprintf("%032x", 0xfeed0000+k)
	case "uuid":
		return fmt.Sprintf("%032x", 0xbeef0000+k)
	case "seq":
		return fmt.Sprintf("%d-g1AAAAfake", k)
	case "size", "ref":
		return "1234"
	case "time":
		return "1700000000123456"
	case "etag":
		return `"etag-value"`
	case "session":
		return "YWxpY2U6NjU0MzIx"
	case "hash", "salt":
		return "0123abcd"
	}
	return "fake"
}

func fakeWhole(p placeholder) any {
	switch p.kind {
	case "size", "ref":
		return json.Number("1234")
	}
	return fakeText(p)
}

func fillText(s string) string {
	return placeholderRe.ReplaceAllStringFunc(s, func(ph string) string {
		p, _ := fullPlaceholder(ph)
		return fakeText(p)
	})
}

func fillJSON(v any, n names) any {
	switch v := v.(type) {
	case string:
		s := n.apply(v)
		if p, ok := fullPlaceholder(s); ok {
			return fakeWhole(p)
		}
		return fillText(s)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = fillJSON(x, n)
		}
		return out
	case *object:
		out := newObject()
		for _, k := range v.keys {
			out.set(k, fillJSON(v.vals[k], n))
		}
		return out
	}
	return v
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

const (
	hashA = "4c1f0b6a2d1e9e3f8a7b6c5d4e3f2a1b"
	hashB = "00000000000000000000000000000001"
)

func TestMatcher(t *testing.T) {
	n := names{db: "golden-x", db2: "golden-x-2", base: "http://h:1"}
	cases := []struct {
		name     string
		exp, got string
		norm     []string
		pre      map[string]any // bindings before
		wantDiff string         // "" = match; else a substring of the first diff
	}{
		{"bind rev", `{"rev":"1-<rev:1>"}`, `{"rev":"1-` + hashA + `"}`, nil, nil, ""},
		{"generation is literal", `{"rev":"2-<rev:1>"}`, `{"rev":"1-` + hashA + `"}`, nil, nil, "/response/body/rev: expected"},
		{"same K same hash", `{"rev":"2-<rev:1>"}`, `{"rev":"2-` + hashB + `"}`, nil, map[string]any{"rev:1": hashA}, "was bound to"},
		{"different K different hash", `["1-<rev:1>","1-<rev:2>"]`, `["1-` + hashA + `","1-` + hashA + `"]`, nil, nil, "must differ"},
		{"rev shape", `{"rev":"1-<rev:1>"}`, `{"rev":"1-xyz"}`, nil, nil, "/response/body/rev"},
		{"bare rev in _revisions", `{"ids":["<rev:2>","<rev:1>"]}`, `{"ids":["` + hashB + `","` + hashA + `"]}`, nil, map[string]any{"rev:1": hashA}, ""},
		{"key order free", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1.0}`, nil, nil, ""},
		{"array order matters", `{"b":[1,2]}`, `{"b":[2,1]}`, nil, nil, "/response/body/b/0: expected 1, got 2"},
		{"missing member", `{"a":1,"b":2}`, `{"a":1}`, nil, nil, "/response/body/b: expected 2, got no such member"},
		{"extra member", `{"a":1}`, `{"a":1,"z":true}`, nil, nil, "/response/body/z: unexpected member"},
		{"duplicate key", `{"a":1}`, `{"a":1,"a":1}`, nil, nil, "/response/body/a: key sent more than once"},
		{"type", `{"a":"1"}`, `{"a":1}`, nil, nil, "expected \"1\", got number"},
		{"db names", `["{db}","{db2}"]`, `["golden-x","golden-x-2"]`, nil, nil, ""},
		{"seq string or number, never asserted", `{"a":"<seq:1>","b":"<seq:1>"}`, `{"a":"5-abc","b":7}`, nil, nil, ""},
		{"size is a number", `{"s":"<size>"}`, `{"s":"12"}`, nil, nil, "want a number"},
		{"normalised literal skipped", `{"version":"3.5.2","f":["x"]}`, `{"version":"0.1","f":[]}`, []string{"/response/body/version", "/response/body/f"}, nil, ""},
		{"normalised literal still required", `{"version":"3.5.2"}`, `{}`, []string{"/response/body/version"}, nil, "no such member"},
		{"pointer escaping", `{"a/b":{"c~d":1}}`, `{"a/b":{"c~d":2}}`, nil, nil, "/response/body/a~1b/c~0d:"},
		{"uuid in location-like text", `{"l":"{base}/{db}/<uuid:1>"}`, `{"l":"http://h:1/golden-x/` + hashA + `"}`, nil, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &record{norm: map[string]bool{}}
			for _, p := range c.norm {
				r.norm[p] = true
			}
			b := newBindings()
			for k, v := range c.pre {
				p, _ := fullPlaceholder("<" + k + ">")
				if err := b.bind(p, v); err != nil {
					t.Fatal(err)
				}
			}
			m := &matcher{b: b, names: n, norm: r.norm}
			m.compareValue("/response/body", mustJSON(t, c.exp), mustJSON(t, c.got))
			switch {
			case c.wantDiff == "" && len(m.diffs) > 0:
				t.Errorf("unexpected diffs: %v", m.diffs)
			case c.wantDiff != "" && len(m.diffs) == 0:
				t.Errorf("no diff, want %q", c.wantDiff)
			case c.wantDiff != "" && !strings.Contains(m.diffs[0].String(), c.wantDiff):
				t.Errorf("first diff %q, want it to contain %q", m.diffs[0], c.wantDiff)
			}
		})
	}
}

func TestMatcherUnorderedLists(t *testing.T) {
	m := &matcher{b: newBindings(), unordered: true, norm: map[string]bool{}}
	p, _ := fullPlaceholder("<rev:2>")
	_ = m.b.bind(p, hashA)
	m.compareValue("/response/body",
		mustJSON(t, `{"doc":{"missing":["1-a","2-b"],"possible_ancestors":["2-<rev:2>"]}}`),
		mustJSON(t, `{"doc":{"possible_ancestors":["2-`+hashA+`"],"missing":["2-b","1-a"]}}`))
	if len(m.diffs) > 0 {
		t.Fatalf("unexpected diffs: %v", m.diffs)
	}
	m.compareValue("/response/body", mustJSON(t, `["1-a","2-b"]`), mustJSON(t, `["2-b","3-c"]`))
	if len(m.diffs) != 2 || !strings.Contains(m.diffs[0].String(), `/response/body/0: expected an element "1-a"`) {
		t.Fatalf("diffs: %v", m.diffs)
	}
}

func TestMatcherHeadersAndText(t *testing.T) {
	r := &record{norm: map[string]bool{"/response/headers/Set-Cookie": true}}
	r.Response.Status = 200
	r.Response.Headers = map[string]string{
		"Content-Type": "application/json",
		"Set-Cookie":   "AuthSession=<session>; Version=1; Expires=<time>; Max-Age=600; Path=/; HttpOnly",
		"ETag":         `"1-<rev:1>"`,
	}
	var err error
	r.resBody, err = parseBody(json.RawMessage(`"{\"seq\":\"<seq:1>\",\"id\":\"a\"}\n{\"last_seq\":\"<seq:1>\",\"pending\":0}\n\n"`))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Add("Set-Cookie", "Other=1")
	h.Add("Set-Cookie", "AuthSession=YWRtaW46; Version=1; Expires=Wed, 01 Jan 2031 00:00:00 GMT; Max-Age=600; Path=/; HttpOnly")
	h.Set("ETag", `"1-`+hashA+`"`)
	m := &matcher{b: newBindings(), norm: r.norm}
	m.compareResponse(r, 200, h, []byte("{\"id\":\"a\",\"seq\":\"3-x\"}\n{\"pending\":0,\"last_seq\":3}\n\n"))
	if len(m.diffs) > 0 {
		t.Fatalf("unexpected diffs: %v", m.diffs)
	}
	if m.b.vals["rev:1"] != hashA {
		t.Fatalf("rev:1 not bound from ETag: %v", m.b.vals)
	}

	// Go's default cookie layout differs from CouchDB's: reported.
	h.Del("Set-Cookie")
	h.Add("Set-Cookie", "AuthSession=YWRtaW46; Path=/; Expires=Wed, 01 Jan 2031 00:00:00 GMT; Max-Age=600; HttpOnly")
	m = &matcher{b: newBindings(), norm: r.norm}
	m.compareResponse(r, 200, h, []byte("{\"id\":\"a\",\"seq\":\"3-x\"}\n{\"pending\":0,\"last_seq\":3}\n"))
	want := []string{"/response/headers/Set-Cookie: expected", "/response/body: expected 4 lines, got 3"}
	if len(m.diffs) < 2 || !strings.HasPrefix(m.diffs[0].String(), want[0]) || !strings.HasPrefix(m.diffs[1].String(), want[1]) {
		t.Fatalf("diffs: %v", m.diffs)
	}

	// eventsource: the id line must stay a quoted JSON string
	m = &matcher{b: newBindings(), norm: map[string]bool{}}
	m.compareText("/response/body", "data: {\"seq\":\"<seq:1>\"}\nid: \"<seq:1>\"\n", "data: {\"seq\":\"3-x\"}\nid: 3\n")
	if len(m.diffs) != 1 || !strings.Contains(m.diffs[0].String(), "[line 2]") {
		t.Fatalf("diffs: %v", m.diffs)
	}
}

func TestGeneratedBody(t *testing.T) {
	b, ok, err := generatedBody(`<generated: {"filler":"xxx…"}, 8000113 bytes, over max_document_size 8000000>`)
	if err != nil || !ok || len(b) != 8000113 || !strings.HasPrefix(string(b), `{"filler":"xxxx`) || !strings.HasSuffix(string(b), `x"}`) {
		t.Fatalf("%v %v %d", ok, err, len(b))
	}
	b, ok, err = generatedBody(`<generated: {"docs":[{"_id":"small","v":1},{"_id":"big","filler":"xxx…"}]}, 8000158 bytes>`)
	if err != nil || !ok || len(b) != 8000158 || !strings.HasPrefix(string(b), `{"docs":[{"_id":"small","v":1},{"_id":"big","filler":"xxx`) {
		t.Fatalf("%v %v %d", ok, err, len(b))
	}
	if _, ok, _ := generatedBody(`name=admin`); ok {
		t.Fatal("plain body taken for a generated one")
	}
}
