// Package mango is the request layer of CouchDB's Mango query language
// (_find, _explain, _index, and the "selector" filter of _changes and
// the replicator), as CouchDB 3.5.2 has it: ParseFind and
// ParseIndexRequest read requests with CouchDB's validation and errors,
// Normalize is mango_selector:normalize, IndexRequest and Index are a
// json index's design doc and what it emits, Fields is the "fields"
// projection, and Compile/Match match documents. DESIGN.md says which
// CouchDB module each file mirrors.
//
// The matcher: implicit and explicit $and, $or, $not, $nor, field
// conditions $eq $ne $gt $gte $lt $lte $in $nin $exists $type $size $mod
// $regex $all $beginsWith, the sub-selectors $elemMatch $allMatch
// $keyMapMatch, and nested fields (dotted paths or nested objects; a
// decimal part of a path indexes an array, "a.0.b", and the field "" where
// no field is named is the value itself, as in a normalized selector).
// $text is rejected: it needs a text index, as in CouchDB. The semantics
// follow CouchDB's mango_selector.erl (norm_ops for the arguments, match
// for the values); CouchDB matches the normalized selector, which differs
// from the selector as written where a negation moves onto a condition
// (see Normalize). Values compare with CouchDB's collation order of JSON
// types (null < false < true < numbers < strings < arrays < objects),
// strings by CouchDB's ICU collation (see collate). A field path has at
// most 100 levels (maxFieldDepth), which CouchDB does not bound.
package mango

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/settee/settee/collate"
)

// Error is a selector that does not compile. Reason says why in the words
// of CouchDB's mango_error where CouchDB has them (an HTTP answer carries
// it as CouchDB's reason); an operator CouchDB knows but this package does
// not match is "Unsupported operator", one CouchDB does not know "Invalid
// operator".
type Error struct{ Reason string }

func (e *Error) Error() string { return "mango: " + e.Reason }

func errorf(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// badArg is CouchDB's bad_arg: an operator's argument of the wrong kind.
func badArg(op string, arg any) error {
	b, _ := json.Marshal(arg)
	return errorf("Bad argument for operator %s: %s", op, b)
}

// condOps are the field conditions this package matches.
var condOps = map[string]bool{"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true,
	"$in": true, "$nin": true, "$exists": true, "$type": true, "$size": true, "$mod": true, "$regex": true,
	"$all": true, "$elemMatch": true, "$allMatch": true, "$keyMapMatch": true, "$beginsWith": true}

// couchOps are the operators of CouchDB's Mango that this package does not
// match: $text needs a text index, which _changes and the replicator do
// not have.
var couchOps = map[string]bool{"$text": true}

// Selector is a compiled selector.
type Selector struct{ m matcher }

type matcher func(doc any) bool

// Parse compiles a selector given as JSON.
func Parse(b []byte) (*Selector, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, errorf("invalid JSON: %v", err)
	}
	return Compile(v)
}

// Compile compiles a selector decoded with encoding/json, or one this
// package built (an Object, as Normalize returns).
func Compile(v any) (*Selector, error) {
	if o, isObj := v.(Object); isObj {
		v = plain(o)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errorf("Selector error: expected a JSON object")
	}
	m, err := compileObject(obj, nil)
	if err != nil {
		return nil, err
	}
	return &Selector{m: m}, nil
}

// Match reports whether doc (decoded with encoding/json) matches.
func (s *Selector) Match(doc any) bool { return s.m(doc) }

// MatchJSON decodes doc and matches it; invalid JSON does not match.
func (s *Selector) MatchJSON(doc []byte) bool {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return false
	}
	return s.m(v)
}

// compileObject compiles {k: v, ...} found at path: an implicit $and of
// its members.
func compileObject(obj map[string]any, path *fieldPath) (matcher, error) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ms []matcher
	for _, k := range keys {
		m, err := compileMember(k, obj[k], path)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return and(ms), nil
}

