// Package reduce is CouchDB's built-in reduce functions, _sum, _count,
// _stats and _approx_count_distinct, in Go, as couch_query_servers.erl of
// CouchDB 3.5.2 defines them: on the Erlang terms jiffy decodes (exact
// integers, doubles, binaries, lists, {Props} objects), with Erlang's
// arithmetic (integer sums stay exact integers, any double makes a
// double), and the same results printed as CouchDB prints them.
//
// An index stores what Reduce and Rereduce return (intermediates) and
// answers a query with Final of the rereduced intermediate. Only
// _approx_count_distinct's intermediate differs from what the client
// sees: it carries the HyperLogLog sketch, {"hll":"<base64>"}, so that
// rereduce can merge sketches; Final turns it into the estimate. For the
// others Final is the identity (_stats's intermediate is already the
// {"sum","count","min","max","sumsqr"} object CouchDB's finalize packs,
// which its rereduce reads back unchanged).
//
// Errors come in CouchDB's two kinds. _sum does not fail on a bad value:
// its reduction becomes the row {"error":"builtin_reduce_error",
// "reason":...,"caused_by":<value>}, which later rereduces pass on (so the
// query answers 200 with that value). The other failures are raised in
// CouchDB and fail the query: they are returned as *Error, with CouchDB's
// error and reason (e.g. _stats's invalid_value "The _stats function
// requires that map values be numbers or arrays of numbers, not
// '<<"bad">>'"), and Erlang crashes of the same builtins (an object mixed
// with numbers in _sum, arrays of different lengths in _stats, a double
// overflow) as the *Error CouchDB answers for them (case_clause with the
// term, unknown_error function_clause, unknown_error badarith).
//
// Order matters (float sums round, the first bad value is the one
// reported, an object after a number crashes _sum where a number after an
// object is an error row), and CouchDB's is not key order everywhere:
// measured on 3.5.2, a query reduces each group's rows in reverse key
// order (couch_btree's fold prepends them), and the index build reduces a
// node's rows in key order, a failure there (e.g. _stats on a string)
// failing every query of the view, reduce=false included.
// TestCouchDBReduce models both; the index decides what it reproduces.
//
// Not here: _top_N, _bottom_N, _first and _last, which 3.5.2 also has
// (Lookup reports false for them).
package reduce

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/axiomhq/hyperloglog"
)

// Builtin is one of _sum, _count, _stats, _approx_count_distinct.
type Builtin interface {
	// Reduce reduces map rows: keys[i] is the emitted key (JSON), values[i] the value (JSON).
	Reduce(keys, values [][]byte) ([]byte, error)
	// Rereduce combines reductions (each a result of Reduce or Rereduce).
	Rereduce(reductions [][]byte) ([]byte, error)
	// ReduceIDs is Reduce with the rows' doc ids (ids[i] is values[i]'s),
	// which _sum's reduce_limit counts in its input size as CouchDB does;
	// Reduce counts them as empty.
	ReduceIDs(keys, ids, values [][]byte) ([]byte, error)
	// Final is what a client sees of a reduction (Reduce's or Rereduce's).
	Final(reduction []byte) ([]byte, error)
}

// Error is a failure CouchDB raises (the query fails) rather than
// returns as an error row: Error and Reason are CouchDB's "error" and
// "reason".
type Error struct {
	Name   string `json:"error"`
	Reason string `json:"reason"`
}

func (e *Error) Error() string { return e.Name + ": " + e.Reason }

// Lookup returns the builtin named name, or false. As CouchDB, it goes by
// prefix: any name that starts with "_sum" is _sum ("_sum\n", "_sumx");
// CouchDB's design doc validation accepts those and refuses other names
// that start with "_", case included ("_SUM").
func Lookup(name string) (Builtin, bool) {
	// _stats and _sum first would not matter: no builtin's name is a
	// prefix of another's.
	switch {
	case strings.HasPrefix(name, "_sum"):
		return sum{}, true
	case strings.HasPrefix(name, "_count"):
		return count{}, true
	case strings.HasPrefix(name, "_stats"):
		return statsFn{}, true
	case strings.HasPrefix(name, "_approx_count_distinct"):
		return approx{}, true
	}
	return nil, false
}

