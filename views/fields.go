package views

import (
	"encoding/json"
	"sort"
)

// CheckFields refuses a design doc whose function members have the wrong
// JSON types, as CouchDB 3.5 refuses it on write (couch_mrview's field
// checks, in their order: filters, language, lists, options,
// options.partitioned, rewrites, shows, updates, validate_doc_update,
// views). ParseDesign checks views' contents; CheckFields is for writes
// only, so that a design doc stored before it (or replicated in) still
// has its views read. Where settee already took a null language, views
// or options as absent it goes on doing so; every other null is refused,
// as CouchDB refuses it. Checked against CouchDB 3.5.2, 2026-12-03.
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
	if err := typed("language", "string", is("string"), true); err != nil {
		return err
	}
	if err := funcs("lists"); err != nil {
		return err
	}
	if err := typed("options", "object", is("object"), true); err != nil {
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
	return typed("views", "object", is("object"), true)
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
