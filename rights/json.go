// Package rights is settee's one parser for the documents that grant
// rights: _users docs (who may log in, with which roles), _security
// objects (who is a database admin or member), the owner-relevant members
// of _replicator docs, and the server admins of _config.
//
// Every member name is compared exactly (case-sensitively, after JSON
// unescaping: "\u0072oles" is "roles"), and a name that repeats in one
// object keeps its last value, as CouchDB's jiffy decoding (dedupe_keys)
// does before anything reads the document. The same parse serves the
// write rules and the login, so the roles a login derives are the roles
// the write rules saw. Nothing here decodes into a Go struct:
// encoding/json matches struct fields case-insensitively, which let
// "Roles" stand for "roles" on one path and not the other.
package rights

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// ErrInvalid is JSON that does not parse, or a document that is not an
// object.
var ErrInvalid = errors.New("rights: invalid JSON")

// Decode decodes one JSON value: an object as map[string]any (each name
// exact, a repeated name's last value), an array as []any, a number as
// float64 (±Inf beyond its range), strings, booleans and nil.
func Decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, ErrInvalid
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrInvalid // trailing data
	}
	return v, nil
}

// DecodeObject decodes a JSON object (see Decode).
func DecodeObject(b []byte) (map[string]any, error) {
	v, err := Decode(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ErrInvalid
	}
	return m, nil
}

// maxDepth bounds nesting as docjson's scanner does (512) for what the
// gateway accepts: a deeper value is refused, not followed down the stack.
const maxDepth = 512

var errTooDeep = errors.New("rights: JSON nested too deep")

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return decodeFrom(dec, t, depth)
}

// decodeTopObject decodes a JSON object as DecodeObject does, and answers
// beside it the text of each top-level member whose value is a number
// (a repeated name's last value), which a float64 does not keep: CouchDB
// (jiffy) reads 100000000000 as an integer and 1e11 as a float.
func decodeTopObject(b []byte) (map[string]any, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, ErrInvalid
	}
	m, nums := map[string]any{}, map[string]string{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, ErrInvalid
		}
		name, ok := k.(string)
		if !ok {
			return nil, nil, ErrInvalid
		}
		t, err := dec.Token()
		if err != nil {
			return nil, nil, ErrInvalid
		}
		v, err := decodeFrom(dec, t, 1)
		if err != nil {
			return nil, nil, ErrInvalid
		}
		m[name] = v
		if n, ok := t.(json.Number); ok {
			nums[name] = string(n)
		} else {
			delete(nums, name)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, nil, ErrInvalid
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, ErrInvalid // trailing data
	}
	return m, nums, nil
}

// decodeFrom decodes the value that token t begins.
func decodeFrom(dec *json.Decoder, t json.Token, depth int) (any, error) {
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				name, ok := k.(string)
				if !ok {
					return nil, ErrInvalid
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				m[name] = v // the last of a repeated name wins
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return m, nil
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return l, nil
		}
		return nil, ErrInvalid
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, err
		}
		return f, nil
	}
	return t, nil // string, bool, nil
}

// Dedupe rewrites a JSON value as CouchDB stores it: in every object a
// repeated name keeps only its last occurrence, at that occurrence's
// place; everything else (numbers' text, member order) is kept, without
// insignificant whitespace.
func Dedupe(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeOrdered(dec, 0)
	if err != nil {
		return nil, ErrInvalid
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrInvalid
	}
	var out bytes.Buffer
	writeOrdered(&out, v)
	return out.Bytes(), nil
}

type member struct {
	name string
	v    any
}

// ordered is an object whose members keep their order.
type ordered []member

func decodeOrdered(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			var o ordered
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				name, ok := k.(string)
				if !ok {
					return nil, ErrInvalid
				}
				v, err := decodeOrdered(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o = append(o, member{name, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			// the last occurrence of each name stays, where it stands
			last := make(map[string]int, len(o))
			for i, m := range o {
				last[m.name] = i
			}
			kept := o[:0]
			for i, m := range o {
				if last[m.name] == i {
					kept = append(kept, m)
				}
			}
			return kept, nil
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeOrdered(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return nil, ErrInvalid
	}
	return t, nil
}

func writeOrdered(out *bytes.Buffer, v any) {
	switch v := v.(type) {
	case ordered:
		out.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, m.name)
			out.WriteByte(':')
			writeOrdered(out, m.v)
		}
		out.WriteByte('}')
	case []any:
		out.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				out.WriteByte(',')
			}
			writeOrdered(out, e)
		}
		out.WriteByte(']')
	case string:
		writeString(out, v)
	case json.Number:
		out.WriteString(string(v))
	case bool:
		out.WriteString(strconv.FormatBool(v))
	case nil:
		out.WriteString("null")
	}
}

func writeString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out.Truncate(out.Len() - 1) // Encode's newline
}
