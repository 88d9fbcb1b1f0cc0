package mango

import (
	"strconv"
)

// Fields is mango_fields:extract, the "fields" option of _find: a new
// document with only the named fields of doc, dotted paths reaching
// into objects and, by a numeric part, into arrays ("a.0.b"); what is
// built follows the path with objects only, so {"a":[10,{"x":2}]} with
// "a.1.x" gives {"a":{"1":{"x":2}}}. Fields are set in the order given, a
// later one replacing or adding into an earlier one's value; a field not
// in doc is left out; _id and _rev are fields like others (only there
// when asked for). An empty or nil fields is the whole document.
//
// doc may be decoded by encoding/json or be an Object; the result is an
// Object (in the fields' order) whose values are doc's own.
//
// One difference: when an earlier field copied a whole array and a later
// one sets an element of it by position, CouchDB's set_field replaces
// the element before that position (and crashes, a 500, for position
// 0); here the later field is then left out.
func Fields(doc any, fields []string) any {
	if len(fields) == 0 {
		return doc
	}
	out := Object{}
	for _, f := range fields {
		path := splitField(f)
		v, ok := getField(doc, path)
		if !ok {
			continue
		}
		if n, ok := setField(out, path, v); ok {
			out = n.(Object)
		}
	}
	return out
}

// getField is mango_doc:get_field: the value at path, or false for
// not_found and bad_path alike.
func getField(v any, path []string) (any, bool) {
	for _, p := range path {
		switch d := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = d[p]; !ok {
				return nil, false
			}
		case Object:
			var ok bool
			if v, ok = d.Get(p); !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(d) || !isDecimal(p) {
				return nil, false
			}
			v = d[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// isDecimal is list_to_integer's syntax: an optional sign and digits.
func isDecimal(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// setField is mango_doc:set_field on the document being built.
func setField(into any, path []string, v any) (any, bool) {
	if len(path) == 0 {
		return v, true
	}
	switch d := into.(type) {
	case Object:
		name := path[0]
		cur, found := d.Get(name)
		if !found {
			cur = Object{}
		}
		nv, ok := setField(cur, path[1:], v)
		if !ok {
			return nil, false
		}
		out := make(Object, 0, len(d)+1)
		replaced := false
		for _, m := range d {
			if m.Key == name && !replaced {
				out = append(out, Member{name, nv})
				replaced = true
				continue
			}
			out = append(out, m)
		}
		if !replaced {
			out = append(out, Member{name, nv})
		}
		return out, true
	}
	return nil, false
}

// FieldsError is the error _find answers for a field with an empty part
// ("a..b", ".a", "a.", ""): mango_util:parse_field refuses it with a
// 400 invalid_field_name. CouchDB finds out only when it projects a
// document (a _find with no results answers 200), so the caller asks
// this before its first document, not when the request is parsed.
func FieldsError(fields []string) error {
	for _, f := range fields {
		for _, p := range splitField(f) {
			if p == "" {
				return badRequest("invalid_field_name", "Invalid field name: %s", f)
			}
		}
	}
	return nil
}
