package couchpath

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, esc string }{
		{"a+b", "a%2Bb"},
		{"a b", "a%20b"},
		{"a/b", "a%2Fb"},
		{"_design/x", "_design%2Fx"},
		{"é", "%C3%A9"},
		{"$()-_", "$%28%29-_"},
	} {
		got := Escape(tc.in)
		if got != tc.esc {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.esc)
		}
		back, err := Unescape(got)
		if err != nil || back != tc.in {
			t.Errorf("Unescape(%q) = %q %v, want %q", got, back, err, tc.in)
		}
	}
	if got, _ := Unescape("a+b"); got != "a b" {
		t.Errorf(`Unescape("a+b") = %q, want "a b" as CouchDB`, got)
	}
	if _, err := Unescape("a%zz"); err == nil {
		t.Error("a bad escape was accepted")
	}
}
