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
	"fmt"
	"sort"
	"strings"
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
