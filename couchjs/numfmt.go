package couchjs

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/settee/settee/docjson"
)

// couchNumbers rewrites the numbers of JSON text written by JSON.stringify
// as CouchDB answers them. couchjs prints JavaScript's form; CouchDB decodes
// it (an integer stays an integer) and its JSON encoder prints every float
// in the shorter of the plain and the scientific form (plain on a tie),
// with a ".0" mantissa and no "+": 1e21 → 1.0e21, 0.000001 → 1.0e-6,
// 0.00012345 → 1.2345e-4, 0.0001 stays. It also turns a lone surrogate,
// which JSON.stringify escapes (\ud800), into U+FFFD, as CouchDB's
// decoder does. Figures seen on CouchDB 3.5.2 are in TestCouchNumbers and
// TestCouchDBSideBySide.
func couchNumbers(b []byte) []byte {
	if !bytes.ContainsAny(b, ".e") && !bytes.Contains(b, []byte(`\u`)) {
		return b // integers only (or none), no escapes
	}
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			j := docjson.SkipString(b, i)
			if j < 0 {
				return b
			}
			for k := i + 1; k < j-1; k++ {
				if b[k] != '\\' {
					continue
				}
				if b[k+1] != 'u' || k+6 > j {
					k++
					continue
				}
				r, ok := hex4(b[k+2 : k+6])
				if !ok || r < 0xd800 || r > 0xdfff {
					k += 5
					continue
				}
				if r < 0xdc00 && k+12 <= j && b[k+6] == '\\' && b[k+7] == 'u' {
					if r2, ok := hex4(b[k+8 : k+12]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
						k += 11 // a pair
						continue
					}
				}
				out = append(out, b[last:k]...)
				out = append(out, "\uFFFD"...)
				last = k + 6
				k += 5
			}
			i = j
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-' || (b[j] >= '0' && b[j] <= '9')) {
				j++
			}
			tok := b[i:j]
			if bytes.ContainsAny(tok, ".eE") {
				if f, err := strconv.ParseFloat(string(tok), 64); err == nil {
					out = append(out, b[last:i]...)
					out = appendCouchFloat(out, f)
					last = j
				}
			}
			i = j
		default:
			i++
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// appendCouchFloat appends f as CouchDB prints a float (see couchNumbers).
func appendCouchFloat(dst []byte, f float64) []byte {
	s := strconv.FormatFloat(f, 'e', -1, 64) // d[.ddd]e±XX, shortest round trip
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	ei := strings.IndexByte(s, 'e')
	mant, exp := s[:ei], s[ei+1:]
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)

	sci := digits[:1] + "."
	if len(digits) > 1 {
		sci += digits[1:]
	} else {
		sci += "0"
	}
	sci += "e" + strconv.Itoa(x)

	var plain string
	if x >= 0 {
		if len(digits) <= x+1 {
			plain = digits + strings.Repeat("0", x+1-len(digits)) + ".0"
		} else {
			plain = digits[:x+1] + "." + digits[x+1:]
		}
	} else {
		plain = "0." + strings.Repeat("0", -x-1) + digits
	}
	if neg {
		dst = append(dst, '-')
	}
	if len(sci) < len(plain) {
		return append(dst, sci...)
	}
	return append(dst, plain...)
}

func hex4(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			r = r<<4 | rune(c|0x20-'a'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
