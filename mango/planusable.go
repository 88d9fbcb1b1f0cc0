package mango

import (
	"sort"
	"strings"
)

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
