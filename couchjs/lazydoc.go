package couchjs

import (
	"bytes"
	"strconv"

	"github.com/dop251/goja"
	"github.com/settee/settee/docjson"
)

// A lazy document: a read-only goja object over JSON bytes that decodes a
// member when it is first read and keeps the decoded value, so a map that
// reads two fields of a 15 KB doc pays for finding and decoding those two
// (BenchmarkDocAccess compares it with JSON.parse in the runtime and with
// a Go map through ToValue). Members are found by scanning forward from
// where the last look-up stopped; Keys scans to the end. Objects and
// arrays inside are lazy too, and every value is decoded once, so
// doc.a === doc.a holds for objects as it does for parsed JSON.
//
// Writes are refused (Set, Delete and SetLen answer false: ignored in
// sloppy code, a TypeError in strict code and for push): couchjs deep-
// freezes the doc before mapping. The bytes must be valid JSON (a stored
// body); docjson's trusting walker delimits them, and a value it cannot
// delimit ends the object or array there instead of failing.
//
// Duplicate member names: the first wins (JSON.parse takes the last);
// stored docs have none.
//
// The bytes belong to the call: a worker reads a batch's docs where the
// parent put them (a region it reuses for the next call, maybe another
// database's). When the call ends its source is detached, and a lazy
// value a function kept past it (in a global) answers only what it had
// decoded by then: never bytes that are no longer its doc's.
type lazyObj struct {
	src  *lazySrc
	rt   *goja.Runtime
	b    []byte
	pos  int // where the next unscanned member starts; -1 when all are
	keys []string
	raw  [][]byte
	vals []goja.Value
	idx  map[string]int // built once there are many keys
}

type lazyArr struct {
	src  *lazySrc
	rt   *goja.Runtime
	raw  [][]byte
	vals []goja.Value
}

// lazySrc is the bytes lazy values read, live for one call.
type lazySrc struct{ detached bool }

// newLazy returns the JS value of the JSON value b (whole, no surrounding
// space), read from src.
func newLazy(rt *goja.Runtime, src *lazySrc, b []byte) goja.Value {
	if len(b) == 0 || src.detached {
		return goja.Null()
	}
	switch b[0] {
	case '{':
		return rt.NewDynamicObject(&lazyObj{src: src, rt: rt, b: b, pos: 1})
	case '[':
		return rt.NewDynamicArray(newLazyArr(rt, src, b))
	case '"':
		if bytes.IndexByte(b, '\\') < 0 {
			return rt.ToValue(string(b[1 : len(b)-1]))
		}
		s, err := docjson.Unquote(b)
		if err != nil {
			return goja.Undefined()
		}
		return rt.ToValue(s)
	case 't':
		return rt.ToValue(true)
	case 'f':
		return rt.ToValue(false)
	case 'n':
		return goja.Null()
	}
	return numberValue(rt, b)
}

func numberValue(rt *goja.Runtime, b []byte) goja.Value {
	if !bytes.ContainsAny(b, ".eE") && len(b) < 16 {
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return rt.ToValue(n)
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && f == 0 {
		return goja.NaN()
	}
	return rt.ToValue(f)
}

func newLazyArr(rt *goja.Runtime, src *lazySrc, b []byte) *lazyArr {
	a := &lazyArr{src: src, rt: rt}
	i := docjson.SkipWS(b, 1)
	if i < len(b) && b[i] == ']' {
		return a
	}
	for i < len(b) {
		j := docjson.SkipValue(b, i)
		if j < 0 {
			break
		}
		a.raw = append(a.raw, b[i:j])
		i = docjson.SkipWS(b, j)
		if i >= len(b) || b[i] != ',' {
			break
		}
		i = docjson.SkipWS(b, i+1)
	}
	a.vals = make([]goja.Value, len(a.raw))
	return a
}

// scan reads members up to and including one named key (all when key is
// ""), and returns its index or -1.
func (o *lazyObj) scan(key string) int {
	if o.src.detached {
		o.pos, o.b = -1, nil
		return -1
	}
	b := o.b
	for o.pos >= 0 {
		i := docjson.SkipWS(b, o.pos)
		if i >= len(b) || b[i] != '"' {
			o.pos = -1
			break
		}
		ke := docjson.SkipString(b, i)
		if ke < 0 {
			o.pos = -1
			break
		}
		var k string
		if bytes.IndexByte(b[i:ke], '\\') < 0 {
			k = string(b[i+1 : ke-1])
		} else if s, err := docjson.Unquote(b[i:ke]); err == nil {
			k = s
		} else {
			o.pos = -1
			break
		}
		c := docjson.SkipWS(b, ke)
		if c >= len(b) || b[c] != ':' {
			o.pos = -1
			break
		}
		vs := docjson.SkipWS(b, c+1)
		ve := docjson.SkipValue(b, vs)
		if ve < 0 {
			o.pos = -1
			break
		}
		n := docjson.SkipWS(b, ve)
		if n < len(b) && b[n] == ',' {
			o.pos = n + 1
		} else {
			o.pos = -1
		}
		if o.find(k) >= 0 {
			continue // a duplicate: the first wins
		}
		o.keys = append(o.keys, k)
		o.raw = append(o.raw, b[vs:ve])
		o.vals = append(o.vals, nil)
		if o.idx != nil {
			o.idx[k] = len(o.keys) - 1
		} else if len(o.keys) > 16 {
			o.idx = make(map[string]int, 2*len(o.keys))
			for j, kk := range o.keys {
				o.idx[kk] = j
			}
		}
		if key != "" && k == key {
			return len(o.keys) - 1
		}
	}
	return -1
}

func (o *lazyObj) find(key string) int {
	if o.idx != nil {
		if i, ok := o.idx[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range o.keys {
		if k == key {
			return i
		}
	}
	return -1
}

func (o *lazyObj) lookup(key string) int {
	if i := o.find(key); i >= 0 || o.pos < 0 {
		return i
	}
	if key == "" {
		o.scan("")
		return o.find("")
	}
	return o.scan(key)
}

func (o *lazyObj) Get(key string) goja.Value {
	i := o.lookup(key)
	if i < 0 {
		return nil
	}
	if o.vals[i] == nil {
		if o.src.detached {
			return nil
		}
		o.vals[i] = newLazy(o.rt, o.src, o.raw[i])
	}
	return o.vals[i]
}

func (o *lazyObj) Set(string, goja.Value) bool { return false }
func (o *lazyObj) Has(key string) bool         { return o.lookup(key) >= 0 }
func (o *lazyObj) Delete(key string) bool      { return o.lookup(key) < 0 }
func (o *lazyObj) Keys() []string {
	if o.pos >= 0 {
		o.scan("")
	}
	return o.keys
}

func (a *lazyArr) Len() int { return len(a.raw) }
func (a *lazyArr) Get(i int) goja.Value {
	if i < 0 || i >= len(a.raw) {
		return nil
	}
	if a.vals[i] == nil {
		if a.src.detached {
			return nil
		}
		a.vals[i] = newLazy(a.rt, a.src, a.raw[i])
	}
	return a.vals[i]
}
func (a *lazyArr) Set(int, goja.Value) bool { return false }
func (a *lazyArr) SetLen(n int) bool        { return n == len(a.raw) }
