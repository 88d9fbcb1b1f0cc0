package difftest

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Step is one request of a sequence.
//
// Path, Headers and Body may hold placeholders: {db}, {db2} (the
// sequence's databases), {base} (the target's base URL), {node1}.. (node
// names, cluster mode) and the names earlier steps bound ({rev1}, {etag}...),
// each replaced by the value of the target the request goes to.
type Step struct {
	Name   string `json:"name,omitempty"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Headers are sent as given; Accept is application/json unless set here
	// ("" drops it: CouchDB answers text/plain then).
	Headers map[string]string `json:"headers,omitempty"`
	// Body is a JSON value, sent compact; Raw is sent byte for byte instead
	// (malformed JSON, form data, attachment bytes). A JSON body gets
	// Content-Type application/json unless Headers set one.
	Body json.RawMessage `json:"body,omitempty"`
	Raw  *string         `json:"raw,omitempty"`
	// As is the credentials: "" the server admin, "none", or "user:password".
	As string `json:"as,omitempty"`
	// Node is the node (0-based) the request goes to in cluster mode.
	Node int `json:"node,omitempty"`
	// Bind keeps values of the answer for later steps: name -> a JSON
	// pointer into the body, or "header:Name".
	Bind map[string]string `json:"bind,omitempty"`
	// Ignore lists JSON pointers whose values are not compared (prefixes:
	// everything under them); "header:Name" ignores a header.
	Ignore []string `json:"ignore,omitempty"`
	// Unordered lists JSON pointers of arrays whose order is not
	// significant (CouchDB's own order is not deterministic there).
	Unordered []string `json:"unordered,omitempty"`
	// Retry asks a GET again, on each side alone, while it answers 404 or
	// its status differs from the other side's, for up to this many ms:
	// an answer that lands a moment after the write (batch=ok, a view of a
	// cluster's copies).
	Retry int `json:"retry,omitempty"`
	// Note says what the step shows.
	Note string `json:"note,omitempty"`
}

// Sequence is a list of steps run in order on both targets. The runner
// deletes {db} and {db2} before and after it (not compared).
type Sequence struct {
	Name string `json:"name"`
	// Mode is "" (single node and cluster), "single" or "cluster".
	Mode string `json:"mode,omitempty"`
	// Slow keeps the sequence out of the CI corpus (TestDiffCorpus runs
	// every other one).
	Slow  bool   `json:"slow,omitempty"`
	Steps []Step `json:"steps"`
	// Cleanup runs after the steps on both sides, not compared (users made,
	// _config keys set).
	Cleanup []Step `json:"cleanup,omitempty"`
	// File is the corpus file it was read from.
	File string `json:"-"`
}

//go:embed corpus/*.json deliberate.txt known.txt known-cluster.txt recorded
var embedded embed.FS

// Corpus is the sequences of corpus/*.json, in file order, then in each
// file's order.
func Corpus() ([]Sequence, error) { return LoadCorpus(embedded, "corpus") }

// LoadCorpus reads every *.json under dir of fsys: a JSON array of
// sequences each. Sequence names must be unique.
func LoadCorpus(fsys fs.FS, dir string) ([]Sequence, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Sequence
	seen := map[string]string{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var seqs []Sequence
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&seqs); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, s := range seqs {
			if s.Name == "" {
				return nil, fmt.Errorf("%s: a sequence without a name", name)
			}
			if f, ok := seen[s.Name]; ok {
				return nil, fmt.Errorf("%s: sequence %q is in %s too", name, s.Name, f)
			}
			if err := s.check(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			seen[s.Name] = name
			s.File = path.Base(name)
			out = append(out, s)
		}
	}
	return out, nil
}

func (s Sequence) check() error {
	switch s.Mode {
	case "", "single", "cluster":
	default:
		return fmt.Errorf("sequence %s: mode %q (want single or cluster)", s.Name, s.Mode)
	}
	for i, st := range append(append([]Step(nil), s.Steps...), s.Cleanup...) {
		if st.Method == "" || !strings.HasPrefix(st.Path, "/") {
			return fmt.Errorf("sequence %s step %d: method %q path %q", s.Name, i+1, st.Method, st.Path)
		}
		if st.Body != nil && st.Raw != nil {
			return fmt.Errorf("sequence %s step %d: both body and raw", s.Name, i+1)
		}
		if st.Body != nil && !json.Valid(st.Body) {
			return fmt.Errorf("sequence %s step %d: body is not JSON", s.Name, i+1)
		}
	}
	return nil
}

// Requests is the number of compared requests of seqs.
func Requests(seqs []Sequence) int {
	n := 0
	for _, s := range seqs {
		n += len(s.Steps)
	}
	return n
}

// Select keeps the sequences for a mode ("single" or "cluster"); ci drops
// the slow ones.
func Select(seqs []Sequence, mode string, ci bool) []Sequence {
	var out []Sequence
	for _, s := range seqs {
		if (s.Mode == "" || s.Mode == mode) && !(ci && s.Slow) {
			out = append(out, s)
		}
	}
	return out
}
