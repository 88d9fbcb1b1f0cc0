package mango

import (
	"encoding/json"
	"errors"
	"testing"
)

// fuzzDocs are what FuzzNormalize matches selectors against.
var fuzzDocs = append([]string{
	`{"_id":"a","type":"user","age":31,"name":{"first":"Ada","last":"L"},"tags":["x","y"],"nil":null,"ok":true}`,
	`{"a":{"b":{"c":1,"d":[]}},"b":[1,{"c":2}],"c":"s"}`,
	`{"a":[1,2,3],"b":{"c":{"d":[1,{"c":1}]}}}`,
	`{}`,
}, matchDocs...)

// hasNegation reports a $not or $nor in a selector: Normalize pushes
// them down onto the conditions, and a negated condition does not match
// a doc without the field ({"$not":{"a":{"$gt":1}}} is {"a":{"$lte":1}}),
// where negating the whole selector does. CouchDB matches the normalized
// form (TestMatchAsCouchDB), so the two differ there by design.
func hasNegation(v any) bool {
	switch v := v.(type) {
	case Object:
		for _, m := range v {
			if m.Key == "$not" || m.Key == "$nor" || hasNegation(m.Value) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNegation(e) {
				return true
			}
		}
	}
	return false
}

// FuzzNormalize normalizes selectors from user input: it must not panic,
// a refusal must be a *RequestError, normalizing the result must change
// nothing, and the normalized selector must match the same docs as the
// selector itself (but where a negation moves, see hasNegation).
func FuzzNormalize(f *testing.F) {
	for _, s := range selectorCases {
		f.Add([]byte(s))
	}
	for _, s := range matchSelectors {
		f.Add([]byte(s))
	}
	var docs []any
	for _, d := range fuzzDocs {
		var v any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			f.Fatal(err)
		}
		docs = append(docs, v)
	}
	f.Fuzz(func(t *testing.T, sel []byte) {
		v, err := decodeJSON(sel)
		if err != nil {
			return
		}
		n, err := Normalize(v)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Status == 0 || re.Err == "" {
				t.Fatalf("%s: error %T %v, want a *RequestError", sel, err, err)
			}
			return
		}
		nb, err := json.Marshal(n)
		if err != nil {
			t.Fatalf("%s: normalized does not encode: %v", sel, err)
		}
		n2, err := Normalize(n)
		if err != nil {
			t.Fatalf("%s: normalized %s does not normalize: %v", sel, nb, err)
		}
		if nb2, _ := json.Marshal(n2); string(nb2) != string(nb) {
			t.Fatalf("%s: normalized %s, again %s", sel, nb, nb2)
		}
		raw, err := Compile(plain(v))
		if err != nil {
			return
		}
		ns, err := Compile(plain(n))
		if err != nil {
			t.Fatalf("%s compiles, normalized %s does not: %v", sel, nb, err)
		}
		if hasNegation(v) {
			return
		}
		for i, d := range docs {
			if raw.Match(d) != ns.Match(d) {
				t.Fatalf("%s (normalized %s) on %s: %v, normalized %v", sel, nb, fuzzDocs[i], raw.Match(d), ns.Match(d))
			}
		}
	})
}
