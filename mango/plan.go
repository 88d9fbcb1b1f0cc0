package mango

// The query planner of _find and _explain: which index answers a query,
// and which key range of it to read. It follows CouchDB 3.5's
// mango_cursor (index choice, use_index, allow_fallback, warnings),
// mango_idx (usable indexes), mango_idx_view (field ranges, start and end
// keys, covering) and mango_idx_special (_all_docs), so that settee picks
// the index CouchDB picks and reads the keys CouchDB's mrargs name: a
// client's _explain then reads the same, and a query that needs an index
// in CouchDB needs it in settee.
//
// The planner only narrows: the docs it selects are a superset of the
// answer, which the caller filters with the selector (as CouchDB does on
// every row), so a range may be loose but never too tight. The exceptions
// are CouchDB's, kept so that settee answers as it does: a partial index
// (chosen only by use_index) has rows for the docs its filter keeps; a
// json index has no row for a doc missing one of its fields, which drops
// the docs missing a sort field; an _all_docs bound that is not a string
// sorts before every id (CouchDB compares ids in Erlang term order); and
// an empty $and at the top reads nothing although it matches every doc.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/settee/settee/collate"
)

// PlanIndex is an index as the planner sees it. Type is "json" for a
// view-backed index or "special" for _all_docs (whose Fields are
// ["_id"]). DDoc is the design doc id with its "_design/" prefix ("" for
// _all_docs). Desc says the index was declared descending: CouchDB emits
// the same keys either way and plans alike, so it shows only in the
// index's definition. Partial is the normalized partial_filter_selector,
// or nil. Partitioned says the index is a partition's (its design doc's
// options.partitioned, by default the database's): a partition query uses
// only those, a global query only the others.
type PlanIndex struct {
	DDoc        string
	Name        string
	Type        string
	Fields      []string
	Desc        bool
	Partial     any
	Partitioned bool
}

// SortSpec is one field of a query's sort. CouchDB allows one direction
// for all the fields (mango_sort rejects a mix before planning); the plan
// takes its direction from the first.
type SortSpec struct {
	Field string
	Desc  bool
}

// PlanOptions are the query's options that change the plan or its mrargs.
// AllowFallback is CouchDB's allow_fallback (true by default in a
// request). Fields is the query's fields; nil or empty means all, which
// no index covers. Explain plans for _explain, which unlike _find does
// not fail when no index can serve the sort: it prints index null.
// Partition is the partition of a partition query (/db/_partition/P/_find)
// and PartitionedDB says the database is partitioned (which changes the
// no_usable_index reason). Conflicts, R, Stable and NoUpdate are the
// request options that show in _explain's mrargs (R > 1 makes
// include_docs false, as the coordinator then reads docs at quorum).
type PlanOptions struct {
	AllowFallback bool
	Fields        []string
	Explain       bool
	Partition     string
	PartitionedDB bool
	Conflicts     bool
	R             int
	Stable        bool
	NoUpdate      bool
}

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

// QueryPlan is the planner's answer. Index is the chosen index (nil only
// for Explain when no index is usable, as CouchDB's index null). Ranges
// holds the range to read, or nothing when the selector cannot match (a
// contradiction such as a > 5 and a < 1 on the index's first field, or an
// empty $and/$or/$in/$all at the top): then nothing is read, and CouchDB
// prints start_key and end_key null. Covering says every field the query
// needs is in the index's keys (or is _id), so rows answer it without the
// docs; CouchDB's _explain prints it and reads no docs then. Warnings are
// the texts CouchDB's _find adds to its answer (joined there by "\n"),
// except its execution-time warning about examined docs.
type QueryPlan struct {
	Index    *PlanIndex
	Ranges   []KeyRange
	Covering bool
	Warnings []string

	includeDocs bool
	direction   string
	opts        PlanOptions
}

// PlanError is a query that cannot be planned: Status is the HTTP status
// and Err and Reason are CouchDB's error and reason.
type PlanError struct {
	Status int
	Err    string
	Reason string
}

func (e *PlanError) Error() string { return "mango: " + e.Err + ": " + e.Reason }

// CouchDB's texts (mango_error, mango_cursor).
const (
	reasonMissingSortIndex = "No index exists for this sort, try indexing by the sort fields."
	reasonMissingSortPart  = "No partitioned index exists for this sort, try indexing by the sort fields."
	reasonMissingSortGlob  = "No global index exists for this sort, try indexing by the sort fields."
	reasonNoUseIndex       = "You must specify an index with the `use_index` parameter."
	warnNoIndex            = "No matching index found, create an index to optimize query time."
)

