package mango

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/settee/settee/collate"
)

// fuzzBytes turns the fuzzer's bytes into choices; past the end every
// choice is 0, so that any input is a whole case.
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) n(k int) int {
	if f.i >= len(f.b) || k <= 1 {
		f.i++
		return 0
	}
	c := int(f.b[f.i]) % k
	f.i++
	return c
}

// The fuzzed values. Strings are lower-case ASCII, whose order is the same
// by code point (the matcher) and by the ICU collation (the index): the
// plan's ranges are computed in CouchDB's collation and the matcher
// compares strings by code point, which disagree on, e.g., "B" and "a".
// Objects have one member: the matcher compares objects by sorted keys,
// the view collation in order.
var fuzzValues = []string{`null`, `false`, `true`, `-2`, `0`, `0.5`, `1`, `2`, `3`, `10`,
	`""`, `"a"`, `"ab"`, `"abc"`, `"b"`, `"ba"`, `"c"`, `[1]`, `[1,2]`, `["a"]`, `{"k":1}`}

var fuzzStrings = []string{"", "a", "ab", "b", "c"}

// fuzzFields are the fuzzed fields; "x.y" is nested, {"x":{"y":...}}.
var fuzzFields = []string{"a", "b", "c", "x.y"}

func (f *fuzzBytes) value() any {
	var v any
	if err := json.Unmarshal([]byte(fuzzValues[f.n(len(fuzzValues))]), &v); err != nil {
		panic(err)
	}
	return v
}

// cond is one field condition in normalized form.
func (f *fuzzBytes) cond() any {
	field := fuzzFields[f.n(len(fuzzFields))]
	if f.n(8) == 0 {
		// _all_docs compares its bounds with the ids in Erlang's term
		// order, where every string is after every other value, unlike
		// the view collation the matcher follows: CouchDB answers an _id
		// {"$lt": 1} with nothing, as the plan does. The fuzzed _id
		// conditions compare with strings.
		field = "_id"
		s := fuzzStrings[f.n(len(fuzzStrings))]
		ops := []string{"$eq", "$gt", "$gte", "$lt", "$lte", "$beginsWith", "$ne"}
		return map[string]any{field: map[string]any{ops[f.n(len(ops))]: s}}
	}
	var c map[string]any
	switch f.n(10) {
	case 0:
		c = map[string]any{"$eq": f.value()}
	case 1:
		c = map[string]any{"$gt": f.value()}
	case 2:
		c = map[string]any{"$gte": f.value()}
	case 3:
		c = map[string]any{"$lt": f.value()}
	case 4:
		c = map[string]any{"$lte": f.value()}
	case 5:
		c = map[string]any{"$exists": f.n(2) == 0}
	case 6:
		c = map[string]any{"$beginsWith": fuzzStrings[f.n(len(fuzzStrings))]}
	case 7:
		c = map[string]any{"$in": []any{f.value(), f.value()}}
	case 8:
		c = map[string]any{"$ne": f.value()}
	default:
		c = map[string]any{"$eq": f.value()}
	}
	return map[string]any{field: c}
}

// selector is a normalized selector: one clause or an $and of them, a
// clause being a field condition, an $or of two, or a $not of one.
func (f *fuzzBytes) selector() any {
	clause := func() any {
		switch f.n(6) {
		case 0:
			return map[string]any{"$or": []any{f.cond(), f.cond()}}
		case 1:
			return map[string]any{"$not": f.cond()}
		}
		return f.cond()
	}
	n := 1 + f.n(4)
	if n == 1 {
		return clause()
	}
	args := make([]any, n)
	for i := range args {
		args[i] = clause()
	}
	return map[string]any{"$and": args}
}

