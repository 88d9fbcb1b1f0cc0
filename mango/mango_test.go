package mango

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

type matchCase struct {
	sel  string
	want bool
}

// checkMatches parses each case's selector and matches it against doc.
func checkMatches(t *testing.T, doc string, cases []matchCase) {
	t.Helper()
	var d any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		s, err := Parse([]byte(c.sel))
		if err != nil {
			t.Errorf("%s: %v", c.sel, err)
			continue
		}
		if got := s.Match(d); got != c.want {
			t.Errorf("%s: got %v want %v", c.sel, got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	doc := `{"_id":"a","type":"user","age":31,"name":{"first":"Ada","last":"L"},"tags":["x","y"],"nil":null,"ok":true}`
	cases := []matchCase{
		{`{}`, true},
		{`{"type":"user"}`, true},
		{`{"type":{"$eq":"admin"}}`, false},
		{`{"age":{"$gt":30}}`, true},
		{`{"age":{"$gte":31,"$lt":32}}`, true},
		{`{"age":{"$lte":30}}`, false},
		{`{"age":{"$ne":31}}`, false},
		{`{"missing":{"$ne":1}}`, false},
		{`{"name.first":"Ada"}`, true},
		{`{"name":{"last":"L"}}`, true},
		{`{"name":{"last":{"$in":["M","N"]}}}`, false},
		{`{"tags":{"$in":["y"]}}`, true},
		{`{"tags":{"$nin":["z"]}}`, true},
		{`{"missing":{"$exists":false}}`, true},
		{`{"nil":{"$exists":true}}`, true},
		{`{"$or":[{"type":"admin"},{"age":31}]}`, true},
		{`{"$and":[{"type":"user"},{"age":{"$lt":18}}]}`, false},
		{`{"$not":{"type":"user"}}`, false},
		{`{"type":{"$gt":null}}`, true},
		{`{"ok":{"$lt":0}}`, true},
		{`{"$nor":[{"type":"admin"}]}`, true},
		// a field path of 100 levels, the most there may be
		{`{"` + strings.Repeat("a.", 99) + `a":{"$exists":false}}`, true},
		{strings.Repeat(`{"a":`, 99) + `{"a\\.b":{"$exists":false}}` + strings.Repeat(`}`, 99), true},
	}
	checkMatches(t, doc, cases)
}

func TestBadSelectors(t *testing.T) {
	for _, s := range []string{`[]`, `{"$gt":1}`, `{"a":{"$in":1}}`, `{"a":{"$exists":1}}`, `{"a":{"$text":"x"}}`, `{"$or":{}}`, `nope`} {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("%s: want an error", s)
		}
	}
}

// TestErrorReasons: a selector that does not compile says why in CouchDB's
// words (mango_error), which _changes?filter=_selector answers as its
// reason.
func TestErrorReasons(t *testing.T) {
	for _, c := range []struct{ sel, reason string }{
		{`[]`, "Selector error: expected a JSON object"},
		{`{"a":{"$foo":1}}`, "Invalid operator: $foo"},
		{`{"$foo":1}`, "Invalid operator: $foo"},
		{`{"a":{"$text":"x"}}`, "Unsupported operator: $text"},
		{`{"$gt":1}`, "One or more conditions is missing a field name."},
		{`{"a":{"$in":1}}`, "Bad argument for operator $in: 1"},
		{`{"a":{"$exists":"yes"}}`, `Bad argument for operator $exists: "yes"`},
		{`{"$or":{}}`, "Bad argument for operator $or: {}"},
		{`{"$not":[1]}`, "Bad argument for operator $not: [1]"},
		// a field path of more than 100 levels, dotted or nested: each
		// level had every field below it copy the path, so a deep or
		// long path with many fields below it took memory quadratic in
		// the selector's size (a 60 KB selector of nested objects, 800 MB)
		{`{"` + strings.Repeat("a.", 100) + `a":1}`, "Selector error: a field path has more than 100 levels"},
		{strings.Repeat(`{"a":`, 101) + `1` + strings.Repeat(`}`, 101), "Selector error: a field path has more than 100 levels"},
		{`{"` + strings.Repeat("a.", 50) + `a":{"` + strings.Repeat("b.", 50) + `b":1}}`, "Selector error: a field path has more than 100 levels"},
		{`{"a":{"$elemMatch":{"` + strings.Repeat("a.", 100) + `a":1}}}`, "Selector error: a field path has more than 100 levels"},
	} {
		_, err := Parse([]byte(c.sel))
		var e *Error
		if !errors.As(err, &e) || e.Reason != c.reason {
			t.Errorf("%s: %v, want %q", c.sel, err, c.reason)
		}
	}
}

// TestOperators: the operators beyond the comparisons, each matching and
// not, with CouchDB's edge cases (mango_selector.erl match/3).
func TestOperators(t *testing.T) {
	doc := `{"_id":"a","name":"Ada Lovelace","n":7,"neg":-7,"f":7.5,"nil":null,"ok":false,` +
		`"tags":["x","y","z"],"empty":[],"nums":[3,8,12],"pairs":[[1,2],[3]],` +
		`"people":[{"name":"Ann","age":30},{"name":"Bob","age":17}],` +
		`"m":{"alpha":1,"beta":2},"em":{},"nl":"line\n"}`
	cases := []matchCase{
		// $type: the six JSON type names
		{`{"nil":{"$type":"null"}}`, true},
		{`{"ok":{"$type":"boolean"}}`, true},
		{`{"n":{"$type":"number"}}`, true},
		{`{"f":{"$type":"number"}}`, true},
		{`{"name":{"$type":"string"}}`, true},
		{`{"tags":{"$type":"array"}}`, true},
		{`{"m":{"$type":"object"}}`, true},
		{`{"n":{"$type":"string"}}`, false},
		{`{"tags":{"$type":"object"}}`, false},
		{`{"nil":{"$type":"boolean"}}`, false},
		{`{"n":{"$type":"integer"}}`, false}, // not a type name: matches nothing
		{`{"missing":{"$type":"null"}}`, false},
		// $size: arrays only
		{`{"tags":{"$size":3}}`, true},
		{`{"empty":{"$size":0}}`, true},
		{`{"tags":{"$size":2}}`, false},
		{`{"name":{"$size":12}}`, false}, // a string has no size
		{`{"m":{"$size":2}}`, false},
		// $mod: integer values only, rem truncating toward zero
		{`{"n":{"$mod":[3,1]}}`, true},
		{`{"n":{"$mod":[3,2]}}`, false},
		{`{"neg":{"$mod":[3,-1]}}`, true},
		{`{"neg":{"$mod":[3,2]}}`, false},
		{`{"n":{"$mod":[-3,1]}}`, true},
		{`{"f":{"$mod":[2,1]}}`, false},
		{`{"name":{"$mod":[2,0]}}`, false},
		// $regex: unanchored, strings only
		{`{"name":{"$regex":"^Ada"}}`, true},
		{`{"name":{"$regex":"Love"}}`, true},
		{`{"name":{"$regex":"(?i)lovelace$"}}`, true},
		{`{"name":{"$regex":"^Love"}}`, false},
		{`{"n":{"$regex":"7"}}`, false},
		{`{"tags":{"$regex":"x"}}`, false},
		{`{"name":{"$regex":""}}`, true},
		{`{"nil":{"$regex":""}}`, false},     // even a pattern matching "" needs a string
		{`{"nl":{"$regex":"line$"}}`, false}, // RE2: $ is the end of the text (PCRE also matches before a final newline)
		// $beginsWith: strings only
		{`{"name":{"$beginsWith":"Ada "}}`, true},
		{`{"name":{"$beginsWith":""}}`, true},
		{`{"name":{"$beginsWith":"ada"}}`, false},
		{`{"tags":{"$beginsWith":"x"}}`, false},
		// $all
		{`{"tags":{"$all":["z","x"]}}`, true},
		{`{"tags":{"$all":["x","q"]}}`, false},
		{`{"tags":{"$all":[]}}`, false},
		{`{"name":{"$all":["Ada Lovelace"]}}`, false},
		{`{"tags":{"$all":[["x","y","z"]]}}`, true}, // [A] also matches the array A itself
		{`{"pairs":{"$all":[[3]]}}`, true},
		{`{"pairs":{"$all":[[1]]}}`, false},
		// $elemMatch: some element; bare operators apply to the element
		{`{"nums":{"$elemMatch":{"$gt":5,"$lt":10}}}`, true},
		{`{"nums":{"$elemMatch":{"$gt":12}}}`, false},
		{`{"people":{"$elemMatch":{"name":"Bob","age":{"$lt":18}}}}`, true},
		{`{"people":{"$elemMatch":{"name":"Ann","age":{"$lt":18}}}}`, false},
		{`{"people":{"$elemMatch":{"$or":[{"name":"Zed"},{"age":30}]}}}`, true},
		{`{"empty":{"$elemMatch":{"$exists":true}}}`, false},
		{`{"m":{"$elemMatch":{"$gt":0}}}`, false},
		// $allMatch: every element of a non-empty array
		{`{"nums":{"$allMatch":{"$gt":2}}}`, true},
		{`{"nums":{"$allMatch":{"$gt":3}}}`, false},
		{`{"people":{"$allMatch":{"age":{"$gte":17}}}}`, true},
		{`{"people":{"$allMatch":{"age":{"$gte":18}}}}`, false},
		{`{"empty":{"$allMatch":{"$gt":0}}}`, false}, // mango_selector.erl: only [_ | _] matches
		{`{"name":{"$allMatch":{"$type":"string"}}}`, false},
		// $keyMapMatch: some key of an object
		{`{"m":{"$keyMapMatch":{"$eq":"beta"}}}`, true},
		{`{"m":{"$keyMapMatch":{"$regex":"^al"}}}`, true},
		{`{"m":{"$keyMapMatch":{"$eq":"gamma"}}}`, false},
		{`{"em":{"$keyMapMatch":{"$exists":true}}}`, false},
		{`{"tags":{"$keyMapMatch":{"$eq":"x"}}}`, false},
		// negated and nested under $and/$or/$not
		{`{"$not":{"tags":{"$size":3}}}`, false},
		{`{"$or":[{"n":{"$mod":[2,0]}},{"name":{"$regex":"lace$"}}]}`, true},
		{`{"people":{"$elemMatch":{"name":{"$beginsWith":"B"}}},"tags":{"$all":["y"]}}`, true},
	}
	checkMatches(t, doc, cases)
}

// TestOperatorArguments: arguments CouchDB's norm_ops rejects, with its
// reasons; $regex and $beginsWith with a non-string fall through to its
// unknown operator clause.
func TestOperatorArguments(t *testing.T) {
	for _, c := range []struct{ sel, reason string }{
		{`{"a":{"$type":1}}`, "Bad argument for operator $type: 1"},
		{`{"a":{"$type":null}}`, "Bad argument for operator $type: null"},
		{`{"a":{"$size":-1}}`, "Bad argument for operator $size: -1"},
		{`{"a":{"$size":1.5}}`, "Bad argument for operator $size: 1.5"},
		{`{"a":{"$size":"2"}}`, `Bad argument for operator $size: "2"`},
		{`{"a":{"$mod":[0,1]}}`, "Bad argument for operator $mod: [0,1]"},
		{`{"a":{"$mod":[2]}}`, "Bad argument for operator $mod: [2]"},
		{`{"a":{"$mod":[2,1,0]}}`, "Bad argument for operator $mod: [2,1,0]"},
		{`{"a":{"$mod":[2.5,1]}}`, "Bad argument for operator $mod: [2.5,1]"},
		{`{"a":{"$mod":"2"}}`, `Bad argument for operator $mod: "2"`},
		{`{"a":{"$regex":"("}}`, `Bad argument for operator $regex: "("`},
		{`{"a":{"$regex":"a(?=b)"}}`, `Bad argument for operator $regex: "a(?=b)"`}, // PCRE takes lookahead, RE2 does not
		{`{"a":{"$regex":1}}`, "Invalid operator: $regex"},
		{`{"a":{"$beginsWith":1}}`, "Invalid operator: $beginsWith"},
		{`{"a":{"$all":"x"}}`, `Bad argument for operator $all: "x"`},
		{`{"a":{"$elemMatch":[1]}}`, "Bad argument for operator $elemMatch: [1]"},
		{`{"a":{"$allMatch":1}}`, "Bad argument for operator $allMatch: 1"},
		{`{"a":{"$keyMapMatch":"k"}}`, `Bad argument for operator $keyMapMatch: "k"`},
		{`{"a":{"$elemMatch":{"$size":"x"}}}`, `Bad argument for operator $size: "x"`},
		{`{"a":{"$elemMatch":{"$foo":1}}}`, "Invalid operator: $foo"},
		{`{"$elemMatch":{"a":1}}`, "One or more conditions is missing a field name."},
		{`{"a":{"$text":"x"}}`, "Unsupported operator: $text"},
	} {
		_, err := Parse([]byte(c.sel))
		var e *Error
		if !errors.As(err, &e) || e.Reason != c.reason {
			t.Errorf("%s: %v, want %q", c.sel, err, c.reason)
		}
	}
}

// TestIntegerArguments: a json.Number is an integer only without a
// fraction or exponent, as CouchDB's is_integer on jiffy's decoding.
func TestIntegerArguments(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{
		{json.Number("4"), true}, {json.Number("-4"), true}, {json.Number("4.0"), false}, {json.Number("4e0"), false},
		{4.0, true}, {4.5, false}, {float64(1 << 54), false}, {"4", false}, {nil, false},
	} {
		if _, ok := integer(c.v); ok != c.want {
			t.Errorf("integer(%#v): %v, want %v", c.v, ok, c.want)
		}
	}
	s, err := Compile(map[string]any{"a": map[string]any{"$mod": []any{json.Number("3"), json.Number("1")}}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Match(map[string]any{"a": json.Number("10")}) || s.Match(map[string]any{"a": json.Number("10.0")}) {
		t.Error("$mod on json.Number: want 10 to match and 10.0 not")
	}
}

// TestWideSelectorMemory: many fields under a long path share it; each
// copied it, so this 2 MB selector took 500 MB of path copies.
func TestWideSelectorMemory(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"` + strings.Repeat("a.", 98) + `a":{`)
	for i := range 200000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"b%d":1`, i)
	}
	b.WriteString(`}}`)
	sel := []byte(b.String())
	var v any
	if err := json.Unmarshal(sel, &v); err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if _, err := Compile(v); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 100<<20 {
		t.Errorf("compiling a %d-byte selector allocated %d MB", len(sel), n>>20)
	} else {
		t.Logf("compiling a %d-byte selector allocated %d MB", len(sel), n>>20)
	}
}
