package views

import (
	"encoding/json"
	"sort"
	"strings"
)

// CheckFields refuses a design doc whose function members have the wrong
// JSON types, as CouchDB 3.5 refuses it on write (couch_mrview's field
// checks, in their order: filters, language, lists, options,
// options.partitioned, rewrites, shows, updates, validate_doc_update,
// views, then each view's map and reduce). A null is refused as any other
// wrong type. CheckFields is for writes only: ParseDesign, which also
// reads what is stored, stays lenient (a null language, views or reduce
// is taken as absent), so that a design doc stored before these checks
// (or replicated in) still has its views read. Checked against CouchDB
// 3.5.2, 2026-12-03.
func CheckFields(body []byte) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil // ParseDesign answers a body that is no object
	}
	funcs := func(name string) error {
		v, ok := m[name]
		if !ok {
			return nil
		}
		var members map[string]json.RawMessage
		if !isObject(v) || json.Unmarshal(v, &members) != nil {
			return &DesignError{"invalid_design_doc", "`" + name + "` field must have object type"}
		}
		// CouchDB walks the members in its map's order; settee sorts,
		// so that of several bad members the same one is named each time
		keys := make([]string, 0, len(members))
		for k := range members {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if t := kind(members[k]); t != "string" && t != "object" {
				return &DesignError{"invalid_design_doc", "`" + name + "." + k + "` field must have string or object type"}
			}
		}
		return nil
	}
	typed := func(name, what string, ok func(string) bool, nullOK bool) error {
		v, present := m[name]
		if !present {
			return nil
		}
		t := kind(v)
		if ok(t) || (nullOK && t == "null") {
			return nil
		}
		return &DesignError{"invalid_design_doc", "`" + name + "` field must have " + what + " type"}
	}
	is := func(want ...string) func(string) bool {
		return func(t string) bool {
			for _, w := range want {
				if t == w {
					return true
				}
			}
			return false
		}
	}
	if err := funcs("filters"); err != nil {
		return err
	}
	if err := typed("language", "string", is("string"), false); err != nil {
		return err
	}
	if err := funcs("lists"); err != nil {
		return err
	}
	if err := typed("options", "object", is("object"), false); err != nil {
		return err
	}
	if o, ok := m["options"]; ok && isObject(o) {
		var opts map[string]json.RawMessage
		if json.Unmarshal(o, &opts) == nil {
			if p, ok := opts["partitioned"]; ok && kind(p) != "boolean" {
				return &DesignError{"invalid_design_doc", "`options.partitioned` field must have boolean type"}
			}
		}
	}
	if err := typed("rewrites", "array or string", is("array", "string"), false); err != nil {
		return err
	}
	if err := funcs("shows"); err != nil {
		return err
	}
	if err := funcs("updates"); err != nil {
		return err
	}
	if err := typed("validate_doc_update", "string", is("string"), false); err != nil {
		return err
	}
	if err := typed("views", "object", is("object"), false); err != nil {
		return err
	}
	return checkViewFields(m)
}

// checkViewFields is the rest of CouchDB's type pass over views: lib an
// object, then each view (in name order, as CouchDB walks its small maps)
// an object, map a string (an object in a "query" design doc), reduce a
// string. A view without map, or with an empty function, is refused
// later, by ParseDesign, as CouchDB does after all the types pass.
func checkViewFields(m map[string]json.RawMessage) error {
	v, ok := m["views"]
	if !ok {
		return nil
	}
	var views map[string]json.RawMessage
	if json.Unmarshal(v, &views) != nil {
		return nil
	}
	mapType := "string"
	if l, ok := m["language"]; ok && strings.TrimSpace(string(l)) == `"query"` {
		mapType = "object"
	}
	// CouchDB checks views.lib before the views themselves
	if l, ok := views["lib"]; ok && kind(l) != "object" {
		return &DesignError{"invalid_design_doc", "`views.lib` field must have object type"}
	}
	names := make([]string, 0, len(views))
	for k := range views {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if kind(views[name]) != "object" {
			return &DesignError{"invalid_design_doc", "`views." + name + "` field must have object type"}
		}
		if name == "lib" {
			continue
		}
		var fns map[string]json.RawMessage
		if json.Unmarshal(views[name], &fns) != nil {
			continue
		}
		if f, ok := fns["map"]; ok && kind(f) != mapType {
			return &DesignError{"invalid_design_doc", "`views." + name + ".map` field must have " + mapType + " type"}
		}
		if f, ok := fns["reduce"]; ok && kind(f) != "string" {
			return &DesignError{"invalid_design_doc", "`views." + name + ".reduce` field must have string type"}
		}
	}
	return nil
}

// kind is the JSON type of a raw value: object, array, string, number,
// boolean or null.
func kind(b json.RawMessage) string {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return "object"
		case '[':
			return "array"
		case '"':
			return "string"
		case 't', 'f':
			return "boolean"
		case 'n':
			return "null"
		}
		return "number"
	}
	return "null"
}
