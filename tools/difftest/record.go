package difftest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// A Recording is CouchDB's side of one sequence, kept so that settee can be
// compared with CouchDB where no CouchDB runs: the recorded corpus
// (recorded/<sequence>.json) is the conformance corpus, made by this tool
// from a real CouchDB 3.5.2 (Runner.Record) and replayed by it
// (Runner.Replay: the CouchDB side answers from the recording, in step
// order, and only settee is asked).
//
// Only what the comparer reads is kept: the status, the compared headers
// and the body. The values that differ by nature between two runs
// (sequences, uuids, times) differ between two recordings too; the
// comparer compares them by type, so a re-recording's diff shows them and
// the rest is what changed.
type Recording struct {
	Seq string `json:"seq"`
	// Base is the recorded CouchDB's base URL (it reads as {base} in the
	// answers); Nodes its /_membership cluster_nodes.
	Base  string           `json:"base"`
	Nodes []string         `json:"nodes"`
	Steps []RecordedAnswer `json:"steps"`
}

// RecordedAnswer is one step's answer.
type RecordedAnswer struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	// Body is the body's text, or its base64 when Base64 (not UTF-8).
	Body   string `json:"body,omitempty"`
	Base64 bool   `json:"base64,omitempty"`
	// Err is a transport error: CouchDB gave no answer.
	Err string `json:"err,omitempty"`
}

func recordAnswer(a Answer) RecordedAnswer {
	if a.Err != nil {
		return RecordedAnswer{Err: a.Err.Error()}
	}
	ra := RecordedAnswer{Status: a.Status, Header: map[string][]string{}}
	for k, v := range a.Header {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if recordedHeader(ck) {
			ra.Header[ck] = v
		}
	}
	if utf8.Valid(a.Body) {
		ra.Body = string(a.Body)
	} else {
		ra.Body, ra.Base64 = base64.StdEncoding.EncodeToString(a.Body), true
	}
	return ra
}

func recordedHeader(ck string) bool {
	for _, h := range comparedHeaders {
		if strings.EqualFold(ck, h) {
			return true
		}
	}
	return strings.HasPrefix(ck, "X-Couch-") && !uncomparedHeaders[ck]
}

// answer is the recorded answer as the comparer takes it.
func (ra RecordedAnswer) answer(base string) Answer {
	if ra.Err != "" {
		return Answer{Err: fmt.Errorf("recorded: %s", ra.Err), Base: base}
	}
	a := Answer{Status: ra.Status, Header: http.Header{}, Body: []byte(ra.Body), Base: base}
	for k, v := range ra.Header {
		a.Header[k] = v
	}
	if ra.Base64 {
		b, err := base64.StdEncoding.DecodeString(ra.Body)
		if err != nil {
			return Answer{Err: fmt.Errorf("recorded body: %w", err), Base: base}
		}
		a.Body = b
	}
	return a
}

// LoadRecordings reads every recorded/*.json of fsys, by sequence name.
func LoadRecordings(fsys fs.FS, dir string) (map[string]*Recording, error) {
	names, err := fs.Glob(fsys, dir+"/*.json")
	if err != nil {
		return nil, err
	}
	out := map[string]*Recording{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var rec Recording
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if rec.Seq == "" || rec.Base == "" {
			return nil, fmt.Errorf("%s: no sequence name or base URL", name)
		}
		out[rec.Seq] = &rec
	}
	return out, nil
}

// Recorded is the recorded corpus embedded in the package.
func Recorded() (map[string]*Recording, error) { return LoadRecordings(embedded, "recorded") }

// CheckRecordings reports the sequences of seqs whose recording is missing
// or was made from another version of the sequence (another step count).
func CheckRecordings(seqs []Sequence, recs map[string]*Recording) error {
	var stale []string
	for _, s := range seqs {
		rec := recs[s.Name]
		if rec == nil || len(rec.Steps) != len(s.Steps) {
			stale = append(stale, s.Name)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("no recording, or one of another version, for %s: record again from a CouchDB (docs/difftest.md)", strings.Join(stale, ", "))
	}
	return nil
}

// WriteRecordings writes recs to dir, one file per sequence, and removes
// the files of sequences no longer recorded.
func WriteRecordings(dir string, recs map[string]*Recording) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	keep := map[string]bool{}
	names := make([]string, 0, len(recs))
	for name := range recs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		if err := enc.Encode(recs[name]); err != nil {
			return err
		}
		file := filepath.Join(dir, name+".json")
		keep[file] = true
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	for _, f := range old {
		if !keep[f] {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}
