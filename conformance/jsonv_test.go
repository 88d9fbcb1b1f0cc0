package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// JSON values are decoded into: nil, bool, json.Number, string, []any and *object.
// object keeps key order (for stable diffs and for re-encoding request bodies as
// recorded) and remembers duplicate keys, which a correct server never sends.
type object struct {
	keys []string
	vals map[string]any
	dups []string
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// decodeJSON decodes exactly one JSON value (surrounding whitespace allowed).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty or truncated JSON")
		}
		return nil, err
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, fmt.Errorf("after the JSON value: %v", err)
		}
		return nil, fmt.Errorf("trailing data after the JSON value: %v", tok)
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool, nil
	}
	switch d {
	case '{':
		o := newObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key %v is not a string", kt)
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			if _, seen := o.vals[k]; seen {
				o.dups = append(o.dups, k)
			}
			o.set(k, v)
		}
		if _, err := dec.Token(); err != nil { // '}'
			return nil, err
		}
		return o, nil
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// encodeJSON writes v as compact JSON, object keys in their recorded order,
// without HTML escaping.
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	appendJSON(&b, v)
	return b.Bytes()
}

func appendJSON(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(string(v))
	case string:
		b.WriteString(jsonString(v))
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			appendJSON(b, x)
		}
		b.WriteByte(']')
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k))
			b.WriteByte(':')
			appendJSON(b, v.vals[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("conformance: cannot encode %T", v))
	}
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// render shows a value in a diff, shortened.
func render(v any) string { return clip(string(encodeJSON(v)), 300) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d bytes)", len(s))
}

// numEqual compares two JSON numbers by value (1 == 1.0 == 1e0).
func numEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *object:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// ptrJoin appends one reference token to a JSON pointer (RFC 6901 escaping).
func ptrJoin(ptr string, tok any) string {
	s := fmt.Sprint(tok)
	s = strings.ReplaceAll(s, "~", "~0")
	s = strings.ReplaceAll(s, "/", "~1")
	return ptr + "/" + s
}
