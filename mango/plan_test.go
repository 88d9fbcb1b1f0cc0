package mango

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/settee/settee/collate"
)

// planFile is one file of mango/testdata/plan: the indexes of one database
// (the bodies POSTed to _index), what CouchDB's GET _index listed for them,
// and the queries asked of that database with CouchDB's answers. The
// answers are recorded by TestRecordPlanCases from a real CouchDB 3.5.2.
type planFile struct {
	// Partitioned makes the database a partitioned one.
	Partitioned bool              `json:"partitioned,omitempty"`
	Indexes     []json.RawMessage `json:"indexes"`
	Listed      json.RawMessage   `json:"listed,omitempty"`
	Cases       []planCase        `json:"cases"`
}

type planCase struct {
	Name string `json:"name"`
	// Partition, when set, asks the partition's _find and _explain.
	Partition string          `json:"partition,omitempty"`
	Query     json.RawMessage `json:"query"`
	// Normalized is the selector as CouchDB's _explain printed it
	// (mango_selector:normalize), asked with the selector alone.
	Normalized json.RawMessage `json:"normalized,omitempty"`
	// Explain is the part of CouchDB's _explain answer the planner
	// decides (index, mrargs, covering), or its error.
	Explain *recorded `json:"explain,omitempty"`
	// Find is CouchDB's _find answer: status, warning or error.
	Find *recorded `json:"find,omitempty"`
}

type recorded struct {
	Status   int             `json:"status"`
	Index    json.RawMessage `json:"index,omitempty"`
	MRArgs   json.RawMessage `json:"mrargs,omitempty"`
	Covering json.RawMessage `json:"covering,omitempty"`
	Warning  string          `json:"warning,omitempty"`
	Error    string          `json:"error,omitempty"`
	Reason   string          `json:"reason,omitempty"`
}

func readPlanFiles(t *testing.T) map[string]*planFile {
	t.Helper()
	names, err := filepath.Glob("testdata/plan/*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no testdata/plan files: %v", err)
	}
	out := map[string]*planFile{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var f planFile
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[n] = &f
	}
	return out
}

// couchCall sends one request to CouchDB and decodes its JSON answer.
func couchCall(t *testing.T, method, url string, body any) (int, map[string]json.RawMessage) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %s: %v", method, url, b, err)
	}
	return resp.StatusCode, m
}