func (f *fuzzBytes) indexes() []PlanIndex {
	var out []PlanIndex
	n := f.n(5)
	for i := 0; i < n; i++ {
		cols := []string{}
		used := map[string]bool{}
		for k := 1 + f.n(3); k > 0; k-- {
			c := fuzzFields[f.n(len(fuzzFields))]
			if f.n(10) == 0 {
				c = "_id"
			}
			if !used[c] {
				used[c] = true
				cols = append(cols, c)
			}
		}
		ix := PlanIndex{DDoc: fmt.Sprintf("_design/i%d", i), Name: fmt.Sprintf("v%d", f.n(2)), Type: "json", Fields: cols, Desc: f.n(4) == 0}
		if f.n(5) == 0 {
			ix.Partial = f.cond()
		}
		out = append(out, ix)
	}
	return out
}

func (f *fuzzBytes) docs() []map[string]any {
	ids := []string{"a", "ab", "b", "ba", "c", "d", "e", "f", "g", "h", "i", "j"}
	n := 1 + f.n(len(ids))
	out := make([]map[string]any, n)
	for i := range out {
		d := map[string]any{"_id": ids[i]}
		for _, k := range fuzzFields {
			if f.n(4) == 0 {
				continue
			}
			if k == "x.y" {
				if f.n(5) == 0 {
					d["x"] = f.value() // x without y
				} else {
					d["x"] = map[string]any{"y": f.value()}
				}
				continue
			}
			d[k] = f.value()
		}
		out[i] = d
	}
	return out
}

func keyJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	return b
}

// inRange reports whether key is in r: between its bounds (start always,
// end when InclusiveEnd), in view collation for a json index and in byte
// order of ids for _all_docs.
func inRange(t *testing.T, key any, r KeyRange, special bool) bool {
	cmp := func(a, b any) int {
		if special {
			return strings.Compare(string(keyJSONString(a)), string(keyJSONString(b)))
		}
		return collate.Compare(keyJSON(t, a), keyJSON(t, b))
	}
	lo, hi := r.StartKey, r.EndKey
	loIn, hiIn := true, r.InclusiveEnd
	if r.Descending {
		lo, hi, loIn, hiIn = hi, lo, hiIn, loIn
	}
	c := cmp(key, lo)
	if c < 0 || c == 0 && !loIn {
		return false
	}
	c = cmp(key, hi)
	return c < 0 || c == 0 && hiIn
}

// keyJSONString is an _all_docs bound as the id it stands for: a string,
// or MaxID as the greatest UTF-8 sequence; null (CouchDB's start of an
// open range) is before every id.
func keyJSONString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case Sentinel:
		return "\U0010FFFF"
	}
	return ""
}

