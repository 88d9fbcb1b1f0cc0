package reduce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/settee/settee/mango"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"_sum", true}, {"_sum\n", true}, {"_sumx", true}, {"_count", true}, {"_stats", true},
		{"_approx_count_distinct", true}, {"_SUM", false}, {" _sum", false}, {"_first", false}, {"sum", false},
	} {
		if _, ok := Lookup(tc.name); ok != tc.ok {
			t.Errorf("Lookup(%q) = %v, want %v", tc.name, ok, tc.ok)
		}
	}
}

func rows(vals ...string) (keys, values [][]byte) {
	for i, v := range vals {
		keys = append(keys, []byte(fmt.Sprint(i)))
		values = append(values, []byte(v))
	}
	return keys, values
}

func TestReduce(t *testing.T) {
	for _, tc := range []struct {
		fn   string
		vals []string
		want string // or "error: ..."
	}{
		{"_sum", []string{"1", "2"}, "3"},
		{"_sum", []string{"9223372036854775807", "1"}, "9223372036854775808"}, // exact, as Erlang's bignums
		{"_sum", []string{"1", "0.5"}, "1.5"},
		{"_sum", []string{"0.5", "0.5"}, "1.0"},
		{"_sum", []string{"1e300", "1e300"}, "2.0e300"},
		{"_sum", []string{"1e308", "1e308"}, "error: unknown_error: badarith"},
		{"_sum", []string{"[1,2]", "[3]"}, "[4,2]"},
		{"_sum", []string{`{"b":1,"a":2}`}, `{"b":1,"a":2}`},
		{"_sum", []string{`{"b":1,"a":2}`, `{"a":1}`}, `{"a":3,"b":1}`},
		{"_sum", []string{`{"error":"x"}`}, `error: case_clause: {<<"error">>,<<"x">>}`},
		{"_sum", []string{`{"a":1}`, "1"}, `{"error":"builtin_reduce_error","reason":"` + sumReason + `","caused_by":1}`},
		{"_sum", []string{"1", `{"a":1}`}, "error: case_clause: 1"},
		{"_sum", nil, "0"},
		{"_count", []string{"1", `"x"`, "null"}, "3"},
		{"_stats", []string{"2", "4.0"}, `{"sum":6.0,"count":2,"min":2,"max":4.0,"sumsqr":20.0}`},
		{"_stats", []string{"2", "2.0"}, `{"sum":4.0,"count":2,"min":2.0,"max":2.0,"sumsqr":8.0}`}, // equal min: the new value's
		{"_stats", nil, `{"sum":0,"count":0,"min":0,"max":0,"sumsqr":0}`},
		{"_stats", []string{`"bad"`}, "error: invalid_value: non-numeric _stats input: <<98,97,100>>"},
		{"_stats", []string{"1", "[97,98]"}, `error: invalid_value: The _stats function requires that map values be numbers or arrays of numbers, not '"ab"'`},
	} {
		b, _ := Lookup(tc.fn)
		keys, values := rows(tc.vals...)
		got, err := b.Reduce(keys, values)
		if err == nil {
			got, err = b.Final(got)
		}
		g := string(got)
		if err != nil {
			g = "error: " + err.Error()
		}
		if g != tc.want {
			t.Errorf("%s %v:\n got %s\nwant %s", tc.fn, tc.vals, g, tc.want)
		}
	}
}

func TestApproxCountDistinct(t *testing.T) {
	b, _ := Lookup("_approx_count_distinct")
	keys := [][]byte{[]byte("1"), []byte("1.0"), []byte(" 1"), []byte(`"a"`), []byte(`["a",1]`), []byte(`[ "a", 1 ]`)}
	r1, err := b.Reduce(keys[:3], make([][]byte, 3))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Reduce(keys[3:], make([][]byte, 3))
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Rereduce([][]byte{r1, r2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Final(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "4" { // 1 and 1.0 are distinct terms; white space is not
		t.Errorf("estimate %s, want 4", got)
	}
	var many [][]byte
	for i := range 100000 {
		many = append(many, fmt.Appendf(nil, `"k%d"`, i%50000))
	}
	r, _ = b.Reduce(many, make([][]byte, len(many)))
	got, _ = b.Final(r)
	var n int
	fmt.Sscan(string(got), &n)
	if n < 47000 || n > 53000 { // p=11: a standard error of about 2.3%
		t.Errorf("estimate of 50000 distinct keys: %d", n)
	}
}

func TestFloatFormat(t *testing.T) {
	for f, want := range map[float64]string{
		100: "100.0", 0.0001: "0.0001", 1e-5: "1.0e-5", 1.2e6: "1.2e6", 1e15: "1.0e15", 1235: "1235.0",
		-1199998: "-1199998.0", 0.30000000000000004: "0.30000000000000004", 1e21: "1.0e21", 5e-324: "5.0e-324",
		// CouchDB 3.5.2 (2026-12-07): _sum of 0.5 and 9007199254740992
		// answers 9.007199254740992e15; 2^53 and up is never fixed
		9007199254740992: "9.007199254740992e15", -9007199254740992: "-9.007199254740992e15",
		9007199254740991: "9007199254740991.0", 1e16: "1.0e16",
	} {
		if got := string(appendFloat(nil, f)); got != want {
			t.Errorf("appendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

// TestFloatFormatIsMangos: a double is written one way in reduce output
// and in Mango's answers, Erlang's float_to_list(F, [short]).
func TestFloatFormatIsMangos(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if i%2 == 0 { // and whole numbers around 2^53
			f = float64(int64(1)<<53 + int64(rng.IntN(1<<20)) - 1<<19)
		}
		if got, want := string(appendFloat(nil, f)), mango.FormatFloat(f); got != want {
			t.Fatalf("%v: reduce writes %s, mango %s", f, got, want)
		}
	}
}

func benchRows(vals func(i int) string) (keys, values [][]byte) {
	for i := range 1000 {
		keys = append(keys, fmt.Appendf(nil, `["k",%d]`, i))
		values = append(values, []byte(vals(i)))
	}
	return keys, values
}

func BenchmarkSum(b *testing.B) {
	for name, v := range map[string]func(int) string{
		"ints":   func(i int) string { return fmt.Sprint(i) },
		"floats": func(i int) string { return fmt.Sprintf("%d.5", i) },
		"arrays": func(i int) string { return fmt.Sprintf("[%d,1,2]", i) },
	} {
		b.Run(name, func(b *testing.B) {
			s, _ := Lookup("_sum")
			keys, values := benchRows(v)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Reduce(keys, values); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCount(b *testing.B) {
	c, _ := Lookup("_count")
	keys, values := benchRows(func(i int) string { return "null" })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Reduce(keys, values); err != nil {
			b.Fatal(err)
		}
	}
}