// AllDocsPlanIndex is the special index on _id that every database has.
var AllDocsPlanIndex = PlanIndex{Name: "_all_docs", Type: "special", Fields: []string{"_id"}}

// Plan chooses the index for a query and the range to read, as CouchDB
// does. sel is the normalized selector (mango_selector:normalize form,
// decoded JSON), sort the query's sort, useIndex its use_index ([] or
// [ddoc] or [ddoc, name]; the ddoc with or without "_design/"), indexes
// the database's indexes (_all_docs is added when missing). An error is a
// *PlanError.
func Plan(sel any, sortSpec []SortSpec, useIndex []string, indexes []PlanIndex, opts PlanOptions) (*QueryPlan, error) {
	all := make([]*PlanIndex, 0, len(indexes)+1)
	special := false
	for i := range indexes {
		all = append(all, &indexes[i])
		special = special || indexes[i].Type == "special"
	}
	if !special {
		ad := AllDocsPlanIndex
		all = append(all, &ad)
	}
	sortFields := make([]string, len(sortSpec))
	for i, s := range sortSpec {
		sortFields[i] = s.Field
	}

	// mango_idx:get_usable_indexes: the indexes without a partial filter,
	// plus those use_index names (a partial index is used only when asked
	// for: its rows miss the docs the filter drops), that can serve the
	// selector and the sort.
	var considered []*PlanIndex
	for _, ix := range all {
		if !hasPartial(ix) {
			considered = append(considered, ix)
		}
	}
	considered = append(considered, filterByUseIndex(all, useIndex)...)
	considered = usortIndexes(considered)
	var usable []*PlanIndex
	for _, ix := range considered {
		// filter_partition_indexes: _all_docs serves both kinds.
		if ix.Type != "special" && ix.Partitioned != (opts.Partition != "") {
			continue
		}
		if isUsable(ix, sel, sortFields) {
			usable = append(usable, ix)
		}
	}
	if len(usable) == 0 && !opts.Explain {
		switch {
		case !opts.PartitionedDB:
			return nil, &PlanError{400, "no_usable_index", reasonMissingSortIndex}
		case opts.Partition != "":
			return nil, &PlanError{400, "no_usable_index", reasonMissingSortPart}
		}
		return nil, &PlanError{400, "no_usable_index", reasonMissingSortGlob}
	}

	// mango_cursor:create: use_index narrows the usable indexes; when it
	// names none of them the query falls back to them all, unless
	// allow_fallback is false (CouchDB also fails then without use_index
	// when a single index is usable: the fallback it forbids).
	candidates := filterByUseIndex(usable, useIndex)
	if len(candidates) == 0 {
		if !opts.AllowFallback && !(len(useIndex) == 0 && len(usable) > 1) {
			return nil, invalidIndex(useIndex)
		}
		candidates = usable
	}
	p := &QueryPlan{opts: opts, direction: "fwd", includeDocs: opts.R <= 1}
	if len(candidates) == 0 {
		return p, nil
	}

	// One kind of cursor: json indexes before _all_docs.
	var ofType []*PlanIndex
	for _, kind := range []string{"json", "special"} {
		for _, ix := range candidates {
			if ix.Type == kind {
				ofType = append(ofType, ix)
			}
		}
		if len(ofType) > 0 {
			break
		}
	}

	ranges := fieldRanges(sel)
	if ofType[0].Type == "special" {
		ranges = append(ranges, fieldRange{"_id", keyRange{lcmp: opGt, low: nil, hcmp: opLt, high: maxVal}})
	}
	best, prefix := chooseBestIndex(ofType, ranges)
	chosen := *best
	p.Index = &chosen
	if isNoopSelector(sel) {
		prefix = []keyRange{{empty: true}}
	}
	empty := len(prefix) == 1 && prefix[0].empty
	if !empty {
		r := KeyRange{InclusiveEnd: true}
		if best.Type == "special" {
			r.StartKey, r.EndKey = specialStartKey(prefix), specialEndKey(prefix)
		} else {
			r.StartKey, r.EndKey = viewStartKey(prefix), viewEndKey(prefix)
		}
		if len(sortSpec) > 0 && sortSpec[0].Desc {
			r.StartKey, r.EndKey, r.Descending = r.EndKey, r.StartKey, true
		}
		p.Ranges = []KeyRange{r}
	}
	if len(sortSpec) > 0 && sortSpec[0].Desc {
		p.direction = "rev"
	}
	p.Covering = covers(best, opts.Fields, sel)
	p.includeDocs = p.includeDocs && !p.Covering
	// CouchDB's _find adds its warnings after reading, which it skips for
	// an empty range: no warning then.
	if !empty {
		p.Warnings = append(invalidIndexWarning(best, useIndex), noIndexWarning(best)...)
	}
	return p, nil
}

