package mango

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/settee/settee/collate"
)

// KeyRange is one range of index keys to read, as CouchDB's mrargs name
// it: from StartKey to EndKey in the direction of the read (Descending
// reads from the high key down, so StartKey is then the higher one), the
// end included when InclusiveEnd. For a json index the keys are arrays,
// the values of the index's fields in order; for _all_docs they are doc
// ids. Values are decoded JSON (as the selector gave them), except the
// maxima MaxJSON and MaxID, which stand for CouchDB's sentinels. There is
// no minimum sentinel, as in CouchDB: an open start is a shorter key (the
// start key [] is before every array, [1] before every [1, ...]), and an
// open start on _all_docs is "" (below an _id bound) or null (no _id
// bound: CouchDB's catch-all range {$gt: null}), both before every id.
type KeyRange struct {
	StartKey     any
	EndKey       any
	InclusiveEnd bool
	Descending   bool
}

// Sentinel is a bound of CouchDB's that no JSON value equals. It is a Go
// value in a KeyRange so that the caller can tell it from data; encoded as
// JSON it is the nearest JSON value that collates where it does, so that a
// caller that collates keys as JSON gets CouchDB's order.
type Sentinel int

const (
	// MaxJSON is CouchDB's ?MAX_JSON_OBJ ({<<255,255,255,255>>}), which
	// couch_ejson_compare sorts after every JSON value: the end of an open
	// range on a json index. As JSON it is {"\uffff\uffff\uffff\uffff":{}},
	// an object (the highest type) whose key collates after every string
	// that does not itself start with four U+FFFF (U+FFFF has the highest
	// weight in the root collation, and in package collate).
	MaxJSON Sentinel = iota + 1
	// MaxID is the <<255>> that ends an open range of _all_docs, whose ids
	// compare as raw bytes: no UTF-8 string reaches byte 255. As JSON it
	// is "\U0010FFFF", the greatest UTF-8 sequence.
	MaxID
)

// MarshalJSON encodes the sentinel as the JSON value that collates as it.
func (s Sentinel) MarshalJSON() ([]byte, error) {
	switch s {
	case MaxJSON:
		return []byte(`{"\uffff\uffff\uffff\uffff":{}}`), nil
	case MaxID:
		return []byte(`"\udbff\udfff"`), nil
	}
	return nil, fmt.Errorf("mango: unknown sentinel %d", int(s))
}

// Comparison operators of a range's bounds.
const (
	opGt = iota + 1
	opGte
	opEq
	opLt
	opLte
)

// bound is a value of a range's bound; minVal and maxVal are
// mango_json's min and max, before and after every JSON value.
type bound struct{ v any }

var (
	minVal any = bound{"min"}
	maxVal any = bound{"max"}
)

// keyRange is mango_idx_view's range of one field: {LCmp, Low, HCmp,
// High}, or empty.
type keyRange struct {
	empty      bool
	lcmp, hcmp int
	low, high  any
}

type fieldRange struct {
	field string
	r     keyRange
}