// compileSub compiles the selector an operator takes ($and's, $or's and
// $nor's elements, $not's, $elemMatch's …): as there, an empty one is no
// "match anything" but {"$eq":{}} (norm_ops makes it so; only a whole
// selector {} matches every doc), so it matches a value that is {}.
func compileSub(obj map[string]any, path *fieldPath) (matcher, error) {
	if len(obj) == 0 {
		if path == nil {
			path = &fieldPath{}
		}
		return compileOp("$eq", obj, path)
	}
	return compileObject(obj, path)
}

func and(ms []matcher) matcher {
	return func(d any) bool {
		for _, m := range ms {
			if !m(d) {
				return false
			}
		}
		return true
	}
}

func compileList(v any, op string, path *fieldPath) ([]matcher, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, badArg(op, v)
	}
	ms := make([]matcher, 0, len(arr))
	for _, e := range arr {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, badArg(op, v)
		}
		m, err := compileSub(o, path)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func compileMember(k string, v any, path *fieldPath) (matcher, error) {
	switch k {
	case "$and":
		ms, err := compileList(v, k, path)
		if err != nil {
			return nil, err
		}
		return and(ms), nil
	case "$or", "$nor":
		ms, err := compileList(v, k, path)
		if err != nil {
			return nil, err
		}
		want := k == "$or"
		if want && len(ms) == 0 {
			// mango_selector:match takes an empty $or as true, as it
			// does an empty $and
			return func(any) bool { return true }, nil
		}
		return func(d any) bool {
			for _, m := range ms {
				if m(d) {
					return want
				}
			}
			return !want
		}, nil
	case "$not":
		o, ok := v.(map[string]any)
		if !ok {
			return nil, badArg(k, v)
		}
		m, err := compileSub(o, path)
		if err != nil {
			return nil, err
		}
		return func(d any) bool { return !m(d) }, nil
	}
	if strings.HasPrefix(k, "$") {
		if path == nil {
			if !condOps[k] && !couchOps[k] {
				return nil, errorf("Invalid operator: %s", k)
			}
			return nil, errorf("One or more conditions is missing a field name.")
		}
		return compileOp(k, v, path)
	}
	if k == "" && path.len() == 0 {
		// the field "" where no field is named yet is the value itself:
		// Normalize writes an $elemMatch's {"$gt":1} as {"":{"$gt":1}},
		// and mango_selector:match reads {"": Cond} as Cond on the value
		if path == nil {
			path = &fieldPath{}
		}
		if o, ok := v.(map[string]any); ok && len(o) > 0 {
			return compileObject(o, path)
		}
		return compileOp("$eq", v, path)
	}
	p := &fieldPath{parent: path, parts: splitField(k)}
	p.depth = path.len() + len(p.parts)
	if p.depth > maxFieldDepth {
		return nil, errorf("Selector error: a field path has more than %d levels", maxFieldDepth)
	}
	if o, ok := v.(map[string]any); ok && len(o) > 0 {
		return compileObject(o, p)
	}
	return compileOp("$eq", v, p)
}

// splitField splits a dotted field name; "\." escapes a dot.
func splitField(f string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == '\\' && i+1 < len(f) && f[i+1] == '.':
			cur.WriteByte('.')
			i++
		case f[i] == '.':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(f[i])
		}
	}
	return append(out, cur.String())
}

// maxFieldDepth bounds the levels of a field path (its dotted parts
// across nested objects), as MongoDB bounds documents to 100 levels: each
// condition looks its field up level by level in every document matched.
const maxFieldDepth = 100

// fieldPath is a field's path: its parent's, then parts. A nil path is the
// top level of the selector; an empty one the element an $elemMatch,
// $allMatch or $keyMapMatch sub-selector matches. Sharing the parent, not
// copying it, keeps compiling linear in the selector's size.
type fieldPath struct {
	parent *fieldPath
	parts  []string
	depth  int // levels, the parent's included
}

func (p *fieldPath) len() int {
	if p == nil {
		return 0
	}
	return p.depth
}

func lookup(d any, path *fieldPath) (any, bool) {
	if path == nil {
		return d, true
	}
	d, ok := lookup(d, path.parent)
	if !ok {
		return nil, false
	}
	for _, p := range path.parts {
		switch o := d.(type) {
		case map[string]any:
			if d, ok = o[p]; !ok {
				return nil, false
			}
		case []any:
			// mango_doc:get_field: a decimal part indexes an array
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(o) || !isDecimal(p) {
				return nil, false
			}
			d = o[i]
		default:
			return nil, false
		}
	}
	return d, true
}

