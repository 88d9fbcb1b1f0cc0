package mango

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/settee/settee/docjson"
)

// Reading a stored doc for a query: only the members the query reads are
// decoded; the rest are skipped by the walker, most of a doc's bytes.

// decodeWhole decodes a doc as encoding/json does, numbers as written.
func decodeWhole(raw []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil {
		return nil, false
	}
	return m, true
}

// SelectorFields are the top-level members a query reads from a doc: those
// its selector and its fields name (nil: all of it). A selector on two
// fields of a 15 KB doc then decodes those two, and the walker skips the
// rest (docjson.Object), which is most of an unindexed query's cost.
func SelectorFields(sel any, fields []string) map[string]bool {
	need := map[string]bool{"_id": true}
	var walk func(v any) bool
	walk = func(v any) bool {
		o, ok := v.(Object)
		if !ok {
			return false
		}
		for _, m := range o {
			switch m.Key {
			case "$and", "$or", "$nor":
				list, ok := m.Value.([]any)
				if !ok {
					return false
				}
				for _, e := range list {
					if !walk(e) {
						return false
					}
				}
			case "$not":
				if !walk(m.Value) {
					return false
				}
			default:
				if strings.HasPrefix(m.Key, "$") {
					return false // an operator on the whole doc
				}
				need[FieldPath(m.Key)[0]] = true
			}
		}
		return true
	}
	if !walk(sel) {
		return nil
	}
	for _, f := range fields {
		need[FieldPath(f)[0]] = true
	}
	return need
}

// DecodeFields decodes the members of a doc in need (all when need is
// nil). The walk ends at the last one needed: a member named twice is
// its first, as CouchDB's matcher reads it (couch_util:get_value on
// jiffy's list).
func DecodeFields(raw []byte, need map[string]bool) (map[string]any, bool) {
	if need == nil {
		return decodeWhole(raw)
	}
	m := make(map[string]any, len(need))
	left := len(need)
	const done = -2
	end := docjson.Object(raw, 0, func(key []byte, vs int) int {
		ve := docjson.SkipValue(raw, vs)
		if ve < 0 {
			return -1
		}
		k := string(key[1 : len(key)-1])
		if bytes.IndexByte(key, '\\') >= 0 {
			var err error
			if k, err = docjson.Unquote(key); err != nil {
				return -1
			}
		}
		if !need[k] {
			return ve
		}
		if _, seen := m[k]; seen {
			return ve
		}
		v, ok := scalar(raw[vs:ve])
		if !ok {
			d := json.NewDecoder(bytes.NewReader(raw[vs:ve]))
			d.UseNumber()
			if d.Decode(&v) != nil {
				return -1
			}
		}
		m[k] = v
		if left--; left == 0 {
			return done
		}
		return ve
	})
	if end < 0 && left > 0 {
		return decodeWhole(raw) // what the walker cannot delimit, encoding/json decides
	}
	return m, true
}

// scalar decodes a number, a string without escapes or a literal as
// encoding/json with UseNumber would, without a decoder (most fields a
// selector reads); false for anything else.
func scalar(b []byte) (any, bool) {
	if len(b) == 0 {
		return nil, false
	}
	switch c := b[0]; {
	case c == '"':
		if len(b) < 2 || b[len(b)-1] != '"' || bytes.IndexByte(b[1:len(b)-1], '\\') >= 0 || bytes.IndexByte(b[1:len(b)-1], '"') >= 0 {
			return nil, false
		}
		if !utf8.Valid(b[1 : len(b)-1]) {
			return nil, false
		}
		return string(b[1 : len(b)-1]), true
	case c == '-' || (c >= '0' && c <= '9'):
		for _, d := range b {
			if !(d >= '0' && d <= '9' || d == '-' || d == '+' || d == '.' || d == 'e' || d == 'E') {
				return nil, false
			}
		}
		return json.Number(b), true
	}
	switch string(b) {
	case "true":
		return true, true
	case "false":
		return false, true
	case "null":
		return nil, true
	}
	return nil, false
}