func parseAll(vals [][]byte) ([]any, error) {
	out := make([]any, len(vals))
	for i, v := range vals {
		t, err := parse(v)
		if err != nil {
			return nil, fmt.Errorf("reduce: value %d %.40q: %w", i, v, err)
		}
		out[i] = t
	}
	return out, nil
}

// crash is an Erlang error in a builtin, as CouchDB reports it: the
// error's name and its term ({case_clause,1} is case_clause, 1).
func crash(name string, term any) error {
	reason := ""
	if term != nil {
		reason = string(formatP(nil, term, false))
	}
	return &Error{Name: name, Reason: reason}
}

// _sum

type sum struct{}

// sumError is what sum_values throws: either an error object to pass on
// as is, or a bad value to report with ?SUMERROR.
type sumError struct {
	obj   object
	cause any
}

func (*sumError) Error() string { return "sum error" }

const sumReason = "The _sum function requires that map values be numbers, " +
	"arrays of numbers, or objects. Objects cannot be mixed with other " +
	"data structures. Objects can be arbitrarily nested, provided that the values " +
	"for all fields are themselves numbers, arrays of numbers, or objects."

func (sum) Reduce(keys, values [][]byte) ([]byte, error) {
	return sumRows(keys, nil, values, true)
}

func (sum) ReduceIDs(keys, ids, values [][]byte) ([]byte, error) {
	return sumRows(keys, ids, values, true)
}

func (sum) Rereduce(reductions [][]byte) ([]byte, error) {
	return sumRows(nil, nil, reductions, false)
}

func (sum) Final(r []byte) ([]byte, error) { return r, nil }

// sumRows is builtin_sum_rows and check_sum_overflow: the reduction is
// an error when its external size is over 5000 bytes and over half the
// input's, the input being the list of [[Key, DocId], Value] (reduce) or
// [[], Reduction] (rereduce).
func sumRows(keys, ids, vals [][]byte, isReduce bool) ([]byte, error) {
	if r, ok := sumNumbers(vals); ok {
		return r, nil
	}
	terms, err := parseAll(vals)
	if err != nil {
		return nil, err
	}
	acc, err := sumTerms(terms)
	if err != nil {
		return nil, err
	}
	in := 1 + 1 // version byte, NIL
	if len(terms) > 0 {
		in = 1 + 5 + 1 // version byte, LIST_EXT header, NIL tail
	}
	for i, t := range terms {
		if !isReduce {
			in += 5 + 1 + extSize(t) + 1 // [[], V]
			continue
		}
		kv := 5 + 5 // the row's LIST_EXT, its doc id's BINARY_EXT
		if i < len(ids) {
			kv += len(ids[i])
		}
		if i < len(keys) {
			k, err := parse(keys[i])
			if err != nil {
				return nil, fmt.Errorf("reduce: key %d %.40q: %w", i, keys[i], err)
			}
			kv += extSize(k)
		}
		in += 5 + kv + 1 + extSize(t) + 1 // [[K, Id], V]
	}
	out := 1 + extSize(acc)
	if out > 5000 && float64(out)*2 > float64(in) {
		acc = object{
			{"error", binary("builtin_reduce_error")},
			{"reason", binary(fmt.Sprintf("Reduce output must shrink more rapidly: input size: %d output size: %d context: ", in, out))},
		}
	}
	return encode(nil, acc), nil
}

// sumNumbers is the common case of sumRows: every value a number, so
// the sum is a number (no error, and far below reduce_limit's 5000
// bytes), added in the same order with the same arithmetic, without
// building terms. It reports false when a value is anything else or an
// integer sum leaves int64.
func sumNumbers(vals [][]byte) ([]byte, bool) {
	var n int64
	var f float64
	isFloat := false
	for _, v := range vals {
		v = bytes.TrimSpace(v)
		if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			return nil, false
		}
		if bytes.ContainsAny(v, ".eE") {
			x, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return nil, false
			}
			if !isFloat {
				f, isFloat = float64(n), true
			}
			f += x
			if math.IsInf(f, 0) {
				return nil, false // badarith: the general path reports it
			}
			continue
		}
		x, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, false
		}
		if isFloat {
			f += float64(x)
			continue
		}
		s := n + x
		if (s > n) != (x > 0) {
			return nil, false
		}
		n = s
	}
	if isFloat {
		return appendFloat(nil, f), true
	}
	return strconv.AppendInt(nil, n, 10), true
}

