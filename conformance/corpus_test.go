package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// record is one line of the corpus (README "Record format").
type record struct {
	Area      string   `json:"area"`
	Scenario  string   `json:"scenario"`
	Name      string   `json:"name"`
	Step      int      `json:"step"`
	Setup     []string `json:"setup"`
	Normalise []string `json:"normalise"`
	Note      string   `json:"note"`
	Request   struct {
		Method  string            `json:"method"`
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"request"`
	Response struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`

	where   string // file:line
	reqBody body
	resBody body
	norm    map[string]bool
}

type bodyKind int

const (
	bodyNone bodyKind = iota // absent: no body / empty body
	bodyText                 // a JSON string: raw bytes (request) or text (response)
	bodyJSON                 // any other JSON value
)

type body struct {
	kind bodyKind
	text string
	json any
}

func parseBody(raw json.RawMessage) (body, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return body{kind: bodyNone}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return body{}, err
		}
		return body{kind: bodyText, text: s}, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return body{}, err
	}
	return body{kind: bodyJSON, json: v}, nil
}

// unorderedLists reports whether the record's note says list order does not
// matter (README: "array order is significant except where a note says otherwise").
var unorderedNote = regexp.MustCompile(`(?i)\border (is|are) not significant\b`)

func (r *record) unorderedLists() bool { return unorderedNote.MatchString(r.Note) }

// couchDB500 marks the records where CouchDB 3.5.2 answers 500 although a 4xx is
// due (README: "settee need not copy the 500"): any 4xx with a CouchDB error body
// is accepted there, as is the recorded answer.
func (r *record) couchDB500() bool { return r.Response.Status == 500 }

type scenario struct {
	name    string
	records []*record
}

// loadCorpus reads every *.jsonl in dir and groups the records by scenario, in
// file order, checking the invariants the README promises.
func loadCorpus(dir string) ([]*scenario, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	if len(files) == 0 {
		return nil, 0, fmt.Errorf("no *.jsonl in %s", dir)
	}
	sort.Strings(files)
	var out []*scenario
	byName := map[string]*scenario{}
	names := map[string]string{}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		line := 0
		for sc.Scan() {
			line++
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			r := &record{where: fmt.Sprintf("%s:%d", filepath.Base(f), line)}
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(r); err != nil {
				return nil, 0, fmt.Errorf("%s: %v", r.where, err)
			}
			if err := r.prepare(); err != nil {
				return nil, 0, fmt.Errorf("%s (%s): %v", r.where, r.Name, err)
			}
			if prev, dup := names[r.Name]; dup {
				return nil, 0, fmt.Errorf("%s: name %q already used at %s", r.where, r.Name, prev)
			}
			names[r.Name] = r.where
			s := byName[r.Scenario]
			if s == nil {
				s = &scenario{name: r.Scenario}
				byName[r.Scenario] = s
				out = append(out, s)
			}
			if r.Step != len(s.records)+1 {
				return nil, 0, fmt.Errorf("%s: %s is step %d, want %d", r.where, r.Name, r.Step, len(s.records)+1)
			}
			if len(r.Setup) > 0 && r.Step != 1 {
				return nil, 0, fmt.Errorf("%s: setup on step %d", r.where, r.Step)
			}
			s.records = append(s.records, r)
			n++
		}
		if err := sc.Err(); err != nil {
			return nil, 0, fmt.Errorf("%s: %v", f, err)
		}
	}
	return out, n, nil
}

func (r *record) prepare() error {
	if r.Name == "" || r.Scenario == "" || r.Request.Method == "" || r.Request.Path == "" || r.Response.Status == 0 {
		return fmt.Errorf("incomplete record")
	}
	if !strings.HasPrefix(r.Name, r.Scenario+"-") {
		return fmt.Errorf("name %q does not start with its scenario", r.Name)
	}
	var err error
	if r.reqBody, err = parseBody(r.Request.Body); err != nil {
		return fmt.Errorf("request body: %v", err)
	}
	if r.resBody, err = parseBody(r.Response.Body); err != nil {
		return fmt.Errorf("response body: %v", err)
	}
	r.norm = map[string]bool{}
	for _, p := range r.Normalise {
		if !strings.HasPrefix(p, "/request/") && !strings.HasPrefix(p, "/response/") {
			return fmt.Errorf("normalise pointer %q outside /request and /response", p)
		}
		r.norm[p] = true
	}
	for _, s := range r.Setup {
		if _, ok := setupRequests[s]; !ok {
			return fmt.Errorf("unknown setup request %q", s)
		}
	}
	return nil
}

// setupRequests are the only setup entries the README defines.
var setupRequests = map[string]bool{"PUT /{db}": true, "PUT /{db2}": true, "PUT /{db}?q=1": true}

// generatedBody expands the description of an elided body, e.g.
// `<generated: {"filler":"xxx…"}, 8000113 bytes, over max_document_size 8000000>`:
// the template with "xxx…" replaced by as many x as make the body that many bytes.
var generatedRe = regexp.MustCompile(`^<generated: (.*), (\d+) bytes(?:, [^>]*)?>$`)

const generatedFiller = "xxx…"

func generatedBody(desc string) ([]byte, bool, error) {
	m := generatedRe.FindStringSubmatch(desc)
	if m == nil {
		if strings.HasPrefix(desc, "<generated") {
			return nil, true, fmt.Errorf("cannot parse %q", desc)
		}
		return nil, false, nil
	}
	tmpl := m[1]
	size, err := strconv.Atoi(m[2])
	if err != nil {
		return nil, true, err
	}
	if strings.Count(tmpl, generatedFiller) != 1 {
		return nil, true, fmt.Errorf("template %q needs exactly one %q", tmpl, generatedFiller)
	}
	fill := size - (len(tmpl) - len(generatedFiller))
	if fill < 3 {
		return nil, true, fmt.Errorf("template %q longer than %d bytes", tmpl, size)
	}
	i := strings.Index(tmpl, generatedFiller)
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(tmpl[:i])
	b.Write(bytes.Repeat([]byte{'x'}, fill))
	b.WriteString(tmpl[i+len(generatedFiller):])
	if !json.Valid(b.Bytes()) {
		return nil, true, fmt.Errorf("generated body of %q is not JSON", desc)
	}
	return b.Bytes(), true, nil
}

// knownFailure is one entry of known_failures.txt.
type knownFailure struct {
	reason string
	line   int
}

// loadKnownFailures parses lines "<record name>  # reason"; blank lines and
// lines starting with # are ignored. Every entry must name a corpus record and
// give a reason.
func loadKnownFailures(path string, valid map[string]bool) (map[string]knownFailure, []error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]knownFailure{}, nil
	}
	if err != nil {
		return nil, []error{err}
	}
	out := map[string]knownFailure{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, "#")
		name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
		switch {
		case strings.ContainsAny(name, " \t"):
			errs = append(errs, fmt.Errorf("%s:%d: one record name per line, got %q", path, i+1, name))
		case !valid[name]:
			errs = append(errs, fmt.Errorf("%s:%d: %q is not a record of the corpus", path, i+1, name))
		case reason == "":
			errs = append(errs, fmt.Errorf("%s:%d: %s has no '# reason'", path, i+1, name))
		default:
			if prev, dup := out[name]; dup {
				errs = append(errs, fmt.Errorf("%s:%d: %s already listed on line %d", path, i+1, name, prev.line))
			}
			out[name] = knownFailure{reason: reason, line: i + 1}
		}
	}
	return out, errs
}
