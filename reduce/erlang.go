package reduce

import (
	"math/big"
	"strconv"
)

// formatP prints a term as Erlang's io_lib:format("~p") does, for the
// error messages CouchDB builds with it: binaries as <<"...">> (bytes
// printable as Latin-1 pass through, so UTF-8 text mostly does),
// objects as {[{<<"k">>,V}]}, a list of printable character codes as a
// string. io_lib's line breaking of terms longer than 80 columns is not
// reproduced. wide selects ~w (no string detection for lists).
func formatP(dst []byte, v any, wide bool) []byte {
	switch v := v.(type) {
	case atom:
		return append(dst, v...)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case *big.Int:
		return v.Append(dst, 10)
	case float64:
		return appendFloat(dst, v)
	case binary:
		if !wide && printable(string(v)) {
			dst = append(dst, "<<"...)
			dst = appendErlString(dst, string(v))
			return append(dst, ">>"...)
		}
		dst = append(dst, "<<"...)
		for i := 0; i < len(v); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(v[i]), 10)
		}
		return append(dst, ">>"...)
	case []any:
		if !wide && len(v) > 0 {
			s := make([]byte, 0, len(v))
			for _, x := range v {
				c, ok := x.(int64)
				if !ok || c < 0 || c > 255 {
					s = nil
					break
				}
				s = append(s, byte(c))
			}
			if s != nil && printable(string(s)) {
				return appendErlString(dst, string(s))
			}
		}
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = formatP(dst, x, wide)
		}
		return append(dst, ']')
	case object:
		dst = append(dst, "{["...)
		for i, m := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			dst = formatP(dst, m.k, wide)
			dst = append(dst, ',')
			dst = formatP(dst, m.v, wide)
			dst = append(dst, '}')
		}
		return append(dst, "]}"...)
	case pair:
		dst = append(dst, '{')
		dst = formatP(dst, v.k, wide)
		dst = append(dst, ',')
		dst = formatP(dst, v.v, wide)
		return append(dst, '}')
	case propList:
		dst = append(dst, '[')
		for i, m := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = formatP(dst, pair(m), wide)
		}
		return append(dst, ']')
	case stats:
		dst = append(dst, '{')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = formatP(dst, x, wide)
		}
		return append(dst, '}')
	}
	return dst
}

// formatPretty is formatP (~p) of a term that starts at column col:
// io_lib_pretty puts a term that does not fit in 80 columns one element a
// line, each indented to just after the opening bracket.
func formatPretty(dst []byte, v any, col int) []byte {
	flat := formatP(nil, v, false)
	open, close, elems := children(v)
	if col+len(flat) <= 80 || len(elems) < 2 {
		if len(elems) == 1 && col+len(flat) > 80 {
			dst = append(dst, open...)
			dst = formatPretty(dst, elems[0], col+len(open))
			return append(dst, close...)
		}
		return append(dst, flat...)
	}
	dst = append(dst, open...)
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ",\n"...)
			for range col + len(open) {
				dst = append(dst, ' ')
			}
		}
		dst = formatPretty(dst, e, col+len(open))
	}
	return append(dst, close...)
}

// children splits a compound term for formatPretty.
func children(v any) (open, close string, elems []any) {
	switch v := v.(type) {
	case []any:
		if len(formatP(nil, v, false)) > 0 && formatP(nil, v, false)[0] == '"' {
			return "", "", nil // printed as a string
		}
		return "[", "]", v
	case object:
		return "{", "}", []any{propList(v)}
	case propList:
		elems = make([]any, len(v))
		for i, m := range v {
			elems[i] = pair(m)
		}
		return "[", "]", elems
	case pair:
		return "{", "}", []any{v.k, v.v}
	case stats:
		return "{", "}", v[:]
	}
	return "", "", nil
}

// printable is io_lib:printable_latin1_list on the bytes.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 32 && c <= 126, c >= 160:
		case c >= 8 && c <= 13, c == 27:
		default:
			return false
		}
	}
	return true
}

func appendErlString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\v':
			dst = append(dst, `\v`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case 27:
			dst = append(dst, `\e`...)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// extSize is the size of the term's Erlang external format without the
// version byte, as erlang:external_size(T, [{minor_version, 1}]) counts
// it (less 1): _sum's reduce_limit compares the sizes of its input and
// output.
func extSize(v any) int {
	switch v := v.(type) {
	case atom:
		return 3 + len(v) // ATOM_EXT
	case int64:
		switch {
		case v >= 0 && v <= 255:
			return 2
		case v >= -1<<31 && v < 1<<31:
			return 5
		}
		return bigSize(big.NewInt(v))
	case *big.Int:
		return bigSize(v)
	case float64:
		return 9 // NEW_FLOAT_EXT
	case binary:
		return 5 + len(v)
	case []any:
		if len(v) == 0 {
			return 1
		}
		str := len(v) <= 65535
		n := 0
		for _, x := range v {
			if c, ok := x.(int64); !ok || c < 0 || c > 255 {
				str = false
			}
			n += extSize(x)
		}
		if str {
			return 3 + len(v) // STRING_EXT
		}
		return 5 + n + 1
	case object: // {[{K, V}, ...]}
		n := 2 + 1
		if len(v) > 0 {
			n = 2 + 5 + 1
			for _, m := range v {
				n += 2 + extSize(m.k) + extSize(m.v)
			}
		}
		return n
	case stats:
		n := 2
		for _, x := range v {
			n += extSize(x)
		}
		return n
	}
	return 0
}

func bigSize(z *big.Int) int {
	n := (z.BitLen() + 7) / 8
	if n < 256 {
		return 3 + n
	}
	return 6 + n
}
