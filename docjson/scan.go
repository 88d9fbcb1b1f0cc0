package docjson

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted; the
// top-level value counts as depth 1. Deeper input is rejected as invalid JSON.
const MaxDepth = 512

// scanner validates JSON and, when emit is set, appends a compact copy of it
// to out. Copying is lazy: bytes from cp up to the current position are
// pending and are appended in one go when whitespace has to be skipped or the
// caller decides where a span ends, so compact input costs one memmove per
// span, not one append per token.
//
// The scanning methods return the index after what they scanned, or -1 after
// recording the error in errOff/errMsg; that keeps the error path out of the
// hot loops.
//
// It checks every byte, where walk.go's walker trusts them: see there why
// the package keeps both.
type scanner struct {
	b      []byte
	out    []byte
	cp     int // start of the bytes pending a copy to out
	emit   bool
	depth  int
	stack  [MaxDepth / 64]uint64 // bit d set: container at depth d+1 is an object
	errOff int
	errMsg string
}

func (s *scanner) fail(i int, msg string) int {
	s.errOff, s.errMsg = i, msg
	return -1
}

func (s *scanner) err() *Error { return syntaxErr(s.errOff, s.errMsg) }

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// ws skips whitespace at i. If there is some and the scanner emits, the
// pending bytes before it are flushed and the whitespace is left out.
func (s *scanner) ws(i int) int {
	if i < len(s.b) && s.b[i] > ' ' {
		return i
	}
	return s.wsSlow(i)
}

func (s *scanner) wsSlow(i int) int {
	j := SkipWS(s.b, i)
	if j > i && s.emit {
		s.out = append(s.out, s.b[s.cp:i]...)
		s.cp = j
	}
	return j
}

// value scans one complete JSON value starting at i, which must be the first
// byte of the value (whitespace already skipped). It does not skip the
// whitespace after the value.
func (s *scanner) value(i int) int {
	b := s.b
	n := len(b)
	base := s.depth
	depth := base // kept in a local in the loop; equal to s.depth on success
	obj := false  // whether the innermost open container is an object
	for {
		// i is at the start of a value.
		if i >= n {
			return s.fail(i, "unexpected end of input, expecting a value")
		}
		switch c := b[i]; c {
		case '"':
			i = s.str(i)
		case '{':
			if depth >= MaxDepth {
				return s.fail(i, "nesting too deep")
			}
			s.stack[depth>>6] |= 1 << (depth & 63)
			depth++
			obj = true
			if i++; i >= n || b[i] <= ' ' {
				i = s.wsSlow(i)
			}
			if i < n && b[i] == '}' {
				depth--
				obj = s.isObject(depth)
				i++
				break
			}
			if i = s.key(i); i < 0 {
				return -1
			}
			continue
		case '[':
			if depth >= MaxDepth {
				return s.fail(i, "nesting too deep")
			}
			s.stack[depth>>6] &^= 1 << (depth & 63)
			depth++
			obj = false
			if i++; i >= n || b[i] <= ' ' {
				i = s.wsSlow(i)
			}
			if i < n && b[i] == ']' {
				depth--
				obj = s.isObject(depth)
				i++
				break
			}
			continue
		case 't':
			if n-i < 4 || string(b[i:i+4]) != "true" {
				return s.fail(i, "invalid literal")
			}
			i += 4
		case 'f':
			if n-i < 5 || string(b[i:i+5]) != "false" {
				return s.fail(i, "invalid literal")
			}
			i += 5
		case 'n':
			if n-i < 4 || string(b[i:i+4]) != "null" {
				return s.fail(i, "invalid literal")
			}
			i += 4
		default:
			if c != '-' && c-'0' >= 10 {
				return s.fail(i, "invalid character, expecting a value")
			}
			i = s.num(i)
		}
		if i < 0 {
			return -1
		}
		// After a value: close containers until a separator or the end.
		for depth != base {
			if i >= n || b[i] <= ' ' {
				if i = s.wsSlow(i); i >= n {
					return s.fail(i, "unexpected end of input, expecting ',' or a closing bracket")
				}
			}
			c := b[i]
			if c == ',' {
				if i++; i >= n || b[i] <= ' ' {
					i = s.wsSlow(i)
				}
				if obj {
					if i = s.key(i); i < 0 {
						return -1
					}
				}
				goto next
			}
			if c == '}' && obj || c == ']' && !obj {
				depth--
				obj = s.isObject(depth)
				i++
				continue
			}
			return s.fail(i, "invalid character, expecting ',' or a closing bracket")
		}
		return i
	next:
	}
}

// isObject reports whether the container holding depth levels below it (the
// innermost container when depth == s.depth) is an object.
func (s *scanner) isObject(depth int) bool {
	d := depth - 1
	return d >= 0 && s.stack[d>>6]>>(d&63)&1 != 0
}