// fieldValue is a doc's value at a dotted field path, as an index emits it.
func fieldValue(d map[string]any, field string) (any, bool) {
	var v any = d
	for _, part := range strings.Split(field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// checkNumberForms plans the selector again with its numbers as
// json.Number (as a decoder with UseNumber gives them): the plan must be
// the same.
func checkNumberForms(t *testing.T, sel any, sortSpec []SortSpec, useIndex []string, indexes []PlanIndex, opts PlanOptions, p *QueryPlan, err error) {
	d := json.NewDecoder(strings.NewReader(string(keyJSON(t, sel))))
	d.UseNumber()
	var sel2 any
	if e := d.Decode(&sel2); e != nil {
		t.Fatal(e)
	}
	p2, err2 := Plan(sel2, sortSpec, useIndex, indexes, opts)
	if fmt.Sprint(err) != fmt.Sprint(err2) {
		t.Fatalf("float64 selector: %v, json.Number selector: %v", err, err2)
	}
	if err != nil {
		return
	}
	i1, m1 := p.Explain()
	i2, m2 := p2.Explain()
	if string(i1) != string(i2) || string(m1) != string(m2) || strings.Join(p.Warnings, "|") != strings.Join(p2.Warnings, "|") {
		t.Fatalf("float64 selector: %s %s %q, json.Number selector: %s %s %q", i1, m1, p.Warnings, i2, m2, p2.Warnings)
	}
}

func compileOrFail(t *testing.T, sel any) *Selector {
	s, err := Compile(sel)
	if err != nil {
		t.Fatalf("compile %s: %v", keyJSON(t, sel), err)
	}
	return s
}

// FuzzPlan checks the planner's ranges against a full scan: for random
// docs, indexes, selectors, sorts and use_index, the docs whose index keys
// (the values of the chosen index's fields, in order; a doc missing one
// has no row) fall in the plan's ranges and match the selector are the
// docs that match it. A partial index's rows are the docs that match its
// filter, and a sort drops the docs missing a sort field (CouchDB's sort
// needs them): the full scan applies both.
func FuzzPlan(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{3, 0, 1, 2, 0, 0, 4, 1, 6, 2, 0, 9},
		{1, 1, 0, 0, 1, 3, 3, 5, 7, 1, 2, 3, 4, 5, 6},
		{2, 2, 1, 0, 2, 4, 1, 1, 0, 6, 0, 0, 2, 8, 9, 10, 11},
		{4, 3, 2, 1, 0, 1, 0, 5, 2, 4, 1, 7, 3, 6, 12, 9, 5, 2, 1},
		[]byte("plan the query over some docs and indexes"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fb := &fuzzBytes{b: data}
		indexes := fb.indexes()
		docs := fb.docs()
		sel := fb.selector()
		var sortSpec []SortSpec
		if fb.n(3) == 1 {
			desc := fb.n(2) == 1
			for k := 1 + fb.n(2); k > 0; k-- {
				fld := fuzzFields[fb.n(len(fuzzFields))]
				if fb.n(6) == 0 {
					fld = "_id"
				}
				sortSpec = append(sortSpec, SortSpec{Field: fld, Desc: desc})
			}
		}
		var useIndex []string
		if len(indexes) > 0 && fb.n(3) == 1 {
			ix := indexes[fb.n(len(indexes))]
			useIndex = []string{strings.TrimPrefix(ix.DDoc, "_design/")}
			if fb.n(2) == 0 {
				useIndex = append(useIndex, ix.Name)
			}
		}
		opts := PlanOptions{AllowFallback: fb.n(4) != 0}

		p, err := Plan(sel, sortSpec, useIndex, indexes, opts)
		checkNumberForms(t, sel, sortSpec, useIndex, indexes, opts, p, err)
		if err != nil {
			if _, ok := err.(*PlanError); !ok {
				t.Fatalf("error %T %v is not a *PlanError", err, err)
			}
			return
		}
		if p.Index == nil || len(p.Ranges) > 1 {
			t.Fatalf("plan without index or with %d ranges: %+v", len(p.Ranges), p)
		}
		ix := p.Index
		special := ix.Type == "special"
		m := compileOrFail(t, sel)
		var partial *Selector
		if ix.Partial != nil {
			partial = compileOrFail(t, ix.Partial)
		}

		var want, got []string
		for _, d := range docs {
			needsSort := true
			if !special {
				for _, s := range sortSpec {
					if _, ok := fieldValue(d, s.Field); !ok {
						needsSort = false
					}
				}
			}
			inIndex := partial == nil || partial.Match(d)
			if m.Match(d) && needsSort && inIndex {
				want = append(want, d["_id"].(string))
			}
			if len(p.Ranges) == 0 || !inIndex {
				continue
			}
			var key any
			if special {
				key = d["_id"]
			} else {
				k := make([]any, 0, len(ix.Fields))
				has := true
				for _, c := range ix.Fields {
					v, ok := fieldValue(d, c)
					has = has && ok
					k = append(k, v)
				}
				if !has {
					continue
				}
				key = k
			}
			if inRange(t, key, p.Ranges[0], special) && m.Match(d) {
				got = append(got, d["_id"].(string))
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(want, ",") != strings.Join(got, ",") {
			idx, mr := p.Explain()
			t.Fatalf("selector %s sort %v use_index %v\nindexes %+v\nplan index %s mrargs %s ranges %+v\ndocs %s\nrange scan %v, full scan %v",
				keyJSON(t, sel), sortSpec, useIndex, indexes, idx, mr, p.Ranges, keyJSON(t, docs), got, want)
		}
	})
}
