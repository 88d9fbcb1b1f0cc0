package docjson

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseBulkDocs(t *testing.T) {
	cases := []struct {
		name         string
		in           string
		docs         []string
		newEdits     bool
		hasNewEdits  bool
		allOrNothing bool
		w            int
		hasW         bool
	}{
		{"empty docs", `{"docs":[]}`, []string{}, true, false, false, 0, false},
		{"docs", `{"docs":[{"_id":"b","v":1},{"_id":"a","v":2}]}`, []string{`{"_id":"b","v":1}`, `{"_id":"a","v":2}`}, true, false, false, 0, false},
		{"whitespace kept inside docs", "{ \"docs\" : [ { \"a\" : 1 } ,\n{ } ] }", []string{`{ "a" : 1 }`, `{ }`}, true, false, false, 0, false},
		{"non-object docs returned", `{"docs":[1,"x",null,[],{}]}`, []string{`1`, `"x"`, `null`, `[]`, `{}`}, true, false, false, 0, false},
		{"new_edits false", `{"new_edits":false,"docs":[{}]}`, []string{`{}`}, false, true, false, 0, false},
		{"new_edits true", `{"docs":[{}],"new_edits":true}`, []string{`{}`}, true, true, false, 0, false},
		{"all_or_nothing", `{"all_or_nothing":true,"docs":[{"_id":"aon","v":1}]}`, []string{`{"_id":"aon","v":1}`}, true, false, true, 0, false},
		{"all_or_nothing not true", `{"all_or_nothing":"true","docs":[]}`, []string{}, true, false, false, 0, false},
		{"w", `{"w":2,"docs":[]}`, []string{}, true, false, false, 2, true},
		{"w not integer", `{"w":"2","docs":[]}`, []string{}, true, false, false, 0, false},
		{"other members ignored", `{"x":{"docs":1},"docs":[{}],"y":[1,2]}`, []string{`{}`}, true, false, false, 0, false},
		{"escaped key", `{"d\u006fcs":[1]}`, []string{`1`}, true, false, false, 0, false},
		{"last docs wins", `{"docs":[1],"docs":[2,3]}`, []string{`2`, `3`}, true, false, false, 0, false},
		{"last docs wins over non-array", `{"docs":1,"docs":[2]}`, []string{`2`}, true, false, false, 0, false},
		{"nested docs", `{"docs":[{"a":{"b":[{"c":[]}]}}]}`, []string{`{"a":{"b":[{"c":[]}]}}`}, true, false, false, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bd, err := ParseBulkDocs([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			var docs []string
			for _, d := range bd.Docs {
				docs = append(docs, string(d))
			}
			if docs == nil {
				docs = []string{}
			}
			if !reflect.DeepEqual(docs, c.docs) {
				t.Errorf("docs %q, want %q", docs, c.docs)
			}
			if bd.NewEdits != c.newEdits || bd.HasNewEdits != c.hasNewEdits || bd.AllOrNothing != c.allOrNothing || bd.W != c.w || bd.HasW != c.hasW {
				t.Errorf("got %+v", bd)
			}
		})
	}
}

func TestParseBulkDocsErrors(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		kind   error
		reason string
	}{
		{"malformed", `{"docs":[`, ErrInvalidJSON, "invalid UTF-8 JSON"},
		{"empty", ``, ErrInvalidJSON, "invalid UTF-8 JSON"},
		{"invalid doc", `{"docs":[{"a":01}]}`, ErrInvalidJSON, "invalid UTF-8 JSON"},
		{"invalid utf8 in doc", "{\"docs\":[{\"a\":\"\xff\"}]}", ErrInvalidJSON, "invalid UTF-8 JSON"},
		{"trailing garbage", `{"docs":[]}]`, ErrInvalidJSON, "invalid UTF-8 JSON"},
		{"too deep", `{"docs":[` + nested("[", "]", MaxDepth-1) + `]}`, ErrInvalidJSON, "invalid UTF-8 JSON"},
		{"array body", `[{"_id":"x"}]`, ErrBodyNotObject, "Request body must be a JSON object"},
		{"string body", `"x"`, ErrBodyNotObject, "Request body must be a JSON object"},
		{"docs not array", `{"docs":{"_id":"x"}}`, ErrDocsNotArray, "`docs` parameter must be an array."},
		{"docs null", `{"docs":null}`, ErrDocsNotArray, "`docs` parameter must be an array."},
		{"docs array then not", `{"docs":[],"docs":"x"}`, ErrDocsNotArray, "`docs` parameter must be an array."},
		{"missing docs", `{"doc":[]}`, ErrMissingDocs, "POST body must include `docs` parameter."},
		{"empty object", `{}`, ErrMissingDocs, "POST body must include `docs` parameter."},
		{"missing docs beats bad new_edits", `{"new_edits":1}`, ErrMissingDocs, "POST body must include `docs` parameter."},
		{"new_edits string", `{"docs":[],"new_edits":"false"}`, ErrBadNewEdits, "`new_edits` parameter must be a boolean."},
		{"new_edits null", `{"docs":[],"new_edits":null}`, ErrBadNewEdits, "`new_edits` parameter must be a boolean."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseBulkDocs([]byte(c.in))
			if !errors.Is(err, c.kind) || err.Error() != c.reason {
				t.Fatalf("error %v, want %v", err, c.reason)
			}
			var e *Error
			if !errors.As(err, &e) || e.CouchError != BadRequest {
				t.Errorf("error %#v", err)
			}
		})
	}
}

func TestParseBulkDocsMaxDepth(t *testing.T) {
	// The docs array is depth 2, so a doc may nest MaxDepth-2 more levels.
	in := `{"docs":[` + nested("[", "]", MaxDepth-2) + `]}`
	if _, err := ParseBulkDocs([]byte(in)); err != nil {
		t.Fatal(err)
	}
	if !Valid([]byte(in)) {
		t.Fatal("Valid disagrees")
	}
}