// key scans an object key and the colon after it, returning the index of the
// member's value.
func (s *scanner) key(i int) int {
	if i >= len(s.b) || s.b[i] != '"' {
		return s.fail(i, "expecting a string key")
	}
	if i = s.str(i); i < 0 {
		return -1
	}
	i = s.ws(i)
	if i >= len(s.b) || s.b[i] != ':' {
		return s.fail(i, "expecting ':' after object key")
	}
	return s.ws(i + 1)
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special returns a mask with the high bit set in the lowest byte of x (as
// little-endian) that is '"', '\\', a control character or not ASCII;
// higher bytes may be flagged spuriously, the lowest flagged byte is exact.
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	bs := x ^ (lsb * '\\')
	return ((q - lsb) &^ q) | ((bs - lsb) &^ bs) | (x - lsb*0x20) | x
}

// str scans a string starting at its opening quote and returns the index
// after the closing quote.
func (s *scanner) str(i int) int {
	b := s.b
	n := len(b)
	i++
	for {
		for i+8 <= n {
			m := special(binary.LittleEndian.Uint64(b[i:])) & msb
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= n {
			return s.fail(i, "unexpected end of input in string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i = s.escape(i); i < 0 {
				return -1
			}
		case c < 0x20:
			return s.fail(i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return s.fail(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// escape scans the escape sequence at b[i] == '\\'.
func (s *scanner) escape(i int) int {
	b := s.b
	if i+1 >= len(b) {
		return s.fail(i, "unexpected end of input in escape")
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2
	case 'u':
		r := hex4(b, i+2)
		if r < 0 {
			return s.fail(i, "invalid \\u escape")
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return s.fail(i, "lone low surrogate in \\u escape")
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return s.fail(i, "lone high surrogate in \\u escape")
			}
			lo := hex4(b, i+8)
			if lo < 0xDC00 || lo > 0xDFFF {
				return s.fail(i, "high surrogate not followed by a low surrogate")
			}
			return i + 12
		}
		return i + 6
	}
	return s.fail(i, "invalid escape character")
}

// hex4 decodes the four hex digits at b[i:], or returns -1.
func hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		var d byte
		switch {
		case c-'0' < 10:
			d = c - '0'
		case c|0x20-'a' < 6:
			d = c | 0x20 - 'a' + 10
		default:
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}

// digits returns the index of the first byte at or after i that is not an
// ASCII digit. (Numbers in documents are short: a plain loop the compiler
// inlines beat an 8-bytes-at-a-time version by 2x on the benchmark doc.)
func digits(b []byte, i int) int {
	for i < len(b) && b[i]-'0' < 10 {
		i++
	}
	return i
}

// num scans a number per RFC 8259:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (s *scanner) num(i int) int {
	b := s.b
	n := len(b)
	if b[i] == '-' {
		i++
		if i >= n {
			return s.fail(i, "unexpected end of input in number")
		}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c-'1' < 9:
		i = digits(b, i+1)
	default:
		return s.fail(i, "invalid number")
	}
	if i < n && b[i] == '.' {
		i++
		if i >= n || b[i]-'0' >= 10 {
			return s.fail(i, "expecting a digit after the decimal point")
		}
		i = digits(b, i+1)
	}
	if i < n && b[i]|0x20 == 'e' {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= n || b[i]-'0' >= 10 {
			return s.fail(i, "expecting a digit in the exponent")
		}
		i = digits(b, i+1)
	}
	return i
}

// whole scans b as exactly one JSON value with optional surrounding
// whitespace, emitting a compact copy when s.emit is set.
func (s *scanner) whole() int {
	i := SkipWS(s.b, 0)
	s.cp = i
	if i >= len(s.b) {
		return s.fail(i, "no JSON value")
	}
	if i = s.value(i); i < 0 {
		return -1
	}
	if s.emit {
		s.out = append(s.out, s.b[s.cp:i]...)
	}
	if j := SkipWS(s.b, i); j != len(s.b) {
		return s.fail(j, "data after the JSON value")
	}
	return i
}

// Valid reports whether b is exactly one valid JSON value (RFC 8259, strict:
// valid UTF-8, no lone surrogate escapes, nesting at most MaxDepth), with
// optional surrounding whitespace.
func Valid(b []byte) bool {
	s := scanner{b: b}
	return s.whole() >= 0
}

// Compact appends to dst the JSON value b with insignificant whitespace
// removed and everything else byte-identical. b must be exactly one valid
// JSON value (see Valid). On error it returns dst with its original length
// (the bytes beyond it may have been written) and an error wrapping
// ErrInvalidJSON.
func Compact(dst, b []byte) ([]byte, error) {
	s := scanner{b: b, out: dst, emit: true}
	if s.whole() < 0 {
		return dst, s.err()
	}
	return s.out, nil
}