func hasPartial(ix *PlanIndex) bool {
	if ix.Partial == nil {
		return false
	}
	m, ok := ix.Partial.(map[string]any)
	return !ok || len(m) > 0
}

// usortIndexes orders and deduplicates indexes as Erlang's lists:usort
// orders #idx records: _all_docs (ddoc undefined, an atom) first, then by
// ddoc and name.
func usortIndexes(ixs []*PlanIndex) []*PlanIndex {
	sort.SliceStable(ixs, func(i, j int) bool { return indexLess(ixs[i], ixs[j]) })
	out := ixs[:0]
	for i, ix := range ixs {
		if i > 0 && !indexLess(ixs[i-1], ix) && !indexLess(ix, ixs[i-1]) {
			continue
		}
		out = append(out, ix)
	}
	return out
}

// indexLess is CouchDB's last tie-break, {DbName, DDoc, Name} =< ...: the
// special index has no ddoc (an atom, before any binary).
func indexLess(a, b *PlanIndex) bool {
	as, bs := a.Type == "special", b.Type == "special"
	if as != bs {
		return as
	}
	if a.DDoc != b.DDoc {
		return a.DDoc < b.DDoc
	}
	return a.Name < b.Name
}

func designID(ddoc string) string {
	if strings.HasPrefix(ddoc, "_design/") {
		return ddoc
	}
	return "_design/" + ddoc
}

func ddocName(ddoc string) string { return strings.TrimPrefix(ddoc, "_design/") }

// filterByUseIndex is mango_cursor:maybe_filter_indexes_by_ddoc: the
// indexes use_index names; none when it is empty. The special index has
// no ddoc, so use_index cannot name it.
func filterByUseIndex(ixs []*PlanIndex, useIndex []string) []*PlanIndex {
	if len(useIndex) == 0 || len(useIndex) > 2 {
		return nil
	}
	var out []*PlanIndex
	for _, ix := range ixs {
		if ix.Type == "special" || ix.DDoc != designID(useIndex[0]) {
			continue
		}
		if len(useIndex) == 2 && ix.Name != useIndex[1] {
			continue
		}
		out = append(out, ix)
	}
	return out
}

func invalidIndex(useIndex []string) error {
	switch len(useIndex) {
	case 1:
		return &PlanError{400, "invalid_index", fmt.Sprintf("_design/%s specified by `use_index` could not be found or it is not suitable.", ddocName(useIndex[0]))}
	case 2:
		return &PlanError{400, "invalid_index", fmt.Sprintf("_design/%s, %s specified by `use_index` could not be found or it is not suitable.", ddocName(useIndex[0]), useIndex[1])}
	}
	return &PlanError{400, "invalid_index", reasonNoUseIndex}
}

func invalidIndexWarning(ix *PlanIndex, useIndex []string) []string {
	if len(filterByUseIndex([]*PlanIndex{ix}, useIndex)) > 0 {
		return nil
	}
	switch len(useIndex) {
	case 1:
		return []string{fmt.Sprintf("_design/%s was not used because it does not contain a valid index for this query.", ddocName(useIndex[0]))}
	case 2:
		return []string{fmt.Sprintf("_design/%s, %s was not used because it is not a valid index for this query.", ddocName(useIndex[0]), useIndex[1])}
	}
	return nil
}

func noIndexWarning(ix *PlanIndex) []string {
	if ix.Type == "special" {
		return []string{warnNoIndex}
	}
	return nil
}

// members returns a selector object's members in key order, so that a
// selector that is not in normalized form (several members at one level,
// an implicit $and) is read as its $and.
func members(v any) ([][2]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][2]any, len(keys))
	for i, k := range keys {
		out[i] = [2]any{k, m[k]}
	}
	return out, true
}

// clauses is a selector as a list of single-member objects: the arguments
// of its top $and (when it is only that), else its members.
func clauses(sel any) []any {
	ms, ok := members(sel)
	if !ok {
		return nil
	}
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = map[string]any{m[0].(string): m[1]}
	}
	return out
}

// planSingle returns the one member of a normalized selector object.
func planSingle(v any) (string, any, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, false
	}
	for k, x := range m {
		return k, x, true
	}
	return "", nil, false
}

