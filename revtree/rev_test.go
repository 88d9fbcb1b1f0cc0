package revtree

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRev(t *testing.T) {
	hex32 := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		in   string
		want Rev
		bad  bool
	}{
		{name: "simple", in: "1-abc", want: Rev{1, "abc"}},
		{name: "couch hash", in: "12-" + hex32, want: Rev{12, hex32}},
		{name: "uppercase hex folded", in: "3-" + strings.ToUpper(hex32), want: Rev{3, hex32}},
		{name: "mixed case hex folded", in: "3-0123456789ABCDEF0123456789abcdef", want: Rev{3, hex32}},
		{name: "short uppercase kept", in: "1-ABC", want: Rev{1, "ABC"}},
		{name: "leading zeros", in: "01-a", want: Rev{1, "a"}},
		{name: "many leading zeros", in: "0007-x", want: Rev{7, "x"}},
		{name: "dash in hash", in: "2-a-b", want: Rev{2, "a-b"}},
		{name: "hash is dash", in: "2--", want: Rev{2, "-"}},
		{name: "max pos", in: "18446744073709551615-z", want: Rev{18446744073709551615, "z"}},
		{name: "non-ascii hash", in: "1-é", want: Rev{1, "é"}},

		{name: "empty", in: "", bad: true},
		{name: "zero pos", in: "0-abc", bad: true},
		{name: "zeros pos", in: "000-abc", bad: true},
		{name: "negative", in: "-1-a", bad: true},
		{name: "plus sign", in: "+1-a", bad: true},
		{name: "empty hash", in: "1-", want: Rev{Pos: 1}}, // CouchDB's parse_rev takes it
		{name: "no dash", in: "abc", bad: true},
		{name: "digits only", in: "12", bad: true},
		{name: "dash only", in: "-", bad: true},
		{name: "garbage pos", in: "1x-a", bad: true},
		{name: "hex pos", in: "0x1-a", bad: true},
		{name: "space before", in: " 1-a", bad: true},
		{name: "space in pos", in: "1 -a", bad: true},
		{name: "overflow", in: "18446744073709551616-a", bad: true},
		{name: "huge", in: "99999999999999999999999-a", bad: true},
		{name: "32 chars not hex", in: "1-0123456789abcdef0123456789abcdeg", bad: true},
		{name: "32 chars with sign", in: "1-+123456789abcdef0123456789abcdef", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRev(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseRev(%q) = %v, want error", tc.in, got)
				}
				if !errors.Is(err, ErrBadRev) {
					t.Fatalf("ParseRev(%q) error %v does not wrap ErrBadRev", tc.in, err)
				}
				if got != (Rev{}) {
					t.Fatalf("ParseRev(%q) returned %v with an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRev(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseRev(%q) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseRevID(t *testing.T) {
	hex32 := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{name: "short", in: "abc", want: "abc"},
		{name: "hex32", in: hex32, want: hex32},
		{name: "upper hex32", in: strings.ToUpper(hex32), want: hex32},
		{name: "empty", in: "", want: ""}, // as CouchDB stores _revisions {"ids":["","x"]}
		{name: "32 not hex", in: strings.Repeat("z", 32), bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRevID(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrBadRev) {
					t.Fatalf("ParseRevID(%q) = %q, %v; want ErrBadRev", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRevID(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestRevString(t *testing.T) {
	tests := []struct {
		name string
		r    Rev
		want string
	}{
		{"simple", Rev{1, "abc"}, "1-abc"},
		{"big", Rev{18446744073709551615, "z"}, "18446744073709551615-z"},
		{"dash in hash", Rev{10, "a-b"}, "10-a-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			if got := string(tc.r.AppendTo([]byte("x"))); got != "x"+tc.want {
				t.Fatalf("AppendTo = %q, want %q", got, "x"+tc.want)
			}
			if !tc.r.equalsString(tc.want) {
				t.Fatalf("equalsString(%q) = false", tc.want)
			}
			for _, other := range []string{"", tc.want + "x", "0" + tc.want, strings.Replace(tc.want, "-", "_", 1)} {
				if tc.r.equalsString(other) {
					t.Fatalf("equalsString(%q) = true", other)
				}
			}
			back, err := ParseRev(tc.want)
			if err != nil || back != tc.r {
				t.Fatalf("round trip: %v, %v", back, err)
			}
		})
	}
}

func TestRevAllocs(t *testing.T) {
	hex32 := "0123456789abcdef0123456789abcdef"
	s := "5-" + hex32
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseRev(s) }); n != 0 {
		t.Errorf("ParseRev allocs = %v, want 0", n)
	}
	r := rv(s)
	if n := testing.AllocsPerRun(100, func() { _ = r.String() }); n != 1 {
		t.Errorf("String allocs = %v, want 1", n)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { _ = r.AppendTo(buf[:0]) }); n != 0 {
		t.Errorf("AppendTo allocs = %v, want 0", n)
	}
}

func FuzzParseRev(f *testing.F) {
	for _, s := range []string{
		"1-abc", "0-abc", "-1-a", "1-", "abc", "1x-a", "01-a", "2-a-b", "+1-a",
		"3-0123456789ABCDEF0123456789abcdef", "18446744073709551616-a", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRev(s)
		if err != nil {
			if !errors.Is(err, ErrBadRev) {
				t.Fatalf("error %v does not wrap ErrBadRev", err)
			}
			return
		}
		if r.Pos == 0 {
			t.Fatalf("ParseRev(%q) = %#v: zero pos", s, r)
		}
		if !strings.HasSuffix(s, r.Hash) && !strings.EqualFold(s[len(s)-len(r.Hash):], r.Hash) {
			t.Fatalf("ParseRev(%q) hash %q is not the input's tail", s, r.Hash)
		}
		// The canonical form parses back to the same rev, and is a fixed point.
		str := r.String()
		back, err := ParseRev(str)
		if err != nil || back != r {
			t.Fatalf("ParseRev(%q) = %#v; its String %q parses to %#v, %v", s, r, str, back, err)
		}
		if back.String() != str {
			t.Fatalf("String not stable: %q vs %q", back.String(), str)
		}
		if !r.equalsString(str) {
			t.Fatalf("equalsString(%q) false", str)
		}
	})
}