func unquote(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// TestRecordPlanCases records CouchDB's answers into testdata/plan. It runs
// only with PLAN_RECORD_COUCHDB set to a CouchDB URL with admin
// credentials (e.g. one started by /work/shared/couchdb/start.sh): the
// expectations of TestPlanAsCouchDB are then what that CouchDB said.
func TestRecordPlanCases(t *testing.T) {
	base := os.Getenv("PLAN_RECORD_COUCHDB")
	if base == "" {
		t.Skip("PLAN_RECORD_COUCHDB not set")
	}
	base = strings.TrimSuffix(base, "/")
	for name, f := range readPlanFiles(t) {
		db := base + "/plan_" + strings.TrimSuffix(filepath.Base(name), ".json")
		couchCall(t, "DELETE", db, nil)
		create := db
		if f.Partitioned {
			create += "?partitioned=true"
		}
		if st, m := couchCall(t, "PUT", create, nil); st != 201 {
			t.Fatalf("create %s: %d %v", db, st, m)
		}
		for _, ix := range f.Indexes {
			if st, m := couchCall(t, "POST", db+"/_index", ix); st != 200 {
				t.Fatalf("index %s: %d %v", ix, st, m)
			}
		}
		_, listed := couchCall(t, "GET", db+"/_index", nil)
		f.Listed = listed["indexes"]
		for i := range f.Cases {
			c := &f.Cases[i]
			var q map[string]json.RawMessage
			if err := json.Unmarshal(c.Query, &q); err != nil {
				t.Fatal(err)
			}
			at := db
			if c.Partition != "" {
				at += "/_partition/" + c.Partition
			}
			_, ex := couchCall(t, "POST", at+"/_explain", map[string]json.RawMessage{"selector": q["selector"]})
			c.Normalized = ex["selector"]
			st, ex := couchCall(t, "POST", at+"/_explain", c.Query)
			c.Explain = &recorded{Status: st}
			if st == 200 {
				c.Explain.Index, c.Explain.MRArgs, c.Explain.Covering = ex["index"], ex["mrargs"], ex["covering"]
			} else {
				c.Explain.Error, c.Explain.Reason = unquote(ex["error"]), unquote(ex["reason"])
			}
			st, fd := couchCall(t, "POST", at+"/_find", c.Query)
			c.Find = &recorded{Status: st, Warning: unquote(fd["warning"]), Error: unquote(fd["error"]), Reason: unquote(fd["reason"])}
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Println("recorded", name, len(f.Cases), "cases")
	}
}

// planIndexes turns CouchDB's GET _index listing into the planner's
// indexes.
func planIndexes(t *testing.T, listed json.RawMessage) []PlanIndex {
	t.Helper()
	var l []struct {
		DDoc        *string `json:"ddoc"`
		Name        string  `json:"name"`
		Type        string  `json:"type"`
		Partitioned bool    `json:"partitioned"`
		Def         struct {
			Fields  []map[string]string `json:"fields"`
			Partial any                 `json:"partial_filter_selector"`
		} `json:"def"`
	}
	if err := json.Unmarshal(listed, &l); err != nil {
		t.Fatal(err)
	}
	var out []PlanIndex
	for _, x := range l {
		ix := PlanIndex{Name: x.Name, Type: x.Type, Partial: x.Def.Partial, Partitioned: x.Partitioned}
		if x.DDoc != nil {
			ix.DDoc = *x.DDoc
		}
		for _, f := range x.Def.Fields {
			for k, d := range f {
				ix.Fields = append(ix.Fields, k)
				ix.Desc = d == "desc"
			}
		}
		out = append(out, ix)
	}
	return out
}

// queryArgs reads a _find body's sort, use_index and options.
func queryArgs(t *testing.T, raw json.RawMessage) ([]SortSpec, []string, PlanOptions) {
	t.Helper()
	var q struct {
		Sort          []any    `json:"sort"`
		UseIndex      any      `json:"use_index"`
		Fields        []string `json:"fields"`
		AllowFallback *bool    `json:"allow_fallback"`
		Conflicts     bool     `json:"conflicts"`
		R             int      `json:"r"`
		Stable        bool     `json:"stable"`
		Update        *bool    `json:"update"`
		Stale         string   `json:"stale"`
	}
	if err := json.Unmarshal(raw, &q); err != nil {
		t.Fatal(err)
	}
	var sortSpec []SortSpec
	for _, s := range q.Sort {
		switch x := s.(type) {
		case string:
			sortSpec = append(sortSpec, SortSpec{Field: x})
		case map[string]any:
			for k, d := range x {
				sortSpec = append(sortSpec, SortSpec{Field: k, Desc: d == "desc"})
			}
		}
	}
	var use []string
	switch x := q.UseIndex.(type) {
	case string:
		use = []string{x}
	case []any:
		for _, e := range x {
			use = append(use, e.(string))
		}
	}
	opts := PlanOptions{AllowFallback: q.AllowFallback == nil || *q.AllowFallback, Fields: q.Fields, Conflicts: q.Conflicts,
		R: q.R, Stable: q.Stable || q.Stale == "ok", NoUpdate: q.Update != nil && !*q.Update || q.Stale == "ok"}
	return sortSpec, use, opts
}

// tokens is a JSON text's token stream: two texts with equal streams
// have the same values with their keys in the same order, however their
// strings are escaped.
func tokens(t *testing.T, raw []byte) []any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out []any
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		out = append(out, tok)
	}
}

