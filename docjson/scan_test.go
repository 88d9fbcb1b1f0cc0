package docjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
	"strings"
	"testing"
)

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

// validCases are inputs Valid must accept; Compact must give want (the
// input itself when want is empty).
var validCases = []struct {
	name, in, want string
}{
	{"empty object", `{}`, ""},
	{"empty array", `[]`, ""},
	{"empty string", `""`, ""},
	{"true", `true`, ""},
	{"false", `false`, ""},
	{"null", `null`, ""},
	{"zero", `0`, ""},
	{"minus zero", `-0`, ""},
	{"minus zero float", `-0.0`, ""},
	{"integer", `1234567890`, ""},
	{"negative", `-17`, ""},
	{"exponent", `1e5`, ""},
	{"exponent upper plus", `1E+5`, ""},
	{"exponent minus", `1e-5`, ""},
	{"fraction exponent", `-12.5e-3`, ""},
	{"zero exponent", `0e0`, ""},
	{"huge number", `123456789012345678901234567890e999`, ""},
	{"nested", `{"a":[1,{"b":null}],"c":{}}`, ""},
	{"all escapes", `"\"\\\/\b\f\n\r\t"`, ""},
	{"unicode escape", `"\u00e9\u0000\uFFFF"`, ""},
	{"surrogate pair", `"\ud83d\ude00"`, ""},
	{"surrogate pair upper", `"\uD83D\uDE00"`, ""},
	{"utf8 2 bytes", `"é"`, ""},
	{"utf8 3 bytes", `"€ \u20ac"`, ""},
	{"utf8 4 bytes", `"😀"`, ""},
	{"utf8 replacement char", "\"\xef\xbf\xbd\"", ""},
	{"U+2028 raw", "\"\u2028\"", ""},
	{"DEL raw", "\"\x7f\"", ""},
	{"long ascii string", `"` + strings.Repeat("abcdefgh", 20) + `"`, ""},
	{"string with quote at word end", `"abcdefg\"hijklmnop"`, ""},
	{"leading and trailing whitespace", " \t\r\n{\"a\":1}\n ", `{"a":1}`},
	{"inner whitespace", `{ "a" : [ 1 , 2 ] , "b" : { } , "c" : [ ] }`, `{"a":[1,2],"b":{},"c":[]}`},
	{"whitespace inside strings kept", `{"a b": " c "}`, `{"a b":" c "}`},
	{"max depth arrays", nested("[", "]", MaxDepth), ""},
	{"max depth objects", strings.Repeat(`{"a":`, MaxDepth-1) + `{}` + strings.Repeat("}", MaxDepth-1), ""},
	{"duplicate keys", `{"a":1,"a":2}`, ""},
}

