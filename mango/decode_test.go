package mango

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decodeFields reads the members a query needs as a whole decode would
// (numbers as written, escapes, nested values; the first of a member
// named twice, as CouchDB's matcher reads it), and falls back to a whole
// decode on what the walker cannot delimit.
func FuzzDecodeFields(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x","c":{"d":[1,2.5e3,-0]},"e":null,"f":true}`,
		`{"a":"esc\"aped\u00e9","b":[],"a":2}`,
		`{"pad":"` + string(bytes.Repeat([]byte("p"), 64)) + `","a":-1.5E-3}`,
		`{"a":1,}`, `[1]`, `{"a"}`, `{"b":{"a":1}}`, `{"\u0061":"x"}`,
	} {
		f.Add([]byte(s), "a", "b")
	}
	f.Fuzz(func(t *testing.T, raw []byte, k1, k2 string) {
		want, ok := firstMembers(raw)
		if !ok {
			_, _ = DecodeFields(raw, map[string]bool{k1: true, k2: true}) // must not panic
			return
		}
		got, gotOK := DecodeFields(raw, map[string]bool{k1: true, k2: true})
		if !gotOK {
			t.Fatalf("%q: not decoded, encoding/json decodes it", raw)
		}
		for _, k := range []string{k1, k2} {
			w, inWant := want[k]
			g, inGot := got[k]
			if inWant != inGot || !reflect.DeepEqual(g, w) {
				t.Fatalf("%q: %q = %#v (%v), want %#v (%v)", raw, k, g, inGot, w, inWant)
			}
		}
	})
}

// firstMembers decodes a JSON object's members, the first of each name.
func firstMembers(raw []byte) (map[string]any, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := map[string]any{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, false
		}
		var v any
		if d.Decode(&v) != nil {
			return nil, false
		}
		k := tok.(string)
		if _, seen := out[k]; !seen {
			out[k] = v
		}
	}
	return out, true
}