func decodeNumbers(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func checkPlanError(t *testing.T, what string, err error, want *recorded) {
	t.Helper()
	var pe *PlanError
	if !errors.As(err, &pe) {
		t.Errorf("%s: got %v, want CouchDB's %d %s: %s", what, err, want.Status, want.Error, want.Reason)
		return
	}
	if pe.Status != want.Status || pe.Err != want.Error || pe.Reason != want.Reason {
		t.Errorf("%s: got %d %s: %s, want %d %s: %s", what, pe.Status, pe.Err, pe.Reason, want.Status, want.Error, want.Reason)
	}
}

// TestPlanAsCouchDB plans every recorded query and compares with what
// CouchDB 3.5.2 answered: _find's error or warnings, _explain's index,
// mrargs (keys in order) and covering.
func TestPlanAsCouchDB(t *testing.T) {
	for name, f := range readPlanFiles(t) {
		indexes := planIndexes(t, f.Listed)
		for _, c := range f.Cases {
			t.Run(filepath.Base(name)+"/"+c.Name, func(t *testing.T) {
				sel := decodeNumbers(t, c.Normalized)
				sortSpec, use, opts := queryArgs(t, c.Query)
				opts.Partition, opts.PartitionedDB = c.Partition, f.Partitioned

				p, err := Plan(sel, sortSpec, use, indexes, opts)
				if c.Find.Status != 200 {
					checkPlanError(t, "_find", err, c.Find)
				} else if err != nil {
					t.Errorf("_find: %v", err)
				} else if got := strings.Join(p.Warnings, "\n"); got != c.Find.Warning {
					t.Errorf("_find warning: got %q, want %q", got, c.Find.Warning)
				}

				opts.Explain = true
				p, err = Plan(sel, sortSpec, use, indexes, opts)
				if c.Explain.Status != 200 {
					checkPlanError(t, "_explain", err, c.Explain)
					return
				}
				if err != nil {
					t.Fatalf("_explain: %v", err)
				}
				index, mrargs := p.Explain()
				if !reflect.DeepEqual(tokens(t, index), tokens(t, c.Explain.Index)) {
					t.Errorf("index: got %s, want %s", index, c.Explain.Index)
				}
				if c.Explain.MRArgs == nil {
					if mrargs != nil {
						t.Errorf("mrargs: got %s, CouchDB printed none", mrargs)
					}
					return
				}
				if !reflect.DeepEqual(tokens(t, mrargs), tokens(t, c.Explain.MRArgs)) {
					t.Errorf("mrargs: got %s, want %s", mrargs, c.Explain.MRArgs)
				}
				if got := fmt.Sprint(p.Covering); got != string(c.Explain.Covering) {
					t.Errorf("covering: got %s, want %s", got, c.Explain.Covering)
				}
			})
		}
	}
}

// TestPlanSentinels checks the sentinels' JSON: each collates after the
// values it bounds, as CouchDB's do.
func TestPlanSentinels(t *testing.T) {
	maxJSON, err := json.Marshal(MaxJSON)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`null`, `1e300`, `"\uffef"`, `"zzzz"`, `[{"a":1}]`, `{"zz":{}}`, `{"\ufffd":1}`} {
		if c := collateJSON(maxJSON, v); c <= 0 {
			t.Errorf("MaxJSON %s does not collate after %s", maxJSON, v)
		}
	}
	maxID, err := json.Marshal(MaxID)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := json.Unmarshal(maxID, &id); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"", "zzz", "\uffff\uffff", "\U0010FFFD"} {
		if id <= v {
			t.Errorf("MaxID %q does not sort after id %q", id, v)
		}
	}
}

// TestPlanInputs checks what the table cannot: either number form, a
// missing _all_docs, text indexes left out, and a plan that does not
// alias the caller's indexes.
func TestPlanInputs(t *testing.T) {
	indexes := []PlanIndex{
		{DDoc: "_design/t", Name: "t", Type: "text", Fields: []string{"a"}},
		{DDoc: "_design/a", Name: "a", Type: "json", Fields: []string{"a"}},
	}
	for _, sel := range []any{
		map[string]any{"a": map[string]any{"$gt": 1.0}},
		map[string]any{"a": map[string]any{"$gt": json.Number("1")}},
	} {
		p, err := Plan(sel, nil, nil, indexes, PlanOptions{AllowFallback: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Index.Name != "a" || len(p.Ranges) != 1 {
			t.Fatalf("%v: plan %+v", sel, p)
		}
		if got := fmt.Sprint(p.Ranges[0].StartKey); got != "[1]" {
			t.Errorf("%v: start key %s", sel, got)
		}
		if p.Ranges[0].EndKey.([]any)[0] != MaxJSON {
			t.Errorf("%v: end key %v", sel, p.Ranges[0].EndKey)
		}
		p.Index.Name = "changed"
		if indexes[1].Name != "a" {
			t.Fatal("the plan's index aliases the caller's")
		}
	}
	p, err := Plan(map[string]any{"b": map[string]any{"$eq": "x"}}, nil, []string{"t"}, indexes, PlanOptions{AllowFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Index.Type != "special" || p.Ranges[0].StartKey != nil || p.Ranges[0].EndKey != MaxID {
		t.Errorf("plan %+v %+v", p.Index, p.Ranges)
	}
	if len(p.Warnings) != 2 {
		t.Errorf("warnings %q", p.Warnings)
	}
}

func collateJSON(a []byte, b string) int { return collate.Compare(a, []byte(b)) }
