package docjson

import (
	"bytes"
	"unicode/utf8"
	"unsafe"
)

// Unquote decodes raw, a complete JSON string token including its quotes,
// into a Go string. raw must be valid (see Valid); otherwise the error wraps
// ErrInvalidJSON.
func Unquote(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", syntaxErr(0, "not a JSON string")
	}
	s := scanner{b: raw}
	if e := s.str(0); e < 0 {
		return "", s.err()
	} else if e != len(raw) {
		return "", syntaxErr(e, "data after the JSON string")
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), nil
	}
	return string(unescape(make([]byte, 0, len(inner)), inner)), nil
}

// unescape appends to dst the decoded content of a valid JSON string (raw is
// what lies between the quotes).
func unescape(dst, raw []byte) []byte {
	for {
		k := bytes.IndexByte(raw, '\\')
		if k < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:k]...)
		c := raw[k+1]
		raw = raw[k+2:]
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw, 0)
			raw = raw[4:]
			if r >= 0xD800 && r < 0xDC00 && len(raw) >= 6 {
				// A valid input pairs it with a low surrogate.
				lo := hex4(raw, 2)
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				raw = raw[6:]
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
	}
}

// safe[c] is true for the ASCII bytes that appear unescaped in a JSON
// string as encoding/json writes it without HTML escaping.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendBytes is AppendString of b's bytes, without a string made of them
// (rows rendered straight from stored records).
func AppendBytes(dst, b []byte) []byte {
	if len(b) == 0 {
		return append(dst, '"', '"')
	}
	// AppendString only reads s, and b outlives the call
	return AppendString(dst, unsafe.String(unsafe.SliceData(b), len(b)))
}

// AppendString appends s to dst as a JSON string exactly as encoding/json
// encodes it with HTML escaping off: '"' and '\\' escaped, control
// characters as \b, \f, \n, \r, \t or \u00XX, invalid UTF-8 bytes as
// \ufffd, U+2028 and U+2029 as \u2028 and \u2029, everything else as is.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
