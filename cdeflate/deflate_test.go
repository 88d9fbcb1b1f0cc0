package cdeflate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

var record = flag.Bool("cdeflate.record", false, "rewrite testdata/golden.txt from C zlib (python3)")

// gzipChunked compresses data with one Write per piece of chunk bytes.
func gzipChunked(tb testing.TB, data []byte, level, chunk int) []byte {
	tb.Helper()
	var out bytes.Buffer
	z, err := NewWriter(&out, level)
	if err != nil {
		tb.Fatal(err)
	}
	if chunk <= 0 {
		chunk = len(data)
	}
	for i := 0; i < len(data); i += chunk {
		if _, err := z.Write(data[i:min(i+chunk, len(data))]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// firstDiff describes where two outputs part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("got %d bytes, want %d; first difference at byte %d", len(got), len(want), i)
}

// goldenCase is one line of testdata/golden.txt: an input (kind, size,
// seed), a level, and C zlib's output's length and sha256.
type goldenCase struct {
	kind  string
	size  int
	seed  uint64
	level int
	n     int
	sum   string
}

func (c goldenCase) name() string {
	return fmt.Sprintf("%s-%d-%d/level%d", c.kind, c.size, c.seed, c.level)
}

var goldenSizes = []int{0, 1, 2, 3, 4, 10, 100, 257, 258, 259, 262, 1000, 4096, 32767, 32768,
	32769, 65535, 65536, 65537, 100000, 262144, 1 << 20}

func goldenCases() []goldenCase {
	var cs []goldenCase
	for _, kind := range inputKinds {
		for _, size := range goldenSizes {
			for level := 1; level <= 9; level++ {
				if size >= 1<<20 && level%4 != 0 && level != 1 && level != 9 {
					continue // the big inputs at levels 1, 4, 8, 9
				}
				cs = append(cs, goldenCase{kind: kind, size: size, seed: 1, level: level})
			}
		}
	}
	return cs
}

func readGolden(t *testing.T) []goldenCase {
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cs []goldenCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var c goldenCase
		if _, err := fmt.Sscan(line, &c.kind, &c.size, &c.seed, &c.level, &c.n, &c.sum); err != nil {
			t.Fatalf("golden.txt: %q: %v", line, err)
		}
		cs = append(cs, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cs
}

func writeGolden(t *testing.T) {
	r := startRef(t)
	var b strings.Builder
	b.WriteString("# C zlib's gzip output (python3 zlib " + refVersion(t) + ", compressobj(level, DEFLATED, 31, 8)) of\n")
	b.WriteString("# cdeflate's generated inputs: kind size seed level output-length output-sha256.\n")
	b.WriteString("# Rewrite with go test ./cdeflate/ -run TestGolden -args -cdeflate.record\n")
	for _, c := range goldenCases() {
		out := r.gzip(t, genInput(c.kind, c.size, c.seed), c.level, 0)
		sum := sha256.Sum256(out)
		fmt.Fprintf(&b, "%s %d %d %d %d %s\n", c.kind, c.size, c.seed, c.level, len(out), hex.EncodeToString(sum[:]))
	}
	if err := os.WriteFile("testdata/golden.txt", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func refVersion(t *testing.T) string {
	out, err := pythonVersion()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGolden compares with C zlib's recorded outputs: it needs no python.
func TestGolden(t *testing.T) {
	if *record {
		writeGolden(t)
	}
	cs := readGolden(t)
	if len(cs) == 0 {
		t.Fatal("golden.txt is empty")
	}
	for _, c := range cs {
		if (testing.Short() || raceOn) && c.size > 65537 {
			continue
		}
		out, err := Gzip(genInput(c.kind, c.size, c.seed), c.level)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(out)
		if len(out) != c.n || hex.EncodeToString(sum[:]) != c.sum {
			t.Errorf("%s: got %d bytes sha256 %x, zlib wrote %d bytes sha256 %s", c.name(), len(out), sum, c.n, c.sum)
		}
	}
}

// TestTable is a few outputs in full, as C zlib wrote them.
func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		level int
		want  string
	}{
		{"empty", "", 8, "1f8b080000000000000303000000000000000000"},
		{"hello", "hello world", 8, "1f8b0800000000000003cb48cdc9c95728cf2fca49010085114a0d0b000000"},
		{"hello9", "hello world", 9, "1f8b0800000000000203cb48cdc9c95728cf2fca49010085114a0d0b000000"},
		{"hello1", "hello world", 1, "1f8b0800000000000403cb48cdc9c95728cf2fca49010085114a0d0b000000"},
		{"a", "a", 8, "1f8b08000000000000034b040043beb7e801000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Gzip([]byte(tc.in), tc.level)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(out); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestAgainstZlib compares with C zlib live, over the generated inputs at
// every level, and over inputs crossing the window sizes.
func TestAgainstZlib(t *testing.T) {
	r := startRef(t)
	sizes := []int{0, 1, 5, 300, 5000, 32768 + 261, 65536 - 262, 65536 + 258, 98304, 131072 + 7, 500000}
	if raceOn {
		sizes = sizes[:6]
	}
	if !testing.Short() && !raceOn {
		sizes = append(sizes, 2<<20+12345, 5<<20)
	}
	for _, kind := range inputKinds {
		for _, size := range sizes {
			for level := 1; level <= 9; level++ {
				if size > 1<<20 && level != 1 && level != 6 && level != 8 {
					continue
				}
				for seed := uint64(2); seed < 4; seed++ {
					if size > 1<<20 && seed > 2 {
						continue
					}
					in := genInput(kind, size, seed)
					want := r.gzip(t, in, level, 0)
					got, err := Gzip(in, level)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s-%d-%d level %d: %s", kind, size, seed, level, firstDiff(got, want))
					}
				}
			}
		}
	}
}

// TestChunking checks that the output does not depend on how the input
// is cut into Writes, and that zlib's does not either.
func TestChunking(t *testing.T) {
	size := 300000
	if raceOn {
		size = 70000 // still past the 64 KB window slide
	}
	in := genInput("mixed", size, 9)
	for _, level := range []int{1, 3, 4, 6, 8, 9} {
		whole, err := Gzip(in, level)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 7, 100, 4096, 32768, 65536, 100000} {
			if chunk == 1 && level != 8 {
				continue
			}
			if got := gzipChunked(t, in, level, chunk); !bytes.Equal(got, whole) {
				t.Errorf("level %d, writes of %d bytes: %s", level, chunk, firstDiff(got, whole))
			}
		}
	}
	if _, err := pythonVersion(); err != nil {
		return
	}
	r := startRef(t)
	for _, chunk := range []int{1, 100, 4096, 65536} {
		for _, level := range []int{1, 8} {
			want := r.gzip(t, in, level, 0)
			if got := r.gzip(t, in, level, chunk); !bytes.Equal(got, want) {
				t.Errorf("zlib itself, level %d, calls of %d bytes: %s", level, chunk, firstDiff(got, want))
			}
		}
	}
}

// TestRoundTrip checks that compress/gzip reads the output back.
func TestRoundTrip(t *testing.T) {
	for _, kind := range inputKinds {
		size := 200000
		if raceOn {
			size = 70000
		}
		in := genInput(kind, size, 5)
		for level := 1; level <= 9; level++ {
			out, err := Gzip(in, level)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			back, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("%s level %d: %v", kind, level, err)
			}
			if !bytes.Equal(back, in) {
				t.Fatalf("%s level %d: round trip differs", kind, level)
			}
		}
	}
}

func TestLevels(t *testing.T) {
	for _, level := range []int{-1, 0, 10} {
		if _, err := NewWriter(io.Discard, level); err == nil {
			t.Errorf("level %d accepted", level)
		}
	}
}

// FuzzDeflate compares with C zlib (python3) when it is there, and always
// checks that Write splits change nothing and that the output inflates.
// Minimizing a big input through python is slow; run it with
//
//	go test ./cdeflate/ -run XXX -fuzz FuzzDeflate -fuzzminimizetime 3s -parallel 1
func FuzzDeflate(f *testing.F) {
	f.Add([]byte("hello world"), uint8(8), uint16(0))
	f.Add([]byte(""), uint8(8), uint16(0))
	f.Add(genInput("text", 5000, 1), uint8(6), uint16(100))
	f.Add(genInput("runs", 33000, 1), uint8(9), uint16(4096))
	f.Add(genInput("rep", 40000, 3), uint8(1), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, level uint8, chunk uint16) {
		lvl := 1 + int(level)%9
		got := gzipChunked(t, in, lvl, int(chunk))
		whole, err := Gzip(in, lvl)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("level %d, writes of %d: %s", lvl, chunk, firstDiff(got, whole))
		}
		zr, err := gzip.NewReader(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		if back, err := io.ReadAll(zr); err != nil || !bytes.Equal(back, in) {
			t.Fatalf("level %d: round trip: %v", lvl, err)
		}
		if _, err := pythonVersion(); err != nil {
			return
		}
		if want := startRef(t).gzip(t, in, lvl, 0); !bytes.Equal(got, want) {
			t.Fatalf("level %d: %s", lvl, firstDiff(got, want))
		}
	})
}

var benchText = genInput("text", 64<<10, 1)

func BenchmarkCdeflate8(b *testing.B) {
	b.SetBytes(int64(len(benchText)))
	for b.Loop() {
		if _, err := Gzip(benchText, 8); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdGzip8(b *testing.B) {
	b.SetBytes(int64(len(benchText)))
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		zw, _ := gzip.NewWriterLevel(&out, 8)
		zw.Write(benchText)
		zw.Close()
	}
}

// BenchmarkCdeflate8Docs and BenchmarkStdGzip8Docs run on 64 KB of the
// repository's prose (generated text has a small vocabulary, so long hash
// chains: C zlib itself does about 10 MB/s on it at level 8).
func BenchmarkCdeflate8Docs(b *testing.B) {
	text := docsText(b)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Gzip(text, 8); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdGzip8Docs(b *testing.B) {
	text := docsText(b)
	b.SetBytes(int64(len(text)))
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		zw, _ := gzip.NewWriterLevel(&out, 8)
		zw.Write(text)
		zw.Close()
	}
}

func docsText(b *testing.B) []byte {
	var text []byte
	for _, f := range []string{"../DESIGN.md", "../docs/api.md", "../docs/interop.md", "../docs/replication.md", "../docs/configuration.md", "../docs/cluster.md"} {
		t, err := os.ReadFile(f)
		if err != nil {
			b.Skipf("no docs to compress: %v", err)
		}
		text = append(text, t...)
	}
	if len(text) < 64<<10 {
		b.Skip("docs shorter than 64 KB")
	}
	return text[:64<<10]
}

// TestReset checks that a Writer reset after use writes what a new one
// writes.
func TestReset(t *testing.T) {
	var out bytes.Buffer
	z, err := NewWriter(&out, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i, kind := range inputKinds {
		in := genInput(kind, 40000+i*30000, 11)
		out.Reset()
		z.Reset(&out)
		if _, err := z.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		want, _ := Gzip(in, 8)
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("%s after Reset: %s", kind, firstDiff(out.Bytes(), want))
		}
	}
}

// BenchmarkCdeflate8Small is an attachment of 100 bytes, Writer reused.
func BenchmarkCdeflate8Small(b *testing.B) {
	in := benchText[:100]
	var out bytes.Buffer
	z, _ := NewWriter(&out, 8)
	for b.Loop() {
		out.Reset()
		z.Reset(&out)
		z.Write(in)
		z.Close()
	}
}
