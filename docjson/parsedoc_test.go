package docjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const rev1 = "1-967a00dff5e02add41819138abb3284d"

func TestParseDoc(t *testing.T) {
	type want struct {
		id          *string
		rev         *string
		deleted     bool
		revisions   *Revisions
		attachments string
		access      string
		body        string
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		in   string
		want want
	}{
		{"empty object", `{}`, want{body: `{}`}},
		{"empty object with whitespace", " { \n } ", want{body: `{}`}},
		{"plain body kept byte for byte", `{"b":1.50,"a":"\u00e9\/","c":[1E3,-0],"d":{"x":null}}`,
			want{body: `{"b":1.50,"a":"\u00e9\/","c":[1E3,-0],"d":{"x":null}}`}},
		{"key order kept", `{"z":1,"a":2,"m":3}`, want{body: `{"z":1,"a":2,"m":3}`}},
		{"whitespace removed", "{ \"a\" :\t[ 1 ,\n2 ] ,\r\n \"b\" : \"x y\" }", want{body: `{"a":[1,2],"b":"x y"}`}},
		{"id", `{"_id":"doc1","v":1}`, want{id: str("doc1"), body: `{"v":1}`}},
		{"id last", `{"v":1,"_id":"doc1"}`, want{id: str("doc1"), body: `{"v":1}`}},
		{"id in the middle", `{"a":1,"_id":"doc1","b":2}`, want{id: str("doc1"), body: `{"a":1,"b":2}`}},
		{"id only", `{"_id":"doc1"}`, want{id: str("doc1"), body: `{}`}},
		{"id with whitespace around", `{ "_id" : "doc1" , "a" : 1 }`, want{id: str("doc1"), body: `{"a":1}`}},
		{"empty id", `{"_id":""}`, want{id: str(""), body: `{}`}},
		{"id escaped", `{"_id":"a\"b\u00e9\ud83d\ude00\n"}`, want{id: str("a\"bé😀\n"), body: `{}`}},
		{"id design", `{"_id":"_design/foo","views":{}}`, want{id: str("_design/foo"), body: `{"views":{}}`}},
		{"long id", `{"_id":"` + strings.Repeat("x", 300) + `","_rev":"` + rev1 + `"}`,
			want{id: str(strings.Repeat("x", 300)), rev: str(rev1), body: `{}`}},
		{"escaped key is special", `{"\u005fid":"x","a":1}`, want{id: str("x"), body: `{"a":1}`}},
		{"escape inside special key", `{"_i\u0064":"x","_\u0072ev":"1-a","a":1}`, want{id: str("x"), rev: str("1-a"), body: `{"a":1}`}},
		{"escaped plain key", `{"\u0061":1,"\n":2}`, want{body: `{"\u0061":1,"\n":2}`}},
		{"duplicate id last wins", `{"_id":"a","_id":"b"}`, want{id: str("b"), body: `{}`}},
		{"duplicate id first bad", `{"_id":1,"_id":"b"}`, want{id: str("b"), body: `{}`}},
		{"rev", `{"_id":"a","_rev":"` + rev1 + `","v":1}`, want{id: str("a"), rev: str(rev1), body: `{"v":1}`}},
		{"rev not parsed", `{"_rev":"garbage"}`, want{rev: str("garbage"), body: `{}`}},
		{"deleted true", `{"_id":"a","_rev":"` + rev1 + `","_deleted":true}`,
			want{id: str("a"), rev: str(rev1), deleted: true, body: `{}`}},
		{"deleted false", `{"_deleted":false,"a":1}`, want{body: `{"a":1}`}},
		{"revisions", `{"_id":"x","_rev":"3-57e77eec6d066967d762e55cccd2f198","v":"a3","_revisions":{"start":3,"ids":["57e77eec6d066967d762e55cccd2f198","bdb01e447c2352912b2cede0562fdcc3","510b2e4fe068ce8ed7a53781ad51abbf"]}}`,
			want{id: str("x"), rev: str("3-57e77eec6d066967d762e55cccd2f198"), body: `{"v":"a3"}`,
				revisions: &Revisions{Start: 3, IDs: []string{"57e77eec6d066967d762e55cccd2f198", "bdb01e447c2352912b2cede0562fdcc3", "510b2e4fe068ce8ed7a53781ad51abbf"}}}},
		{"revisions with whitespace and extra keys", `{"_revisions": { "x" : [1], "ids" : [ "a" , "b" ] , "start" : 2 } }`,
			want{body: `{}`, revisions: &Revisions{Start: 2, IDs: []string{"a", "b"}}}},
		{"revisions empty ids", `{"_revisions":{"start":0,"ids":[]}}`, want{body: `{}`, revisions: &Revisions{Start: 0, IDs: []string{}}}},
		{"revisions start minus zero", `{"_revisions":{"start":-0,"ids":["a"]}}`, want{body: `{}`, revisions: &Revisions{IDs: []string{"a"}}}},
		{"revisions escaped key", `{"_revisions":{"st\u0061rt":1,"ids":["a"]}}`, want{body: `{}`, revisions: &Revisions{Start: 1, IDs: []string{"a"}}}},
		{"rev after revisions ignored", `{"_revisions":{"start":1,"ids":["a"]},"_rev":5}`,
			want{body: `{}`, revisions: &Revisions{Start: 1, IDs: []string{"a"}}}},
		{"rev before revisions kept", `{"_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`,
			want{rev: str("1-a"), body: `{}`, revisions: &Revisions{Start: 1, IDs: []string{"a"}}}},
		{"many revision ids", `{"_revisions":{"start":20,"ids":[` + strings.Repeat(`"0123456789abcdef0123456789abcdef",`, 19) + `"0123456789abcdef0123456789abcdef"]}}`,
			want{body: `{}`, revisions: &Revisions{Start: 20, IDs: strings.Split(strings.Repeat("0123456789abcdef0123456789abcdef ", 20)[:20*33-1], " ")}}},
		{"attachments", `{"_id":"a","_attachments":{ "a.txt" : { "content_type" : "text/plain", "data" : "aGVsbG8=" } },"v":1}`,
			want{id: str("a"), attachments: `{"a.txt":{"content_type":"text/plain","data":"aGVsbG8="}}`, body: `{"v":1}`}},
		{"attachments empty", `{"_attachments":{}}`, want{attachments: `{}`, body: `{}`}},
		{"ignored members", `{"_revs_info":[1],"_conflicts":"x","_deleted_conflicts":{},"_local_seq":1,"a":1}`, want{body: `{"a":1}`}},
		{"access", `{"_access":["alice", "bob"],"a":1}`, want{access: `["alice","bob"]`, body: `{"a":1}`}},
		{"replication members stay in body", `{"_id":"r","source":"a","_replication_state":"completed","_replication_state_time":"t","_replication_state_reason":"r","_replication_id":"i","_replication_stats":{}}`,
			want{id: str("r"), body: `{"source":"a","_replication_state":"completed","_replication_state_time":"t","_replication_state_reason":"r","_replication_id":"i","_replication_stats":{}}`}},
		{"underscore inside nested object is body", `{"a":{"_id":1,"_foo":2}}`, want{body: `{"a":{"_id":1,"_foo":2}}`}},
		{"key with underscore not first", `{"a_b":1}`, want{body: `{"a_b":1}`}},
		{"all specials no body", `{"_id":"a","_rev":"1-a","_deleted":true,"_attachments":{},"_revisions":{"start":1,"ids":["a"]},"_conflicts":[]}`,
			want{id: str("a"), rev: str("1-a"), deleted: true, attachments: `{}`, body: `{}`, revisions: &Revisions{Start: 1, IDs: []string{"a"}}}},
		{"more than eight specials", `{"_id":"a","_conflicts":1,"_conflicts":2,"_conflicts":3,"_conflicts":4,"_conflicts":5,"_conflicts":6,"_conflicts":7,"_conflicts":8,"_rev":"r","x":1}`,
			want{id: str("a"), rev: str("r"), body: `{"x":1}`}},
		{"duplicate plain keys kept", `{"a":1,"a":2}`, want{body: `{"a":1,"a":2}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDoc([]byte(c.in))
			if err != nil {
				t.Fatalf("ParseDoc(%s): %v", c.in, err)
			}
			w := c.want
			if d.HasID != (w.id != nil) || w.id != nil && d.ID != *w.id {
				t.Errorf("ID %q (%v), want %v", d.ID, d.HasID, deref(w.id))
			}
			if d.HasRev != (w.rev != nil) || w.rev != nil && d.Rev != *w.rev {
				t.Errorf("Rev %q (%v), want %v", d.Rev, d.HasRev, deref(w.rev))
			}
			if d.Deleted != w.deleted {
				t.Errorf("Deleted %v", d.Deleted)
			}
			if !reflect.DeepEqual(d.Revisions, w.revisions) {
				t.Errorf("Revisions %+v, want %+v", d.Revisions, w.revisions)
			}
			if d.HasAttachments != (w.attachments != "") || string(d.Attachments) != w.attachments {
				t.Errorf("Attachments %q (%v), want %q", d.Attachments, d.HasAttachments, w.attachments)
			}
			if string(d.Access) != w.access {
				t.Errorf("Access %q, want %q", d.Access, w.access)
			}
			if string(d.Body) != w.body {
				t.Errorf("Body\n %s\nwant\n %s", d.Body, w.body)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<absent>"
	}
	return *s
}

func TestParseDocErrors(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		kind   error
		couch  string
		reason string
	}{
		{"malformed", `{"a":`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"empty input", ``, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"whitespace only", "  \n", ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"trailing garbage", `{"a":1} x`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"trailing comma", `{"a":1,}`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"missing comma", `{"a":1 "b":2}`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"invalid utf8 in key", "{\"\xff\":1}", ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"invalid utf8 in id", "{\"_id\":\"\xff\"}", ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"lone surrogate in value", `{"a":"\ud800"}`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"too deep", `{"a":` + nested("[", "]", MaxDepth) + `}`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"invalid JSON beats bad member", `{"_foo":1,"a":01}`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"invalid JSON after specials", `{"_id":"a"}}`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"array", `[1,2]`, ErrNotObject, BadRequest, "Document must be a JSON object"},
		{"string", `"doc"`, ErrNotObject, BadRequest, "Document must be a JSON object"},
		{"number", ` 5 `, ErrNotObject, BadRequest, "Document must be a JSON object"},
		{"null", `null`, ErrNotObject, BadRequest, "Document must be a JSON object"},
		{"invalid array", `[1,]`, ErrInvalidJSON, BadRequest, "invalid UTF-8 JSON"},
		{"id number", `{"_id":7}`, ErrIDNotString, IllegalDocID, "Document id must be a string"},
		{"id null", `{"_id":null}`, ErrIDNotString, IllegalDocID, "Document id must be a string"},
		{"id object", `{"_id":{"a":1}}`, ErrIDNotString, IllegalDocID, "Document id must be a string"},
		{"id last bad", `{"_id":"a","_id":[]}`, ErrIDNotString, IllegalDocID, "Document id must be a string"},
		{"rev number", `{"_rev":1}`, ErrBadRev, BadRequest, "Invalid rev format"},
		{"rev null", `{"_rev":null}`, ErrBadRev, BadRequest, "Invalid rev format"},
		{"unknown special", `{"_foo":1}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _foo"},
		{"bare underscore", `{"_":1}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _"},
		{"escaped unknown special", `{"\u005f\u0066oo":1}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _foo"},
		{"special with odd name", `{"_a\nb":1}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _a\nb"},
		{"case matters", `{"_ID":"a"}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _ID"},
		{"first error in order", `{"_foo":1,"_id":1}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _foo"},
		{"first error in order id", `{"_id":1,"_foo":1}`, ErrIDNotString, IllegalDocID, "Document id must be a string"},
		{"deleted string", `{"_deleted":"true"}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _deleted"},
		{"deleted number", `{"_deleted":1}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _deleted"},
		{"deleted null", `{"_deleted":null}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _deleted"},
		{"revisions array", `{"_revisions":[]}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _revisions"},
		{"attachments array", `{"_attachments":[]}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _attachments"},
		{"attachments string", `{"_attachments":"x"}`, ErrBadSpecialMember, DocValidation, "Bad special document member: _attachments"},
		{"revisions no start", `{"_revisions":{"ids":["a"]}}`, ErrBadRevisions, DocValidation, "_revisions.start isn't an integer."},
		{"revisions start float", `{"_revisions":{"start":1.0,"ids":["a"]}}`, ErrBadRevisions, DocValidation, "_revisions.start isn't an integer."},
		{"revisions start exponent", `{"_revisions":{"start":1e2,"ids":["a"]}}`, ErrBadRevisions, DocValidation, "_revisions.start isn't an integer."},
		{"revisions start string", `{"_revisions":{"start":"1","ids":["a"]}}`, ErrBadRevisions, DocValidation, "_revisions.start isn't an integer."},
		{"revisions start negative", `{"_revisions":{"start":-1,"ids":["a"]}}`, ErrBadRevisions, DocValidation, "_revisions.start isn't an integer."},
		{"revisions start too big", `{"_revisions":{"start":18446744073709551616,"ids":["a"]}}`, ErrBadRevisions, DocValidation, "_revisions.start isn't an integer."},
		{"revisions no ids", `{"_revisions":{"start":1}}`, ErrBadRevisions, DocValidation, "_revisions.ids isn't a array."},
		{"revisions ids object", `{"_revisions":{"start":1,"ids":{}}}`, ErrBadRevisions, DocValidation, "_revisions.ids isn't a array."},
		{"revisions ids string", `{"_revisions":{"start":1,"ids":"a"}}`, ErrBadRevisions, DocValidation, "_revisions.ids isn't a array."},
		{"revisions id number", `{"_revisions":{"start":1,"ids":["a",1]}}`, ErrBadRevisions, DocValidation, "RevId isn't a string"},
		{"revisions id not hex", `{"_revisions":{"start":1,"ids":["0123456789abcdef0123456789abcdeg"]}}`, ErrBadRevisions, DocValidation, "RevId isn't a valid hexadecimal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDoc([]byte(c.in))
			if d != nil {
				t.Errorf("ParseDoc returned a doc with error %v", err)
			}
			if !errors.Is(err, c.kind) {
				t.Fatalf("ParseDoc(%s) error %v, want %v", c.in, err, c.kind)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			if err.Error() != c.reason || e.Reason != c.reason || e.CouchError != c.couch {
				t.Errorf("error %q (%s), want %q (%s)", err.Error(), e.CouchError, c.reason, c.couch)
			}
			if (e.Offset >= 0) != (c.kind == ErrInvalidJSON) {
				t.Errorf("offset %d", e.Offset)
			}
		})
	}
}

// TestParseDocBodyExact checks that Body is the input minus whitespace
// outside strings and minus the special members, on the benchmark document
// and on its indented form.
func TestParseDocBodyExact(t *testing.T) {
	doc := mediumDoc(42)
	d, err := ParseDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(doc), `"_id":"42",`, "", 1)
	if string(d.Body) != want {
		t.Errorf("body differs from input without _id")
	}
	indented := `{
  "_id" : "42",
  "a" : [ 1.0 , -0 , 1e5 , "x \" y" , { } , [ ] ] ,
  "_rev" :	"1-abc" ,
  "b" : { "c" : null , "d" : true } ,
  "_deleted" : false
}
`
	d, err = ParseDoc([]byte(indented))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.Body), `{"a":[1.0,-0,1e5,"x \" y",{},[]],"b":{"c":null,"d":true}}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
	if d.ID != "42" || d.Rev != "1-abc" {
		t.Errorf("ID %q Rev %q", d.ID, d.Rev)
	}
}

// TestParseDocNoAliasing checks that nothing in a Doc shares memory with the
// input, and that appending to Body does not disturb the other fields.
func TestParseDocNoAliasing(t *testing.T) {
	in := []byte(`{"_id":"abc","_rev":"1-x","_attachments":{"a":{}},"_revisions":{"start":1,"ids":["x"]},"v":1}`)
	d, err := ParseDoc(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'X'
	}
	d.Body = append(d.Body, "garbage garbage garbage garbage garbage"...)
	if d.ID != "abc" || d.Rev != "1-x" || string(d.Attachments) != `{"a":{}}` || d.Revisions.IDs[0] != "x" ||
		string(d.Body[:7]) != `{"v":1}` {
		t.Errorf("doc changed with its input: %+v", d)
	}
}

func TestParseDocAllocs(t *testing.T) {
	docs := map[string][]byte{
		"medium":        mediumDoc(1),
		"id and rev":    []byte(`{"_id":"0123456789abcdef0123456789abcdef","_rev":"` + rev1 + `","v":1}`),
		"no specials":   []byte(`{"v":[1,2,3],"w":"x"}`),
		"deleted":       []byte(`{"_id":"a","_rev":"1-a","_deleted":true}`),
		"escaped id":    []byte(`{"_id":"\u00e9t\u00e9","v":1}`),
		"whitespace":    []byte(" { \"_id\" : \"a\" , \"v\" : [ 1 , 2 ] } "),
		"nine specials": []byte(`{"_id":"a","_conflicts":1,"_conflicts":2,"_conflicts":3,"_conflicts":4,"_conflicts":5,"_conflicts":6,"_conflicts":7,"_conflicts":8}`),
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			const max = 2 // Body and the Doc with its strings
			if n := testing.AllocsPerRun(100, func() {
				if _, err := ParseDoc(doc); err != nil {
					t.Fatal(err)
				}
			}); n > max {
				t.Errorf("%v allocations per ParseDoc, want at most %v", n, max)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { Valid(docs["medium"]) }); n != 0 {
		t.Errorf("%v allocations per Valid", n)
	}
}

// TestParseDocManySpecials checks that repeated special members cost linear
// time and no extra memory.
func TestParseDocManySpecials(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"a":0`)
	for i := range 100000 {
		b.WriteString(`,"_conflicts":[],"_id":"x`)
		b.WriteString(strings.Repeat("y", i%3))
		b.WriteString(`","_foo":1,"_bar":2`)
	}
	b.WriteString(`,"_id":"last"}`)
	in := []byte(b.String())
	_, err := ParseDoc(in)
	if err == nil || err.Error() != "Bad special document member: _foo" {
		t.Fatalf("error %v", err)
	}
	in = []byte(strings.ReplaceAll(b.String(), `,"_foo":1,"_bar":2`, ""))
	d, err := ParseDoc(in)
	if err != nil || d.ID != "last" || string(d.Body) != `{"a":0}` {
		t.Fatalf("ParseDoc: %v %+v", err, d)
	}
	if n := testing.AllocsPerRun(5, func() { ParseDoc(in) }); n > 2 {
		t.Errorf("%v allocations", n)
	}
}