func sumTerms(terms []any) (any, error) {
	var acc any = int64(0)
	for _, t := range terms {
		next, err := sumValues(t, acc)
		var se *sumError
		if errors.As(err, &se) {
			if se.obj != nil {
				return se.obj, nil
			}
			return object{
				{"error", binary("builtin_reduce_error")},
				{"reason", binary(sumReason)},
				{"caused_by", se.cause},
			}, nil
		}
		if err != nil {
			return nil, err
		}
		acc = next
	}
	return acc, nil
}

func sumValues(v, acc any) (any, error) {
	vl, vIsList := v.([]any)
	al, aIsList := acc.([]any)
	switch {
	case isNumber(v) && isNumber(acc):
		return addOrCrash(acc, v)
	case vIsList && aIsList:
		return sumArrays(al, vl)
	case isNumber(v) && aIsList:
		return sumArrays(al, []any{v})
	case vIsList && isNumber(acc):
		return sumArrays([]any{acc}, vl)
	}
	if o, ok := v.(object); ok {
		for _, m := range o {
			if m.k == "error" {
				if m.v == binary("builtin_reduce_error") {
					return nil, &sumError{obj: o}
				}
				return nil, crash("case_clause", pair(m))
			}
		}
		switch a := acc.(type) {
		case int64:
			if a == 0 {
				return o, nil
			}
		case object:
			return sumObjects(sortProps(o), sortProps(a))
		}
		return nil, crash("case_clause", acc)
	}
	return nil, &sumError{cause: v}
}

type pair prop

func sumObjects(a, b object) (object, error) {
	out := make(object, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch c := strings.Compare(string(a[0].k), string(b[0].k)); {
		case c == 0:
			s, err := sumValues(a[0].v, b[0].v)
			if err != nil {
				return nil, err
			}
			out = append(out, prop{a[0].k, s})
			a, b = a[1:], b[1:]
		case c < 0:
			out = append(out, a[0])
			a = a[1:]
		default:
			out = append(out, b[0])
			b = b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...), nil
}

// sumArrays is sum_arrays(Acc, Values): element-wise, the longer one's
// tail kept; a non-number in either reports the rest of the first.
func sumArrays(xs, ys []any) ([]any, error) {
	out := make([]any, 0, max(len(xs), len(ys)))
	for len(xs) > 0 && len(ys) > 0 {
		if !isNumber(xs[0]) || !isNumber(ys[0]) {
			return nil, &sumError{cause: xs}
		}
		s, err := addOrCrash(xs[0], ys[0])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		xs, ys = xs[1:], ys[1:]
	}
	out = append(out, xs...)
	return append(out, ys...), nil
}

func addOrCrash(a, b any) (any, error) {
	s, err := add(a, b)
	if err != nil {
		return nil, crash("unknown_error", atom("badarith"))
	}
	return s, nil
}

// _count

type count struct{}

func (count) Reduce(keys, values [][]byte) ([]byte, error) {
	return fmt.Appendf(nil, "%d", len(values)), nil
}

func (c count) ReduceIDs(keys, _, values [][]byte) ([]byte, error) { return c.Reduce(keys, values) }

// Rereduce sums the counts as _sum does (builtin_sum_rows).
func (count) Rereduce(reductions [][]byte) ([]byte, error) {
	var n int64
	fast := true
	for _, r := range reductions {
		v, err := parse(r)
		if err != nil {
			return nil, fmt.Errorf("reduce: _count reduction %.40q: %w", r, err)
		}
		i, ok := v.(int64)
		if !ok || n+i < n {
			fast = false
			break
		}
		n += i
	}
	if fast {
		return fmt.Appendf(nil, "%d", n), nil
	}
	terms, err := parseAll(reductions)
	if err != nil {
		return nil, err
	}
	acc, err := sumTerms(terms) // no reduce_limit here, as in CouchDB
	if err != nil {
		return nil, err
	}
	return encode(nil, acc), nil
}

func (count) Final(r []byte) ([]byte, error) { return r, nil }

// _stats

type statsFn struct{}

func statError(v any) error {
	const prefix = "The _stats function requires that map values be numbers or arrays of numbers, not '"
	return &Error{Name: "invalid_value", Reason: prefix + string(formatPretty(nil, v, len(prefix))) + "'"}
}

func (statsFn) Reduce(keys, values [][]byte) ([]byte, error) { return statsRows(values) }

func (s statsFn) ReduceIDs(keys, _, values [][]byte) ([]byte, error) { return s.Reduce(keys, values) }

func (statsFn) Rereduce(reductions [][]byte) ([]byte, error) { return statsRows(reductions) }

func (statsFn) Final(r []byte) ([]byte, error) { return r, nil }

// statsRows is builtin_stats (reduce and rereduce alike: a reduction is
// a packed {"sum",...} object, which stat_values unpacks as it would a
// pre-aggregated map value).
func statsRows(vals [][]byte) ([]byte, error) {
	terms, err := parseAll(vals)
	if err != nil {
		return nil, err
	}
	if len(terms) == 0 {
		return []byte(`{"sum":0,"count":0,"min":0,"max":0,"sumsqr":0}`), nil
	}
	acc, err := initialStats(terms[0])
	if err != nil {
		return nil, err
	}
	for _, t := range terms[1:] {
		if acc, err = statValues(t, acc); err != nil {
			return nil, err
		}
	}
	return encode(nil, packAll(acc)), nil
}

func initialStats(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			s, err := initialStats(x)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case object:
		return unpackStats(v)
	}
	if isNumber(v) {
		return numStats(v)
	}
	return nil, &Error{Name: "invalid_value", Reason: "non-numeric _stats input: " + string(formatP(nil, v, true))}
}

