package docjson

import "testing"

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
