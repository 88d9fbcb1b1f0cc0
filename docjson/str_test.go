package docjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

var stringCases = []struct {
	name, s string
}{
	{"empty", ""},
	{"ascii", "hello world"},
	{"quote and backslash", `a"b\c`},
	{"short escapes", "\b\f\n\r\t"},
	{"other controls", "\x00\x01\x1f\x7f"},
	{"html not escaped", "<a href='x'>&amp;</a>"},
	{"utf8", "été € 😀"},
	{"line separators", "a\u2028b\u2029c"},
	{"invalid utf8", "a\xffb\xc3"},
	{"replacement char", "\ufffd"},
	{"slash", "a/b"},
}

func stdString(t testing.TB, s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func TestAppendString(t *testing.T) {
	for _, c := range stringCases {
		t.Run(c.name, func(t *testing.T) {
			got := string(AppendString([]byte("x"), c.s))
			if want := "x" + stdString(t, c.s); got != want {
				t.Errorf("AppendString(%q) = %s, want %s", c.s, got, want)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	for _, c := range stringCases {
		t.Run(c.name, func(t *testing.T) {
			raw := AppendString(nil, c.s)
			got, err := Unquote(raw)
			if err != nil {
				t.Fatal(err)
			}
			var want string
			if err := json.Unmarshal(raw, &want); err != nil || got != want {
				t.Errorf("Unquote(%s) = %q, want %q", raw, got, want)
			}
		})
	}
	for _, c := range []struct{ in, want string }{
		{`"\u00e9\/\ud83d\ude00"`, "é/😀"},
		{`"\u0000"`, "\x00"},
		{`"plain"`, "plain"},
	} {
		got, err := Unquote([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("Unquote(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{``, `"`, `x`, `"a`, `"a"b`, `"a" `, ` "a"`, `"\ud800"`, "\"\xff\"", `"\q"`, "\"\n\"", `1`} {
		if got, err := Unquote([]byte(in)); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("Unquote(%q) = %q, %v; want ErrInvalidJSON", in, got, err)
		}
	}
}