// indexableFields is mango_idx_view:indexable_fields: the fields whose
// conditions, through $and, an index range can narrow, sorted.
func indexableFields(sel any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(s any) {
		for _, c := range clauses(s) {
			k, v, _ := planSingle(c)
			if k == "$and" {
				if args, ok := v.([]any); ok {
					for _, a := range args {
						walk(a)
					}
				}
				continue
			}
			if strings.HasPrefix(k, "$") {
				continue
			}
			switch op, _, _ := planSingle(v); op {
			case "$lt", "$lte", "$eq", "$gt", "$gte", "$beginsWith", "$exists":
				seen[k] = true
			}
		}
	}
	walk(sel)
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// fieldRanges is mango_idx_view:field_ranges: each indexable field's
// range; at the first empty one, only that one.
func fieldRanges(sel any) []fieldRange {
	var out []fieldRange
	for _, f := range indexableFields(sel) {
		r := rangeOf(sel, f, keyRange{lcmp: opGt, low: minVal, hcmp: opLt, high: maxVal})
		if r.empty {
			return []fieldRange{{f, r}}
		}
		out = append(out, fieldRange{f, r})
	}
	return out
}

// rangeOf narrows r by the conditions on field, through $and.
func rangeOf(sel any, field string, r keyRange) keyRange {
	for _, c := range clauses(sel) {
		if r.empty {
			return r
		}
		k, v, _ := planSingle(c)
		switch {
		case k == "$and":
			if args, ok := v.([]any); ok {
				for _, a := range args {
					r = rangeOf(a, field, r)
					if r.empty {
						return r
					}
				}
			}
		case k == field:
			r = narrow(v, r)
		}
	}
	return r
}

// position of a value against a range: min (below Low), low (at Low), mid,
// high (at High), max (above High).
const (
	posMin = iota
	posLow
	posMid
	posHigh
	posMax
)

func rangePos(low, arg, high any) int {
	switch c := cmpKey(arg, low); {
	case c < 0:
		return posMin
	case c == 0:
		return posLow
	}
	switch c := cmpKey(arg, high); {
	case c < 0:
		return posMid
	case c == 0:
		return posHigh
	}
	return posMax
}

// narrow is mango_idx_view:range/5: a condition ANDed with the range.
func narrow(cond any, r keyRange) keyRange {
	op, arg, ok := planSingle(cond)
	if !ok {
		return r
	}
	emptyR := keyRange{empty: true}
	eq := keyRange{lcmp: opEq, low: arg, hcmp: opEq, high: arg}
	switch op {
	case "$beginsWith":
		s, ok := arg.(string)
		if !ok {
			return r
		}
		r = narrow(map[string]any{"$gte": s}, r)
		if r.empty {
			return r
		}
		return narrow(map[string]any{"$lte": s + "\uffff"}, r)
	case "$lt":
		switch rangePos(r.low, arg, r.high) {
		case posMin, posLow:
			return emptyR
		case posMid, posHigh:
			r.hcmp, r.high = opLt, arg
		}
		return r
	case "$lte":
		switch rangePos(r.low, arg, r.high) {
		case posMin:
			return emptyR
		case posLow:
			if r.lcmp == opGte || r.lcmp == opEq {
				return eq
			}
			return emptyR
		case posMid:
			r.hcmp, r.high = opLte, arg
		}
		return r
	case "$eq":
		switch rangePos(r.low, arg, r.high) {
		case posLow:
			if r.lcmp == opGte || r.lcmp == opEq {
				return eq
			}
			return emptyR
		case posMid:
			return eq
		case posHigh:
			if r.hcmp == opLte || r.hcmp == opEq {
				return eq
			}
			return emptyR
		}
		return emptyR
	case "$gte":
		switch rangePos(r.low, arg, r.high) {
		case posMid:
			r.lcmp, r.low = opGte, arg
		case posHigh:
			if r.hcmp == opLte || r.hcmp == opEq {
				return eq
			}
			return emptyR
		case posMax:
			return emptyR
		}
		return r
	case "$gt":
		switch rangePos(r.low, arg, r.high) {
		case posLow, posMid:
			r.lcmp, r.low = opGt, arg
		case posHigh, posMax:
			return emptyR
		}
		return r
	}
	return r
}

// cmpKey is mango_json:cmp: the sentinels, else CouchDB's view collation.
func cmpKey(a, b any) int {
	ra, rb := sentinelRank(a), sentinelRank(b)
	if ra != 0 || rb != 0 {
		return cmpInt(ra, rb)
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return bytes.Compare(ja, jb)
	}
	return collate.Compare(ja, jb)
}

func sentinelRank(v any) int {
	switch v {
	case minVal:
		return -1
	case maxVal:
		return 1
	}
	return 0
}

func isSpecialVal(v any) bool { return v == minVal || v == maxVal }

// viewStartKey is mango_idx_view:start_key: the low bounds of the prefix
// up to the first open one.
func viewStartKey(prefix []keyRange) []any {
	out := []any{}
	for _, r := range prefix {
		if r.lcmp == opGt && isSpecialVal(r.low) {
			break
		}
		out = append(out, r.low)
	}
	return out
}

// viewEndKey is mango_idx_view:end_key: the high bounds of the prefix up
// to the first open one, closed by MaxJSON (so that the longer keys
// sharing the prefix are in).
func viewEndKey(prefix []keyRange) []any {
	out := []any{}
	for _, r := range prefix {
		if r.hcmp == opLt && isSpecialVal(r.high) {
			break
		}
		out = append(out, r.high)
	}
	return append(out, MaxJSON)
}

// specialStartKey and specialEndKey are mango_idx_special's keys on _id.
func specialStartKey(prefix []keyRange) any {
	r := prefix[0]
	if isSpecialVal(r.low) {
		return ""
	}
	return r.low
}

func specialEndKey(prefix []keyRange) any {
	r := prefix[0]
	if isSpecialVal(r.high) {
		return MaxID
	}
	return r.high
}
