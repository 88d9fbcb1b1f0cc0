package difftest

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Entry is one declared difference: a request pattern (method, path as
// the step writes it) and a pattern of Diff.Key, '*' matching any run of
// characters in each.
type Entry struct {
	File   string
	Line   int
	Method string
	Path   string
	Diff   string
	Reason string
	// Count (known.txt only): how many differences the entry matched in
	// TestDiffCorpus's run when it was written; it may only go down.
	Count int

	method, path, diff *regexp.Regexp
}

func (e *Entry) String() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// Matches reports whether d is the difference e declares.
func (e *Entry) Matches(d Diff) bool {
	return e.method.MatchString(d.Method) && e.path.MatchString(d.Path) && e.diff.MatchString(d.Key())
}

func glob(p string) *regexp.Regexp {
	parts := strings.Split(p, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `.*`) + `$`)
}

// Declared is the deliberate and the known differences.
type Declared struct {
	Deliberate, Known []*Entry
}

// LoadDeclared reads deliberate.txt and known.txt as built in.
func LoadDeclared() (Declared, error) { return LoadDeclaredWith("known.txt") }

// LoadDeclaredWith reads deliberate.txt and the known file named (known.txt
// for a single node, known-cluster.txt for a cluster) as built in.
func LoadDeclaredWith(known string) (Declared, error) {
	var d Declared
	b, err := embedded.ReadFile("deliberate.txt")
	if err != nil {
		return d, err
	}
	if d.Deliberate, err = ParseEntries("deliberate.txt", b, false); err != nil {
		return d, err
	}
	if b, err = embedded.ReadFile(known); err != nil {
		return d, err
	}
	d.Known, err = ParseEntries(known, b, true)
	return d, err
}

// ParseEntries reads a declared-differences file: '#' comments, and lines
//
//	METHOD PATH | DIFFERENCE | reason                 (deliberate)
//	COUNT | METHOD PATH | DIFFERENCE | what is wrong  (known)
func ParseEntries(name string, data []byte, known bool) ([]*Entry, error) {
	var out []*Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, " | ")
		want := 3
		if known {
			want = 4
		}
		if len(fields) != want {
			return nil, fmt.Errorf("%s:%d: %d fields separated by \" | \", want %d", name, n, len(fields), want)
		}
		e := &Entry{File: name, Line: n}
		if known {
			c, err := strconv.Atoi(strings.TrimSpace(fields[0]))
			if err != nil || c < 1 {
				return nil, fmt.Errorf("%s:%d: count %q", name, n, fields[0])
			}
			e.Count = c
			fields = fields[1:]
		}
		req := strings.Fields(fields[0])
		if len(req) != 2 {
			return nil, fmt.Errorf("%s:%d: request %q, want METHOD PATH", name, n, fields[0])
		}
		e.Method, e.Path = req[0], req[1]
		e.Diff, e.Reason = strings.TrimSpace(fields[1]), strings.TrimSpace(fields[2])
		if e.Reason == "" {
			return nil, fmt.Errorf("%s:%d: no reason", name, n)
		}
		e.method, e.path, e.diff = glob(e.Method), glob(e.Path), glob(e.Diff)
		out = append(out, e)
	}
	return out, sc.Err()
}

// Tally is what a set of differences came to against the declared ones.
type Tally struct {
	Undeclared []Diff
	Deliberate map[*Entry]int
	Known      map[*Entry]int
}

// Classify sorts diffs into deliberate (first matching entry), known, and
// undeclared. An entry that matches a step's status difference covers every
// other difference of that step too: with another status the bodies and
// headers differ as a matter of course.
func (d Declared) Classify(diffs []Diff) Tally {
	t := Tally{Deliberate: map[*Entry]int{}, Known: map[*Entry]int{}}
	find := func(df Diff) (*Entry, bool) {
		for _, e := range d.Deliberate {
			if e.Matches(df) {
				return e, true
			}
		}
		for _, e := range d.Known {
			if e.Matches(df) {
				return e, false
			}
		}
		return nil, false
	}
	type stepKey struct {
		seq  string
		step int
	}
	byStatus := map[stepKey]*Entry{}
	deliberate := map[*Entry]bool{}
	for _, df := range diffs {
		if df.Where == "status" {
			if e, del := find(df); e != nil {
				byStatus[stepKey{df.Seq, df.Step}] = e
				deliberate[e] = del
			}
		}
	}
	for _, df := range diffs {
		e, del := find(df)
		if se, ok := byStatus[stepKey{df.Seq, df.Step}]; ok {
			e, del = se, deliberate[se]
		}
		switch {
		case e == nil:
			t.Undeclared = append(t.Undeclared, df)
		case del:
			t.Deliberate[e]++
		default:
			t.Known[e]++
		}
	}
	return t
}

// Counts sums a tally's map.
func Counts(m map[*Entry]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