func compileOp(op string, arg any, path *fieldPath) (matcher, error) {
	var test func(v any) bool
	switch op {
	case "$eq":
		test = func(v any) bool { return Compare(v, arg) == 0 }
	case "$ne":
		test = func(v any) bool { return Compare(v, arg) != 0 }
	case "$gt":
		test = func(v any) bool { return Compare(v, arg) > 0 }
	case "$gte":
		test = func(v any) bool { return Compare(v, arg) >= 0 }
	case "$lt":
		test = func(v any) bool { return Compare(v, arg) < 0 }
	case "$lte":
		test = func(v any) bool { return Compare(v, arg) <= 0 }
	case "$in", "$nin":
		list, ok := arg.([]any)
		if !ok {
			return nil, badArg(op, arg)
		}
		in := func(v any) bool {
			for _, e := range list {
				if Compare(v, e) == 0 {
					return true
				}
			}
			if arr, ok := v.([]any); ok {
				for _, x := range arr {
					for _, e := range list {
						if Compare(x, e) == 0 {
							return true
						}
					}
				}
			}
			return false
		}
		if op == "$in" {
			test = in
		} else {
			test = func(v any) bool { return !in(v) }
		}
	case "$exists":
		want, ok := arg.(bool)
		if !ok {
			return nil, badArg(op, arg)
		}
		return func(d any) bool {
			_, found := lookup(d, path)
			return found == want
		}, nil
	case "$type":
		// norm_ops takes any string; mango_json:type names the six JSON
		// types, so another name matches nothing
		name, ok := arg.(string)
		if !ok {
			return nil, badArg(op, arg)
		}
		test = func(v any) bool { return typeName(v) == name }
	case "$size":
		// a non-negative integer; only arrays match
		n, ok := integer(arg)
		if !ok || n < 0 {
			return nil, badArg(op, arg)
		}
		test = func(v any) bool {
			arr, ok := v.([]any)
			return ok && int64(len(arr)) == n
		}
	case "$mod":
		// [Divisor, Remainder], integers; Value rem Divisor == Remainder,
		// rem truncating toward zero as Go's % does. Only integer values
		// match. CouchDB takes a divisor of 0 and fails the match with
		// badarith; here it is a bad argument.
		pair, ok := arg.([]any)
		if !ok || len(pair) != 2 {
			return nil, badArg(op, arg)
		}
		d, okD := integer(pair[0])
		r, okR := integer(pair[1])
		if !okD || !okR || d == 0 {
			return nil, badArg(op, arg)
		}
		test = func(v any) bool {
			n, ok := integer(v)
			return ok && n%d == r
		}
	case "$regex":
		// CouchDB compiles the pattern with PCRE (re:compile) and matches
		// unanchored (re:run); Go's regexp is RE2, so: lookaround and
		// backreferences do not compile here (a bad argument) where
		// CouchDB takes them; "." and classes match a code point, not a
		// byte as PCRE does on a binary without the unicode option; "$"
		// without (?m) matches only at the end of the text, not also
		// before a final newline. Only strings match.
		src, ok := arg.(string)
		if !ok {
			// norm_ops has no bad_arg clause for a non-string: it falls
			// through to the unknown operator
			return nil, errorf("Invalid operator: %s", op)
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, badArg(op, arg)
		}
		test = func(v any) bool {
			s, ok := v.(string)
			return ok && re.MatchString(s)
		}
	case "$beginsWith":
		// a non-string argument is CouchDB's invalid_operator, as for
		// $regex; only strings match
		prefix, ok := arg.(string)
		if !ok {
			return nil, errorf("Invalid operator: %s", op)
		}
		test = func(v any) bool {
			s, ok := v.(string)
			return ok && strings.HasPrefix(s, prefix)
		}
	case "$all":
		// every argument is an element of the array; [] matches nothing;
		// [A] with A an array also matches an array equal to A
		list, ok := arg.([]any)
		if !ok {
			return nil, badArg(op, arg)
		}
		test = func(v any) bool {
			arr, ok := v.([]any)
			if !ok || len(list) == 0 {
				return false
			}
			if len(list) == 1 {
				if a, ok := list[0].([]any); ok && Compare(a, arr) == 0 {
					return true
				}
			}
			for _, e := range list {
				found := false
				for _, x := range arr {
					if Compare(x, e) == 0 {
						found = true
						break
					}
				}
				if !found {
					return false
				}
			}
			return true
		}
	case "$elemMatch", "$allMatch", "$keyMapMatch":
		o, ok := arg.(map[string]any)
		if !ok {
			return nil, badArg(op, arg)
		}
		// the sub-selector applies to each element (or key) itself: an
		// empty, non-nil path, under which a bare operator is allowed
		sub, err := compileSub(o, &fieldPath{})
		if err != nil {
			return nil, err
		}
		switch op {
		case "$elemMatch":
			// some element matches; an empty array or a non-array does not
			test = func(v any) bool {
				arr, _ := v.([]any)
				for _, x := range arr {
					if sub(x) {
						return true
					}
				}
				return false
			}
		case "$allMatch":
			// every element matches; mango_selector.erl matches only a
			// non-empty list ([_ | _]), so an empty array does not match
			test = func(v any) bool {
				arr, ok := v.([]any)
				if !ok || len(arr) == 0 {
					return false
				}
				for _, x := range arr {
					if !sub(x) {
						return false
					}
				}
				return true
			}
		default:
			// some key of the object matches; an empty object or a
			// non-object does not
			test = func(v any) bool {
				obj, _ := v.(map[string]any)
				for k := range obj {
					if sub(k) {
						return true
					}
				}
				return false
			}
		}
	default:
		if couchOps[op] {
			return nil, errorf("Unsupported operator: %s", op)
		}
		return nil, errorf("Invalid operator: %s", op)
	}
	return func(d any) bool {
		v, ok := lookup(d, path)
		return ok && test(v)
	}, nil
}

