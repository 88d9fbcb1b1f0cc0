package collate

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func mustKey(t testing.TB, k string) []byte {
	t.Helper()
	b, err := AppendKey(nil, []byte(k))
	if err != nil {
		t.Fatalf("AppendKey(%s): %v", k, err)
	}
	return b
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{`null`, `false`, -1},
		{`true`, `0`, -1},
		{`1e300`, `""`, -1},
		{`"z"`, `[]`, -1},
		{`[{}]`, `{}`, -1},
		{`1`, `1.0`, 0},
		{`-0`, `0`, 0},
		{`-0.0`, `0e5`, 0},
		{`10`, `9`, 1},
		{`1e2`, `100`, 0},
		{`0.1`, `0.10000000000000001`, 0}, // the same double
		{`12345678901234567891`, `12345678901234567890`, 1},
		{`12345678901234567891`, `12345678901234567891.0`, 1}, // that double is ...7168
		{`12345678901234567168`, `12345678901234567891.0`, 0},
		{`-12345678901234567891`, `-12345678901234567890`, -1},
		{`1e400`, `1e300`, 1},             // +Inf above every finite double
		{`1e400`, `1` + zeros(400), 1},    // ... and every integer
		{`-1e400`, `-1` + zeros(400), -1}, // and -Inf below
		{`1e-400`, `0`, 0},                // underflows to 0
		{`5e-324`, `0`, 1},                // the least subnormal
		{`"a"`, `"A"`, -1},
		{`"A"`, `"aa"`, -1},
		{`"aa"`, `"b"`, -1},
		{`"a"`, `"a\u0001"`, 0}, // ignorable
		{`"é"`, `"e\u0301"`, 0}, // canonically equivalent
		{`"\u00e9"`, `"é"`, 0},
		{`"\ud83d\ude00"`, `"😀"`, 0},
		{`"10"`, `"9"`, -1}, // no numeric collation
		{`["a"]`, `["a",1]`, -1},
		{`["a",1]`, `["b"]`, -1},
		{`[ "a" , 1 ]`, `["a",1]`, 0},
		{`{"a":1}`, `{"a":1,"b":0}`, -1},
		{`{"b":1}`, `{"a":2}`, 1},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, -1}, // members in their order
	} {
		if got := Compare([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("Compare(%.60s, %.60s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Compare([]byte(tc.b), []byte(tc.a)); got != -tc.want {
			t.Errorf("Compare(%.60s, %.60s) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
		if got := sign(bytes.Compare(mustKey(t, tc.a), mustKey(t, tc.b))); got != tc.want {
			t.Errorf("AppendKey order of %.60s, %.60s = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func zeros(n int) string { return strings.Repeat("0", n) }

// TestKnownDifferences pins where x/text (CLDR 23 / Unicode 6.2) and
// CouchDB 3.5.2's ICU 72 disagree, each with the order CouchDB gave. If
// x/text's tables catch up, this fails: move the keys to orderKeys.
func TestKnownDifferences(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		couch int // CouchDB 3.5.2's answer
		why   string
	}{
		{`"🤔"`, `"😀"`, -1, "U+1F914 (Unicode 8) is unassigned in 6.2: sorts by code point after all assigned"},
		{`"🥑"`, `"$"`, -1, "U+1F951 (Unicode 9), the same"},
		{`"🤔"`, `"a"`, -1, "ICU puts emoji among the symbols, before digits and letters"},
		{`"𠀀"`, `"中"`, -1, "ICU 72 orders Han by radical-stroke across blocks; CLDR 23 by block, then code point"},
	} {
		if got := Compare([]byte(tc.a), []byte(tc.b)); got != -tc.couch {
			t.Errorf("Compare(%s, %s) = %d: x/text now agrees with CouchDB (%d)? %s", tc.a, tc.b, got, tc.couch, tc.why)
		}
	}
}

func TestAppendKeySuffix(t *testing.T) {
	// A doc id after the key must not change the order of different keys.
	keys := []string{`"a"`, `"ab"`, `["a"]`, `["a",1]`, `["b"]`, `1`, `1.5`, `-1`, `-1.5`, `{"a":1}`, `{"a":1,"b":1}`}
	for _, a := range keys {
		for _, b := range keys {
			want := sign(Compare([]byte(a), []byte(b)))
			if want == 0 {
				continue
			}
			for _, s := range []string{"\x00", "\xff", "zzz"} {
				for _, u := range []string{"\x00", "\xff", "a"} {
					ka := append(mustKey(t, a), s...)
					kb := append(mustKey(t, b), u...)
					if got := sign(bytes.Compare(ka, kb)); got != want {
						t.Errorf("%s+%q vs %s+%q: %d, want %d", a, s, b, u, got, want)
					}
				}
			}
		}
	}
}

func TestAppendArrayPrefix(t *testing.T) {
	for _, tc := range []struct {
		key  string
		n    int
		want string
	}{
		{`["a",1,[2]]`, 0, `[]`},
		{`["a",1,[2]]`, 1, `["a"]`},
		{`["a",1,[2]]`, 2, `["a",1]`},
		{`["a",1,[2]]`, 3, `["a",1,[2]]`},
		{`["a",1,[2]]`, 9, `["a",1,[2]]`},
		{` [ ] `, 2, `[]`},
		{`"a"`, 1, `"a"`},
		{`{"a":1}`, 1, `{"a":1}`},
	} {
		got, err := AppendArrayPrefix([]byte("x"), []byte(tc.key), tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if want := append([]byte("x"), mustKey(t, tc.want)...); !bytes.Equal(got, want) {
			t.Errorf("AppendArrayPrefix(%s, %d) = %x, want %x (%s)", tc.key, tc.n, got, want, tc.want)
		}
	}
}

func TestAppendKeyInvalid(t *testing.T) {
	for _, k := range []string{``, ` `, `nul`, `[1,]`, `[1 2]`, `{"a"}`, `{"a":}`, `{1:2}`, `"abc`, `"\x01"`, `"\q"`,
		`01`, `1.`, `-`, `1e`, `[`, `{`, `1 2`, `"\ud800\u12"`, strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		dst := []byte("keep")
		got, err := AppendKey(dst, []byte(k))
		if err == nil {
			t.Errorf("AppendKey(%.20q) = %x, want an error", k, got)
		}
		if string(got) != "keep" {
			t.Errorf("AppendKey(%.20q) on error = %q, want dst unchanged", k, got)
		}
		_ = Compare([]byte(k), []byte(`[1]`)) // must not panic
	}
}

func TestConcurrent(t *testing.T) {
	keys := []string{`"straße"`, `"strasse"`, `["Ä",1]`, `{"ö":[1,2]}`, `"中文"`, `1.5`}
	want := make([][]byte, len(keys))
	for i, k := range keys {
		want[i] = mustKey(t, k)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := (i + g) % len(keys)
				got, err := AppendKey(nil, []byte(keys[k]))
				if err != nil || !bytes.Equal(got, want[k]) {
					t.Errorf("AppendKey(%s) = %x, %v concurrently", keys[k], got, err)
					return
				}
				_ = Compare([]byte(keys[k]), []byte(keys[(k+1)%len(keys)]))
			}
		}()
	}
	wg.Wait()
}

var benchKeys = []struct{ name, a, b string }{
	{"string", `"alice@example.com"`, `"alicia@example.com"`},
	{"unicode", `"Ærøskøbing"`, `"Aerosmith"`},
	{"int", `12345`, `12346`},
	{"float", `3.14159`, `2.71828`},
	{"array", `["2024-05-01",17,"user"]`, `["2024-05-01",17,"usher"]`},
}

func BenchmarkAppendKey(b *testing.B) {
	for _, k := range benchKeys {
		b.Run(k.name, func(b *testing.B) {
			key := []byte(k.a)
			dst := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = AppendKey(dst[:0], key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompare(b *testing.B) {
	for _, k := range benchKeys {
		b.Run(k.name, func(b *testing.B) {
			x, y := []byte(k.a), []byte(k.b)
			b.ReportAllocs()
			for b.Loop() {
				Compare(x, y)
			}
		})
	}
}

func Example() {
	k1, _ := AppendKey(nil, []byte(`["a",1]`))
	k2, _ := AppendKey(nil, []byte(`["B"]`))
	fmt.Println(Compare([]byte(`["a",1]`), []byte(`["B"]`)), bytes.Compare(k1, k2))
	// Output: -1 -1
}