// isUsable is mango_idx:is_usable, for json indexes and _all_docs: the
// planner does not plan text or nouveau indexes, which CouchDB answers
// with other cursors.
func isUsable(ix *PlanIndex, sel any, sortFields []string) bool {
	if ix.Type != "json" && ix.Type != "special" {
		return false
	}
	if ix.Type == "special" {
		if len(sortFields) == 0 {
			return true
		}
		has := false
		for _, f := range indexableFields(sel) {
			has = has || f == "_id"
		}
		return has && isPrefix(sortFields, []string{"_id"})
	}
	// Every column must be required by the selector (a doc without one
	// of them has no row), except sort fields (CouchDB requires those to
	// exist in the results) and _id and _rev, which every doc has.
	req := map[string]bool{}
	for _, c := range ix.Fields {
		req[c] = true
	}
	for _, s := range sortFields {
		delete(req, s)
	}
	delete(req, "_id")
	delete(req, "_rev")
	var required []string
	for f := range req {
		required = append(required, f)
	}
	sort.Strings(required)
	return len(requiredRemainder(sel, required)) == 0 && !isTextSearch(sel) && canUseSort(ix.Fields, sortFields, sel)
}

func isPrefix(p, of []string) bool {
	if len(p) > len(of) {
		return false
	}
	for i := range p {
		if p[i] != of[i] {
			return false
		}
	}
	return true
}

// requiredRemainder is mango_selector:has_required_fields's walk: the
// required fields the selector does not require to exist. A field
// condition requires its field, except {$exists: false}; $and requires
// what any argument requires, $or what all of them do; other operators
// ($not, $nor) require nothing.
func requiredRemainder(sel any, required []string) []string {
	if len(required) == 0 {
		return nil
	}
	if m, ok := sel.(map[string]any); ok && len(m) == 0 {
		return required
	}
	list, ok := sel.([]any)
	if !ok {
		list = []any{sel}
	}
	for _, el := range list {
		if len(required) == 0 {
			return nil
		}
		for _, c := range clauses(el) {
			k, v, _ := planSingle(c)
			args, isList := v.([]any)
			switch {
			case k == "$and" && isList:
				required = requiredRemainder(args, required)
			case k == "$or" && isList:
				seen := map[string]bool{}
				var rem []string
				for _, a := range args {
					for _, f := range requiredRemainder(a, required) {
						if !seen[f] {
							seen[f] = true
							rem = append(rem, f)
						}
					}
				}
				sort.Strings(rem)
				required = rem
			default:
				if op, arg, ok := planSingle(v); ok && op == "$exists" && arg == false {
					continue
				}
				required = deleteString(required, k)
			}
			if len(required) == 0 {
				return nil
			}
		}
	}
	return required
}

func deleteString(list []string, s string) []string {
	for i, x := range list {
		if x == s {
			return append(append([]string{}, list[:i]...), list[i+1:]...)
		}
	}
	return list
}

// isTextSearch finds a $default (a text index's field) in the selector:
// a json index cannot answer it.
func isTextSearch(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if k == "$default" || isTextSearch(c) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if isTextSearch(c) {
				return true
			}
		}
	}
	return false
}

// isConstantField is mango_selector:is_constant_field: the first
// condition on the field (through $and) is an $eq, so that the index's
// order on it cannot change the sort.
func isConstantField(sel any, field string) bool {
	for _, c := range clauses(sel) {
		k, v, _ := planSingle(c)
		if args, ok := v.([]any); ok && k == "$and" {
			for _, a := range args {
				if isConstantField(a, field) {
					return true
				}
			}
			return false
		}
		if k == field {
			op, _, ok := planSingle(v)
			return ok && op == "$eq"
		}
	}
	return false
}

// canUseSort is mango_idx_view:can_use_sort: the sort fields are a prefix
// of the index's columns once the leading constant columns are skipped.
func canUseSort(cols, sortFields []string, sel any) bool {
	for {
		if len(sortFields) == 0 {
			return true
		}
		if len(cols) == 0 {
			return false
		}
		if cols[0] == sortFields[0] {
			return isPrefix(sortFields, cols)
		}
		if !isConstantField(sel, cols[0]) {
			return false
		}
		cols = cols[1:]
	}
}

// selectorFields is mango_selector:fields: the fields the selector names
// at its top and through the list arguments of its operators.
func selectorFields(sel any) []string {
	var out []string
	for _, c := range clauses(sel) {
		k, v, _ := planSingle(c)
		if args, ok := v.([]any); ok && strings.HasPrefix(k, "$") {
			for _, a := range args {
				out = append(out, selectorFields(a)...)
			}
			continue
		}
		out = append(out, k)
	}
	return out
}

