package docjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz tests check this package against encoding/json, which accepts
// slightly more than the strict grammar here: invalid UTF-8 inside strings,
// lone surrogate escapes and nesting up to 10000. strictValid adds those
// rules on top of json.Valid.
func strictValid(b []byte) bool {
	return json.Valid(b) && utf8.Valid(b) && !hasLoneSurrogate(b) && maxDepth(b) <= MaxDepth
}

// hasLoneSurrogate reports whether valid JSON b has a \u escape of a
// surrogate that is not part of a high-low pair. In valid JSON a backslash
// only occurs inside strings, as the start of an escape.
func hasLoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++
			continue
		}
		r := hex4(b, i+2)
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return true
			}
			if lo := hex4(b, i+8); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// maxDepth returns the deepest nesting of valid JSON b.
func maxDepth(b []byte) int {
	depth, max, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
			if depth > max {
				max = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}

// decode unmarshals valid JSON keeping numbers exact.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// dropped reports whether ParseDoc removes top-level key k from the body:
// all keys starting with '_' except those CouchDB keeps in _replicator docs.
func dropped(k string) bool {
	switch k {
	case "_replication_state", "_replication_state_time", "_replication_state_reason",
		"_replication_id", "_replication_stats":
		return false
	}
	return strings.HasPrefix(k, "_")
}

// expectedSpecialError returns the kind of error CouchDB's transfer_fields
// gives for the member k: v of a decoded document, or nil.
func expectedSpecialError(k string, v any) error {
	switch k {
	case "_id":
		if _, ok := v.(string); !ok {
			return ErrIDNotString
		}
	case "_rev":
		if _, ok := v.(string); !ok {
			return ErrBadRev
		}
	case "_deleted":
		if _, ok := v.(bool); !ok {
			return ErrBadSpecialMember
		}
	case "_attachments":
		if _, ok := v.(map[string]any); !ok {
			return ErrBadSpecialMember
		}
	case "_revisions":
		m, ok := v.(map[string]any)
		if !ok {
			return ErrBadSpecialMember
		}
		if _, ok := revStart(m["start"]); !ok {
			return ErrBadRevisions
		}
		ids, ok := m["ids"].([]any)
		if !ok {
			return ErrBadRevisions
		}
		for _, id := range ids {
			s, ok := id.(string)
			if !ok || len(s) == 32 && !isHex(s) {
				return ErrBadRevisions
			}
		}
	case "_revs_info", "_local_seq", "_conflicts", "_deleted_conflicts", "_access":
	default:
		if dropped(k) {
			return ErrBadSpecialMember
		}
	}
	return nil
}

func FuzzParseDoc(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c.in))
	}
	for _, c := range invalidCases {
		if len(c.in) < 100 {
			f.Add([]byte(c.in))
		}
	}
	for _, s := range []string{
		`{"_id":"a","_rev":"1-abc","_deleted":true,"v":[1,2.5,-0,1e5],"w":{"x":"\u00e9"}}`,
		`{"_revisions":{"start":3,"ids":["0123456789abcdef0123456789abcdef","b"]},"_rev":"3-x"}`,
		`{"_attachments":{"a.txt":{"data":"aGk=","content_type":"text/plain"}},"a":1}`,
		`{"\u005fid":"x","_conflicts":[],"_replication_state":"triggered","_foo":1}`,
		`{ "a" : [ { } , [ ] , "x\ny" ] , "_id" : 5 }`,
		`{"_deleted":"no"}`,
		`{"_i\u0064":"x","_\u0072ev":"1-a","\u005f\u005f":1}`,
		`{"_access":["a"],"_local_seq":1,"_revs_info":[],"_deleted_conflicts":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := strictValid(b)
		if got := Valid(b); got != valid {
			t.Fatalf("Valid(%q) = %v, want %v", b, got, valid)
		}
		compact, err := Compact(nil, b)
		if valid {
			var std bytes.Buffer
			if err := json.Compact(&std, b); err != nil || !bytes.Equal(compact, std.Bytes()) {
				t.Fatalf("Compact(%q) = %q, want %q (%v)", b, compact, std.Bytes(), err)
			}
		} else if !errors.Is(err, ErrInvalidJSON) {
			t.Fatalf("Compact(%q): error %v, want ErrInvalidJSON", b, err)
		}

		d, err := ParseDoc(b)
		if !valid {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("ParseDoc(%q): error %v, want ErrInvalidJSON", b, err)
			}
			return
		}
		in, isObject := decode(t, b).(map[string]any)
		if !isObject {
			if !errors.Is(err, ErrNotObject) {
				t.Fatalf("ParseDoc(%q): error %v, want ErrNotObject", b, err)
			}
			return
		}
		// Which special-member errors the decoded object justifies, and
		// which of them it requires. A bad _rev is ignored when it follows
		// _revisions, which the decoded map cannot tell.
		var justified []error
		var badNames []string
		required := false
		for k, v := range in {
			if e := expectedSpecialError(k, v); e != nil {
				justified = append(justified, e)
				if e == ErrBadSpecialMember {
					badNames = append(badNames, "Bad special document member: "+k)
				}
				if _, ok := in["_revisions"]; k != "_rev" || !ok {
					required = true
				}
			}
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseDoc(%q): error %T", b, err)
			}
			ok := false
			for _, j := range justified {
				ok = ok || errors.Is(err, j)
			}
			if errors.Is(err, ErrBadSpecialMember) {
				ok = false
				for _, name := range badNames {
					ok = ok || e.Reason == name
				}
			}
			if !ok {
				t.Fatalf("ParseDoc(%q): unjustified error %v (decoded %v)", b, err, in)
			}
			return
		}
		if required {
			t.Fatalf("ParseDoc(%q) accepted, want one of %v", b, justified)
		}

		// The body: compact, valid, the input minus the special members.
		if !strictValid(d.Body) {
			t.Fatalf("ParseDoc(%q): invalid body %q", b, d.Body)
		}
		if c, _ := Compact(nil, d.Body); !bytes.Equal(c, d.Body) {
			t.Fatalf("ParseDoc(%q): body %q is not compact", b, d.Body)
		}
		want := map[string]any{}
		for k, v := range in {
			if !dropped(k) {
				want[k] = v
			}
		}
		if got := decode(t, d.Body); !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseDoc(%q): body %q decodes to %v, want %v", b, d.Body, got, want)
		}
		if len(want) == len(in) && !bytes.Equal(d.Body, compact) {
			t.Fatalf("ParseDoc(%q): body %q, want the compact input %q", b, d.Body, compact)
		}

		// The special members.
		id, hasID := in["_id"].(string)
		if d.HasID != hasID || d.ID != id {
			t.Fatalf("ParseDoc(%q): ID %q %v, want %q %v", b, d.ID, d.HasID, id, hasID)
		}
		if rev, ok := in["_rev"].(string); d.HasRev && d.Rev != rev || !d.HasRev && in["_revisions"] == nil && ok {
			t.Fatalf("ParseDoc(%q): Rev %q %v, want %q", b, d.Rev, d.HasRev, rev)
		}
		if d.Deleted != (in["_deleted"] == true) {
			t.Fatalf("ParseDoc(%q): Deleted %v", b, d.Deleted)
		}
		if v, ok := in["_attachments"]; ok != d.HasAttachments || ok && !reflect.DeepEqual(decode(t, d.Attachments), v) {
			t.Fatalf("ParseDoc(%q): Attachments %q", b, d.Attachments)
		}
		if v, ok := in["_access"]; ok != (d.Access != nil) || ok && !reflect.DeepEqual(decode(t, d.Access), v) {
			t.Fatalf("ParseDoc(%q): Access %q", b, d.Access)
		}
		if v, ok := in["_revisions"].(map[string]any); ok != (d.Revisions != nil) {
			t.Fatalf("ParseDoc(%q): Revisions %v", b, d.Revisions)
		} else if ok {
			ids := []string{}
			for _, id := range v["ids"].([]any) {
				ids = append(ids, id.(string))
			}
			start, _ := revStart(v["start"])
			if got := d.Revisions; !reflect.DeepEqual(got.IDs, ids) || got.Start != start {
				t.Fatalf("ParseDoc(%q): Revisions %+v, want %v", b, got, v)
			}
		}
	})
}

// revStart is the oracle for _revisions.start: a JSON integer (no fraction
// or exponent, as Erlang's is_integer) that fits a uint64; "-0" is 0.
func revStart(v any) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok || n == "-0" {
		return 0, ok
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	return u, err == nil
}

// FuzzParseBulkDocs checks ParseBulkDocs against encoding/json.
func FuzzParseBulkDocs(f *testing.F) {
	for _, s := range []string{
		`{"docs":[{"_id":"a"},1,"x",[]],"new_edits":false}`,
		`{"docs":[],"all_or_nothing":true,"w":2}`,
		`{ "docs" : [ { } ] , "x" : { "docs" : 1 } }`,
		`{"docs":{}}`, `{"doc":[]}`, `[]`, `{"docs":[`, `{"docs":[],"new_edits":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bd, err := ParseBulkDocs(b)
		if !strictValid(b) {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("ParseBulkDocs(%q): error %v, want ErrInvalidJSON", b, err)
			}
			return
		}
		in, ok := decode(t, b).(map[string]any)
		var want error
		docs, isArray := in["docs"].([]any)
		_, hasDocs := in["docs"]
		ne, hasNE := in["new_edits"]
		_, neBool := ne.(bool)
		switch {
		case !ok:
			want = ErrBodyNotObject
		case !hasDocs:
			want = ErrMissingDocs
		case !isArray:
			want = ErrDocsNotArray
		case hasNE && !neBool:
			want = ErrBadNewEdits
		}
		if want != nil || err != nil {
			if !errors.Is(err, want) {
				t.Fatalf("ParseBulkDocs(%q): error %v, want %v", b, err, want)
			}
			return
		}
		if len(bd.Docs) != len(docs) {
			t.Fatalf("ParseBulkDocs(%q): %d docs, want %d", b, len(bd.Docs), len(docs))
		}
		for i, raw := range bd.Docs {
			if !reflect.DeepEqual(decode(t, raw), docs[i]) || len(bytes.TrimSpace(raw)) != len(raw) {
				t.Fatalf("ParseBulkDocs(%q): doc %d is %q, want %v", b, i, raw, docs[i])
			}
		}
		if bd.NewEdits != (ne != false) || bd.HasNewEdits != hasNE || bd.AllOrNothing != (in["all_or_nothing"] == true) {
			t.Fatalf("ParseBulkDocs(%q): %+v", b, bd)
		}
	})
}

