package cdeflate

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// zlibRef is C zlib, through python3 running testdata/zlibref.py.
type zlibRef struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

var (
	refOnce sync.Once
	ref     *zlibRef
	refErr  error
)

// startRef returns the shared python zlib, or skips the test without it.
func startRef(tb testing.TB) *zlibRef {
	tb.Helper()
	refOnce.Do(func() {
		py, err := exec.LookPath("python3")
		if err != nil {
			refErr = fmt.Errorf("python3 not found: %w", err)
			return
		}
		cmd := exec.Command(py, "testdata/zlibref.py")
		in, err := cmd.StdinPipe()
		if err != nil {
			refErr = err
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			refErr = err
			return
		}
		if err := cmd.Start(); err != nil {
			refErr = err
			return
		}
		ref = &zlibRef{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	})
	if refErr != nil {
		tb.Skipf("no C zlib to compare with (python3): %v", refErr)
	}
	return ref
}

// gzip asks C zlib to gzip data at level, fed in pieces of chunk bytes (0:
// one call).
func (r *zlibRef) gzip(tb testing.TB, data []byte, level, chunk int) []byte {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var hdr [9]byte
	hdr[0] = byte(level)
	binary.LittleEndian.PutUint32(hdr[1:], uint32(chunk))
	binary.LittleEndian.PutUint32(hdr[5:], uint32(len(data)))
	if _, err := r.in.Write(hdr[:]); err != nil {
		tb.Fatalf("zlibref: %v", err)
	}
	if _, err := r.in.Write(data); err != nil {
		tb.Fatalf("zlibref: %v", err)
	}
	var n [4]byte
	if _, err := io.ReadFull(r.out, n[:]); err != nil {
		tb.Fatalf("zlibref: %v", err)
	}
	res := make([]byte, binary.LittleEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r.out, res); err != nil {
		tb.Fatalf("zlibref: %v", err)
	}
	return res
}

// rng is splitmix64: the generated inputs are the same everywhere.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

var words = strings.Fields(`the of and to in is was that for it with as his on be at by
had are but from or have an they which one you were all we her she there would their
will when who him been has more if no out so said what up its about than into them can
only other time new some could these two may first then do any like my now over such our
man me even most made after also did many before must through back years where much your
way well down should because each just those people how too little state good very make
world still own see men work long get here between both life being under never day same
another know while last might us great old year off come since against go came right used
take three couchdb revision attachment document database replication shard cluster erlang`)

// genInput makes the input named kind of n bytes from seed.
func genInput(kind string, n int, seed uint64) []byte {
	r := rng(seed*7919 + uint64(n))
	b := make([]byte, 0, n+300)
	switch kind {
	case "rand":
		for len(b) < n {
			b = binary.LittleEndian.AppendUint64(b, r.next())
		}
	case "text":
		for len(b) < n {
			b = append(b, words[r.intn(len(words))]...)
			switch r.intn(20) {
			case 0:
				b = append(b, ".\n"...)
			case 1:
				b = append(b, ", "...)
			default:
				b = append(b, ' ')
			}
		}
	case "rep":
		pat := make([]byte, 1+r.intn(64))
		for i := range pat {
			pat[i] = byte(r.next())
		}
		for len(b) < n {
			b = append(b, pat...)
			if r.intn(8) == 0 {
				b[len(b)-1-r.intn(len(pat))] = byte(r.next())
			}
		}
	case "runs":
		for len(b) < n {
			c := byte(r.next())
			for k := 1 + r.intn(1000); k > 0; k-- {
				b = append(b, c)
			}
		}
	case "json":
		for i := 0; len(b) < n; i++ {
			b = append(b, `{"_id":"doc-`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `","value":`...)
			b = strconv.AppendInt(b, int64(r.intn(1000000)), 10)
			b = append(b, `,"name":"`...)
			b = append(b, words[r.intn(len(words))]...)
			b = append(b, "\"},\n"...)
		}
	case "dna":
		for len(b) < n {
			b = append(b, "ACGT"[r.intn(4)])
		}
	case "mixed":
		kinds := []string{"rand", "text", "rep", "runs", "json", "dna"}
		for len(b) < n {
			seg := genInput(kinds[r.intn(len(kinds))], 1+r.intn(40000), r.next())
			b = append(b, seg...)
		}
	default:
		panic("no input kind " + kind)
	}
	return b[:n]
}

var inputKinds = []string{"rand", "text", "rep", "runs", "json", "dna", "mixed"}

var (
	pyOnce sync.Once
	pyVer  string
	pyErr  error
)

// pythonVersion is the zlib version python3 runs, or why there is none.
func pythonVersion() (string, error) {
	pyOnce.Do(func() {
		out, err := exec.Command("python3", "testdata/zlibref.py", "version").Output()
		pyVer, pyErr = strings.TrimSpace(string(out)), err
	})
	return pyVer, pyErr
}