// covers is mango_idx_view:covers over the query's fields and the
// selector's: a json index covers them when all are among its columns
// and _id.
func covers(ix *PlanIndex, fields []string, sel any) bool {
	if ix.Type != "json" || len(fields) == 0 {
		return false
	}
	avail := map[string]bool{"_id": true}
	for _, c := range ix.Fields {
		avail[c] = true
	}
	for _, f := range append(append([]string{}, fields...), selectorFields(sel)...) {
		if !avail[f] {
			return false
		}
	}
	return true
}

// isNoopSelector is mango_cursor:maybe_noop_range's test: an empty $all,
// $and, $or or $in at the top matches nothing, so nothing is read.
func isNoopSelector(sel any) bool {
	k, v, ok := planSingle(sel)
	if !ok {
		return false
	}
	args, isList := v.([]any)
	if !isList || len(args) > 0 {
		return false
	}
	switch k {
	case "$all", "$and", "$or", "$in":
		return true
	}
	return false
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

// chooseBestIndex is mango_cursor_view:composite_indexes and
// choose_best_index: each index's prefix is the ranges of its leading
// columns that the selector narrows; the best has the fewest indexable
// fields outside its prefix, then the fewest columns, then the lowest
// ddoc and name.
func chooseBestIndex(ixs []*PlanIndex, ranges []fieldRange) (*PlanIndex, []keyRange) {
	type scored struct {
		ix     *PlanIndex
		prefix []keyRange
		diff   int
	}
	all := make([]scored, len(ixs))
	for i, ix := range ixs {
		var prefix []keyRange
	cols:
		for _, c := range ix.Fields {
			for _, fr := range ranges {
				if fr.field == c {
					prefix = append(prefix, fr.r)
					continue cols
				}
			}
			break
		}
		all[i] = scored{ix, prefix, len(ranges) - len(prefix)}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.diff != b.diff {
			return a.diff < b.diff
		}
		if len(a.ix.Fields) != len(b.ix.Fields) {
			return len(a.ix.Fields) < len(b.ix.Fields)
		}
		return indexLess(a.ix, b.ix)
	})
	return all[0].ix, all[0].prefix
}

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

// Explain returns the index and mrargs objects of CouchDB's _explain for
// this plan, keys in CouchDB's order (the sentinels printed "<MAX>", as
// CouchDB prints them). With no index, index is null and mrargs nil:
// CouchDB then prints neither mrargs nor covering.
func (p *QueryPlan) Explain() (index, mrargs json.RawMessage) {
	if p.Index == nil {
		return json.RawMessage("null"), nil
	}
	var b bytes.Buffer
	ix := p.Index
	if ix.Type == "special" {
		b.WriteString(`{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}}`)
	} else {
		fmt.Fprintf(&b, `{"ddoc":%s,"name":%s,"type":%s,"partitioned":%t,"def":{"fields":[`, jsonText(ix.DDoc), jsonText(ix.Name), jsonText(ix.Type), ix.Partitioned)
		dir := "asc"
		if ix.Desc {
			dir = "desc"
		}
		for i, f := range ix.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{%s:"%s"}`, jsonText(f), dir)
		}
		b.WriteString("]")
		if hasPartial(ix) {
			fmt.Fprintf(&b, `,"partial_filter_selector":%s`, jsonText(ix.Partial))
		}
		b.WriteString("}}")
	}
	index = json.RawMessage(append([]byte(nil), b.Bytes()...))

	var start, end any
	if len(p.Ranges) > 0 {
		start, end = explainKey(p.Ranges[0].StartKey), explainKey(p.Ranges[0].EndKey)
	}
	partition := "null"
	if p.opts.Partition != "" {
		partition = jsonText(p.opts.Partition)
	}
	conflicts := `"undefined"`
	if p.opts.Conflicts {
		conflicts = "true"
	}
	b.Reset()
	fmt.Fprintf(&b, `{"include_docs":%t,"view_type":"map","reduce":false,"partition":%s,"start_key":%s,"end_key":%s,"direction":"%s","stable":%t,"update":%t,"conflicts":%s}`,
		p.includeDocs, partition, jsonText(start), jsonText(end), p.direction, p.opts.Stable, !p.opts.NoUpdate, conflicts)
	return index, json.RawMessage(b.Bytes())
}

// IncludeDocs is mrargs' include_docs: the docs are read with the rows
// unless the index covers the query or R > 1 asks for quorum reads.
func (p *QueryPlan) IncludeDocs() bool { return p.includeDocs }

// explainKey is mango_cursor_view:maybe_replace_max_json.
func explainKey(k any) any {
	switch x := k.(type) {
	case Sentinel:
		return "<MAX>"
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if e == MaxJSON {
				e = "<MAX>"
			}
			out[i] = e
		}
		return out
	}
	return k
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