// FuzzString checks AppendString against encoding/json and Unquote against
// json.Unmarshal.
func FuzzString(f *testing.F) {
	for _, c := range stringCases {
		f.Add([]byte(c.s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		enc := AppendString(nil, s)
		if want := stdString(t, s); string(enc) != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, enc, want)
		}
		got, err := Unquote(enc)
		if err != nil || utf8.ValidString(s) && got != s {
			t.Fatalf("Unquote(AppendString(%q)) = %q, %v", s, got, err)
		}
		// b itself as a token.
		got, err = Unquote(b)
		if ok := len(b) > 1 && b[0] == '"' && b[len(b)-1] == '"' && strictValid(b); ok != (err == nil) {
			t.Fatalf("Unquote(%q) = %q, %v; valid %v", b, got, err, ok)
		} else if ok {
			var want string
			if json.Unmarshal(b, &want) != nil || got != want {
				t.Fatalf("Unquote(%q) = %q, want %q", b, got, want)
			}
		}
	})
}

// FuzzWalker checks the trusting walker against the validating scanner: on
// valid JSON both delimit every value alike, and Object and Array visit
// the members encoding/json finds; on anything else the walker never
// panics and every end it returns lies past where it started, within b.
// On every input SkipValue ends where its byte-by-byte definition does.
func FuzzWalker(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":"\""}],"d":"\\"}`, `[1,"x",[],{}]`, `{}`, `[]`, ` { "a" : [ 1 , 2 ] } `,
		`{"a":{"b":{"c":[[["\\\""]]]}}}`, `{"\u0061":"\ud83d\ude00","b":-1.5e+3,"c":true,"d":null}`, `"a\\\"b"`, `12`,
		`{"a":tru}`, `[1,]`, `{"a"}`, `{"a":[}`, `[{]`, `"open\"`, `{"a":1 "b":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		inside := func(what string, from, end int) {
			if end != -1 && (end <= from || end > len(b)) {
				t.Fatalf("%s from %d ended at %d of %d in %q", what, from, end, len(b), b)
			}
		}
		// SkipValue is the byte-by-byte definition, from any start (from
		// every start of a short input, from 16 of a long one)
		for i := 0; i <= len(b); i += 1 + len(b)/16 {
			if got, want := SkipValue(b, i), skipValueBytewise(b, i); got != want {
				t.Fatalf("SkipValue(%q, %d) = %d, byte by byte %d", b, i, got, want)
			}
		}
		valid := strictValid(b)
		// Every value the walker meets, the scanner must end at the same
		// byte when b is valid.
		var s scanner
		s.b = b
		same := func(vs, ve int) {
			inside("SkipValue", vs, ve)
			if valid {
				s.depth = 0
				if want := s.value(vs); ve != want {
					t.Fatalf("SkipValue at %d: %d, scanner %d in %s", vs, ve, want, b)
				}
			}
		}
		// The checks that read a value again run on the outer levels only,
		// so that deep nesting costs the fuzzer linear time, not quadratic.
		var walk func(i, depth int) int
		walk = func(i, depth int) int {
			check := valid && depth < 4
			i = SkipWS(b, i)
			ve := -1
			if check {
				ve = SkipValue(b, i)
			}
			var end int
			switch {
			case i < len(b) && b[i] == '{':
				var keys []string
				end = Object(b, i, func(k []byte, vs int) int {
					inside("key", i, vs)
					if valid {
						u, err := Unquote(k)
						if err != nil {
							t.Fatalf("key %q: %v", k, err)
						}
						keys = append(keys, u)
					}
					return walk(vs, depth+1)
				})
				if check {
					var m map[string]json.RawMessage
					if err := json.Unmarshal(b[i:max(end, i)], &m); err != nil {
						t.Fatalf("Object ended at %d in %s: %v", end, b, err)
					}
					for _, k := range keys {
						if _, ok := m[k]; !ok {
							t.Fatalf("key %q not in %s", k, b)
						}
					}
				}
			case i < len(b) && b[i] == '[':
				n := 0
				end = Array(b, i, func(vs int) int { n++; return walk(vs, depth+1) })
				if check {
					var a []json.RawMessage
					if err := json.Unmarshal(b[i:max(end, i)], &a); err != nil || len(a) != n {
						t.Fatalf("Array ended at %d with %d elements in %s: %v", end, n, b, err)
					}
				}
			default:
				end = SkipValue(b, i)
				ve = end
			}
			// On invalid bytes the two may part: SkipValue does not match
			// brackets, and a scalar runs up to a delimiter, quotes and
			// all, so either can take what the other refuses.
			if check && end != ve {
				t.Fatalf("walked to %d, SkipValue %d at %d in %s", end, ve, i, b)
			}
			if end >= 0 {
				inside("value", i, end)
				if check {
					same(i, end)
				}
			} else if valid {
				t.Fatalf("valid %s: no end at %d", b, i)
			}
			return end
		}
		walk(0, 0)
	})
}