func numStats(v any) (any, error) {
	sq, err := mul(v, v)
	if err != nil {
		return nil, crash("unknown_error", atom("badarith"))
	}
	return stats{v, int64(1), v, v, sq}, nil
}

func statValues(v, acc any) (any, error) {
	vl, vIsList := v.([]any)
	al, aIsList := acc.([]any)
	if vIsList && aIsList {
		if len(vl) != len(al) {
			return nil, crash("unknown_error", atom("function_clause")) // lists:zipwith of unequal lengths
		}
		out := make([]any, len(vl))
		for i := range vl {
			s, err := statValues(vl[i], al[i])
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	if o, ok := v.(object); ok {
		u, err := unpackStats(o)
		if err != nil {
			return nil, err
		}
		return statValues(u, acc)
	}
	if isNumber(v) {
		s, err := numStats(v)
		if err != nil {
			return nil, err
		}
		return statValues(s, acc)
	}
	if isNumber(acc) {
		s, err := numStats(acc)
		if err != nil {
			return nil, err
		}
		return statValues(v, s)
	}
	x, ok1 := v.(stats)
	y, ok2 := acc.(stats)
	if !ok1 || !ok2 {
		return nil, statError(v)
	}
	var out stats
	var err error
	if out[0], err = add(x[0], y[0]); err != nil {
		return nil, crash("unknown_error", atom("badarith"))
	}
	if out[1], err = add(x[1], y[1]); err != nil {
		return nil, crash("unknown_error", atom("badarith"))
	}
	out[2], out[3] = x[2], x[3] // min and max keep the first of equals, as erlang:min/max
	if cmpNum(x[2], y[2]) > 0 {
		out[2] = y[2]
	}
	if cmpNum(x[3], y[3]) < 0 {
		out[3] = y[3]
	}
	if out[4], err = add(x[4], y[4]); err != nil {
		return nil, crash("unknown_error", atom("badarith"))
	}
	return out, nil
}

var statFields = [5]binary{"sum", "count", "min", "max", "sumsqr"}

func unpackStats(o object) (stats, error) {
	var s stats
	for i, f := range statFields {
		var v any
		found := false
		for _, m := range o {
			if m.k == f {
				v, found = m.v, true
				break
			}
		}
		switch {
		case !found:
			return s, &Error{Name: "invalid_value", Reason: fmt.Sprintf("user _stats input missing required field %s (%s)", f, formatP(nil, o.list(), false))}
		case !isNumber(v):
			return s, &Error{Name: "invalid_value", Reason: fmt.Sprintf("non-numeric _stats input received for %s: %s", f, formatP(nil, v, true))}
		}
		s[i] = v
	}
	return s, nil
}

// list is the object's Props as Erlang prints them (a list of tuples).
func (o object) list() any { return propList(o) }

type propList object

func (s stats) pack() object {
	o := make(object, 5)
	for i, f := range statFields {
		o[i] = prop{f, s[i]}
	}
	return o
}

func packAll(v any) any {
	switch v := v.(type) {
	case stats:
		return v.pack()
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = packAll(x)
		}
		return out
	}
	return v
}

// _approx_count_distinct

type approx struct{}

// precision is couch_hyper:new(11)'s.
const precision = 11

func newSketch() *hyperloglog.Sketch {
	sk, err := hyperloglog.NewSketch(precision, true)
	if err != nil {
		panic(err) // a constant precision in range
	}
	return sk
}

// Reduce inserts each key as its exact term: CouchDB hashes
// term_to_binary(Key), so 1 and 1.0 are distinct keys, and so are
// objects with their members in another order.
func (approx) Reduce(keys, values [][]byte) ([]byte, error) {
	sk := newSketch()
	var buf []byte
	for i, k := range keys {
		t, err := parse(k)
		if err != nil {
			return nil, fmt.Errorf("reduce: key %d %.40q: %w", i, k, err)
		}
		buf = canonical(buf[:0], t)
		sk.Insert(buf)
	}
	return marshalSketch(sk)
}

func (a approx) ReduceIDs(keys, _, values [][]byte) ([]byte, error) { return a.Reduce(keys, values) }

func (approx) Rereduce(reductions [][]byte) ([]byte, error) {
	sk := newSketch()
	for _, r := range reductions {
		o, err := unmarshalSketch(r)
		if err != nil {
			return nil, err
		}
		if err := sk.Merge(o); err != nil {
			return nil, fmt.Errorf("reduce: merging sketches: %w", err)
		}
	}
	return marshalSketch(sk)
}

// Final is the estimate, rounded as CouchDB's round(couch_hyper:card()).
func (approx) Final(r []byte) ([]byte, error) {
	sk, err := unmarshalSketch(r)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%d", sk.Estimate()), nil
}

type sketchJSON struct {
	HLL []byte `json:"hll"`
}

func marshalSketch(sk *hyperloglog.Sketch) ([]byte, error) {
	b, err := sk.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("reduce: %w", err)
	}
	return fmt.Appendf(nil, `{"hll":"%s"}`, base64.StdEncoding.EncodeToString(b)), nil
}

func unmarshalSketch(r []byte) (*hyperloglog.Sketch, error) {
	var j sketchJSON
	if err := json.Unmarshal(r, &j); err != nil || j.HLL == nil {
		return nil, fmt.Errorf("reduce: not an _approx_count_distinct reduction: %.40q", r)
	}
	sk := newSketch()
	if err := sk.UnmarshalBinary(j.HLL); err != nil {
		return nil, fmt.Errorf("reduce: _approx_count_distinct reduction: %w", err)
	}
	return sk, nil
}

// canonical is a byte form of a term that is equal for equal terms
// (=:=) only: integers and doubles apart, strings by their bytes.
func canonical(dst []byte, v any) []byte {
	switch v := v.(type) {
	case float64:
		dst = append(dst, 'f')
		return fmt.Appendf(dst, "%x", math.Float64bits(v))
	case int64, *big.Int:
		return fmt.Appendf(append(dst, 'i'), "%d", v)
	}
	return encode(append(dst, 'j'), v)
}
