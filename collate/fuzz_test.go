package collate

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendKey checks, on any three valid JSON values, that AppendKey
// does not fail, that its bytes order as Compare does, and that Compare
// is antisymmetric and transitive.
func FuzzAppendKey(f *testing.F) {
	seeds := [][3]string{
		{`"a"`, `"A"`, `"aa"`},
		{`1`, `1.0`, `-0`},
		{`["a"]`, `["a",1]`, `["b"]`},
		{`{"a":1}`, `{"a":1,"b":2}`, `{"b":0}`},
		{`12345678901234567891`, `12345678901234567891.0`, `1e400`},
		{`"é"`, `"e\u0301"`, `"a\u0001"`},
		{`null`, `[null,false,true]`, `"\ud83d\ude00"`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		vals := [][]byte{[]byte(a), []byte(b), []byte(c)}
		keys := make([][]byte, 3)
		for i, v := range vals {
			if !json.Valid(v) || depth(v) > maxDepth {
				return
			}
			k, err := AppendKey(nil, v)
			if err != nil {
				t.Fatalf("AppendKey(%q): %v", v, err)
			}
			keys[i] = k
		}
		cmp := func(i, j int) int {
			c := Compare(vals[i], vals[j])
			if e := sign(bytes.Compare(keys[i], keys[j])); e != c {
				t.Fatalf("Compare(%q, %q) = %d, but AppendKey's bytes order %d", vals[i], vals[j], c, e)
			}
			return c
		}
		for i := range 3 {
			if cmp(i, i) != 0 {
				t.Fatalf("Compare(%q, itself) != 0", vals[i])
			}
			for j := range 3 {
				if cmp(i, j) != -cmp(j, i) {
					t.Fatalf("Compare(%q, %q) not antisymmetric", vals[i], vals[j])
				}
				for k := range 3 {
					if cmp(i, j) <= 0 && cmp(j, k) <= 0 && cmp(i, k) > 0 {
						t.Fatalf("not transitive: %q <= %q <= %q but the first > the last", vals[i], vals[j], vals[k])
					}
				}
			}
		}
		// A value is also a prefix-free encoding: a suffix keeps the order.
		for i := range 3 {
			for j := range 3 {
				if c := cmp(i, j); c != 0 && sign(bytes.Compare(append(keys[i], 0xFF), append(keys[j], 0))) != c {
					t.Fatalf("%q and %q: a suffix changes the order", vals[i], vals[j])
				}
			}
		}
	})
}

// depth is the nesting of a valid JSON text.
func depth(b []byte) int {
	d, m, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			d++
			m = max(m, d)
		case !inStr && (c == ']' || c == '}'):
			d--
		}
	}
	return m
}