// typeName is mango_json:type: the JSON type of a decoded value.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// integer reports v as an integer, for CouchDB's is_integer. A
// json.Number is one when it has no fraction or exponent, as jiffy decodes
// it; a float64 from encoding/json has lost that, so a whole float64 in
// float64's exact range counts (2.0 is an integer here, not in CouchDB).
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	}
	return 0, false
}

func rank(v any) int {
	switch v := v.(type) {
	case nil:
		return 0
	case bool:
		if v {
			return 2
		}
		return 1
	case float64, json.Number:
		return 3
	case string:
		return 4
	case []any:
		return 5
	case map[string]any:
		return 6
	}
	return 7
}

func num(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return 0
}

// Compare orders two decoded JSON values by CouchDB's type order, then by
// value (numbers numerically, strings by CouchDB's ICU collation as
// collate does it, arrays element-wise, objects by their sorted keys and
// values: a map has no order of its own, where CouchDB compares members
// in the document's order).
func Compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch ra {
	case 3:
		x, y := num(a), num(b)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case 4:
		return compareStrings(a.(string), b.(string))
	case 5:
		x, y := a.([]any), b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := Compare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(x), len(y))
	case 6:
		x, y := a.(map[string]any), b.(map[string]any)
		kx, ky := sortedKeys(x), sortedKeys(y)
		for i := 0; i < len(kx) && i < len(ky); i++ {
			if c := compareStrings(kx[i], ky[i]); c != 0 {
				return c
			}
			if c := Compare(x[kx[i]], y[ky[i]]); c != 0 {
				return c
			}
		}
		return cmpInt(len(kx), len(ky))
	}
	return 0
}

// compareStrings is couch_ejson_compare's string order, which
// mango_json:cmp uses for every comparison of a selector: the Unicode
// Collation Algorithm (root collation, as ICU), not code points, so "a" <
// "B" < "b". Strings equal but for ignorable characters compare 0.
func compareStrings(a, b string) int {
	if a == b {
		return 0
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return collate.Compare(ja, jb)
}

func sortedKeys(m map[string]any) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