var invalidCases = []struct {
	name, in string
}{
	{"empty input", ``},
	{"whitespace only", " \n\t\r "},
	{"trailing garbage", `{} x`},
	{"two values", `{}{}`},
	{"two numbers", `1 2`},
	{"trailing comma object", `{"a":1,}`},
	{"trailing comma array", `[1,]`},
	{"leading comma", `[,1]`},
	{"missing colon", `{"a" 1}`},
	{"missing value", `{"a":}`},
	{"unquoted key", `{a:1}`},
	{"single quotes", `{'a':1}`},
	{"number key", `{1:1}`},
	{"unclosed object", `{"a":1`},
	{"unclosed array", `[1,2`},
	{"unclosed string", `"abc`},
	{"unclosed string long", `"` + strings.Repeat("x", 40)},
	{"mismatched brackets", `[1}`},
	{"mismatched braces", `{"a":1]`},
	{"leading zero", `01`},
	{"leading zeros negative", `-01`},
	{"trailing dot", `1.`},
	{"leading dot", `.5`},
	{"plus sign", `+1`},
	{"minus alone", `-`},
	{"minus space", `- 1`},
	{"exponent without digits", `1e`},
	{"exponent sign without digits", `1e+`},
	{"dot exponent", `1.e5`},
	{"hex number", `0x10`},
	{"NaN", `NaN`},
	{"Infinity", `Infinity`},
	{"truncated true", `tru`},
	{"True capitalised", `True`},
	{"nul", `nul`},
	{"literal with suffix", `nullx`},
	{"bad escape", `"\a"`},
	{"escape x", `"\x41"`},
	{"short unicode escape", `"\u12"`},
	{"bad hex in escape", `"\u12g4"`},
	{"escape at end", `"\`},
	{"lone high surrogate", `"\ud800"`},
	{"lone high surrogate then text", `"\ud800abcdef"`},
	{"high surrogate then high", `"\ud800\ud800"`},
	{"high surrogate then non-surrogate", `"\ud800\u0041"`},
	{"lone low surrogate", `"\udc00"`},
	{"reversed surrogates", `"\ude00\ud83d"`},
	{"raw control character", "\"a\x01b\""},
	{"raw newline in string", "\"a\nb\""},
	{"raw tab in string", "\"a\tb\""},
	{"invalid utf8 byte", "\"\xff\""},
	{"invalid utf8 in long string", "\"abcdefghijklmnop\xc3\""},
	{"overlong utf8", "\"\xc0\xaf\""},
	{"utf8 surrogate", "\"\xed\xa0\x80\""},
	{"truncated utf8", "\"\xe2\x82\""},
	{"utf8 beyond U+10FFFF", "\"\xf4\x90\x80\x80\""},
	{"invalid utf8 outside string", "{\"a\":1}\xff"},
	{"nul byte", "{\"a\":1}\x00"},
	{"vertical tab whitespace", "\v{}"},
	{"form feed whitespace", "{}\f"},
	{"nbsp whitespace", "\u00a0{}"},
	{"BOM", "\ufeff{}"},
	{"too deep arrays", nested("[", "]", MaxDepth+1)},
	{"too deep objects", strings.Repeat(`{"a":`, MaxDepth) + `{}` + strings.Repeat("}", MaxDepth)},
	{"comment", `{} // x`},
	{"lone close", `]`},
}

func TestValid(t *testing.T) {
	for _, c := range validCases {
		t.Run(c.name, func(t *testing.T) {
			if !Valid([]byte(c.in)) {
				t.Errorf("Valid(%q) = false", c.in)
			}
			if !json.Valid([]byte(c.in)) {
				t.Errorf("json.Valid(%q) = false; the case is wrong", c.in)
			}
		})
	}
	for _, c := range invalidCases {
		t.Run(c.name, func(t *testing.T) {
			if Valid([]byte(c.in)) {
				t.Errorf("Valid(%q) = true", c.in)
			}
		})
	}
}

func TestCompact(t *testing.T) {
	for _, c := range validCases {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			if want == "" {
				want = c.in
			}
			got, err := Compact([]byte("prefix:"), []byte(c.in))
			if err != nil || string(got) != "prefix:"+want {
				t.Errorf("Compact(%q) = %q, %v; want %q", c.in, got, err, want)
			}
			var std bytes.Buffer
			if err := json.Compact(&std, []byte(c.in)); err == nil && std.String() != want {
				t.Errorf("json.Compact(%q) = %q, want %q", c.in, std.String(), want)
			}
		})
	}
	for _, c := range invalidCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Compact([]byte("prefix:"), []byte(c.in))
			if !errors.Is(err, ErrInvalidJSON) || string(got) != "prefix:" {
				t.Errorf("Compact(%q) = %q, %v; want prefix:, ErrInvalidJSON", c.in, got, err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != "invalid UTF-8 JSON" || e.CouchError != BadRequest || e.Offset < 0 || e.Detail == "" {
				t.Errorf("Compact(%q): error %#v", c.in, e)
			}
		})
	}
}

func TestErrorOffset(t *testing.T) {
	for _, c := range []struct {
		in     string
		offset int
	}{
		{`{"a":1,}`, 7},
		{`[1,2,x]`, 5},
		{`{"a":01}`, 6},
		{"\"abcdefghijklmnopqrstuvwxyz\x01\"", 27},
		{`{} x`, 3},
		{``, 0},
	} {
		_, err := Compact(nil, []byte(c.in))
		var e *Error
		if !errors.As(err, &e) || e.Offset != c.offset {
			t.Errorf("Compact(%q): error %#v, want offset %d", c.in, err, c.offset)
		}
	}
}

// TestSWAR checks the 8-bytes-at-a-time string scan against a byte-by-byte
// definition for every byte value at every position, after every prefix.
func TestSWAR(t *testing.T) {
	isSpecial := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	for pos := 0; pos < 8; pos++ {
		for v := 0; v < 256; v++ {
			for _, fill := range []byte{'5', 'a', 0x00, 0xff, '"', '9', '0'} {
				buf := bytes.Repeat([]byte{fill}, 16)
				for k := 0; k < pos; k++ {
					buf[k] = "0123456789"[k]
				}
				buf[pos] = byte(v)
				// special: lowest flagged byte is the first special byte.
				x := uint64(0)
				for k := 7; k >= 0; k-- {
					x = x<<8 | uint64(buf[k])
				}
				want := 8
				for k := 0; k < 8; k++ {
					if isSpecial(buf[k]) {
						want = k
						break
					}
				}
				got := 8
				if m := special(x) & msb; m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("special(%q) first at %d, want %d", buf[:8], got, want)
				}
			}
		}
	}
}
