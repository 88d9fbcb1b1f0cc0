package docjson

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// A quote ends a string unless an odd run of backslashes escapes it; the
// run must stop at the opening quote.
func TestSkipString(t *testing.T) {
	for _, s := range []string{`""`, `"a"`, `"a\"b"`, `"a\\"`, `"a\\\"b"`, `"\\\\"`, `"x\u0022y"`} {
		doc := []byte(s + `,"next"`)
		if e := SkipString(doc, 0); e != len(s) {
			t.Errorf("%s: end %d, want %d", s, e, len(s))
		}
	}
	if SkipString([]byte(`"open\"`), 0) != -1 {
		t.Error("unterminated string found an end")
	}
}

// TestStructural checks SkipValue's 8-bytes-at-a-time skip against a
// byte-by-byte definition for every byte value at every position, before
// every fill.
func TestStructural(t *testing.T) {
	isStructural := func(c byte) bool { return c == '"' || c == '{' || c == '}' || c == '[' || c == ']' }
	for pos := 0; pos < 8; pos++ {
		for v := 0; v < 256; v++ {
			for _, fill := range []byte{'5', 'a', 0x00, 0xff, '"', '{', ']', 0x5b ^ 0x20, 0x7d ^ 0x80} {
				var buf [8]byte
				for k := range buf {
					buf[k] = fill
				}
				for k := 0; k < pos; k++ {
					buf[k] = ",1 e.-\n\t"[k]
				}
				buf[pos] = byte(v)
				want := 8
				for k, c := range buf {
					if isStructural(c) {
						want = k
						break
					}
				}
				got := 8
				if m := structural(binary.LittleEndian.Uint64(buf[:])) & msb; m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("structural(%q) first at %d, want %d", buf, got, want)
				}
			}
		}
	}
}

// skipValueBytewise is SkipValue's definition, a byte at a time: FuzzWalker
// holds SkipValue to it on every input, valid or not, because its callers
// rely on exactly what it takes and what it refuses.
func skipValueBytewise(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := SkipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// TestSkipValueBytewise compares SkipValue with its definition from every
// start in pseudo-random bytes, so that the 8-byte skip meets brackets,
// quotes and escapes at every alignment and at the end of the input.
func TestSkipValueBytewise(t *testing.T) {
	const alphabet = `{}[]"\,: 0123456789abcdeE.-` + "\t\n\x00\xff\x5b\x7b\xa2"
	seed := uint64(1)
	for n := 0; n < 3000; n++ {
		b := make([]byte, n%97)
		for k := range b {
			seed = seed*6364136223846793005 + 1442695040888963407
			c := alphabet[seed>>58%uint64(len(alphabet))]
			if seed>>40&3 != 0 {
				c = "1234,5 "[seed>>50%7] // runs of filler, for the skip
			}
			b[k] = c
		}
		for i := 0; i <= len(b); i++ {
			if got, want := SkipValue(b, i), skipValueBytewise(b, i); got != want {
				t.Fatalf("SkipValue(%q, %d) = %d, byte by byte %d", b, i, got, want)
			}
		}
	}
}
