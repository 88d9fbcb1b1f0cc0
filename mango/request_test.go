package mango

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// checkErr compares err with CouchDB's recorded error answer.
func checkErr(t *testing.T, what string, err error, a answer) {
	t.Helper()
	var want struct{ Error, Reason string }
	if e := json.Unmarshal(a.Answer, &want); e != nil {
		t.Fatal(e)
	}
	var re *RequestError
	if !errors.As(err, &re) {
		t.Errorf("%s %s: got %v, CouchDB answers %d %s", what, a.Request, err, a.Status, a.Answer)
		return
	}
	if re.Status != a.Status || re.Err != want.Error || re.Reason != want.Reason {
		t.Errorf("%s %s:\n got %d %q %q\nwant %d %q %q", what, a.Request, re.Status, re.Err, re.Reason, a.Status, want.Error, want.Reason)
	}
}

// checkJSON compares v, encoded, with CouchDB's text (whitespace aside).
func checkJSON(t *testing.T, what string, v any, want []byte) {
	t.Helper()
	got := marshal(t, v)
	if !sameJSON(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func TestNormalizeAsCouchDB(t *testing.T) {
	for _, a := range loadAnswers(t, "couchdb_selectors.json") {
		f, err := ParseFind([]byte(`{"selector":` + a.Request + `}`))
		if a.Status != 200 {
			checkErr(t, "selector", err, a)
			continue
		}
		if err != nil {
			t.Errorf("selector %s: %v, CouchDB normalizes it to %s", a.Request, err, a.Answer)
			continue
		}
		checkJSON(t, "selector "+a.Request, f.Selector, a.Answer)
		// Normalize on the decoded selector, and on its own output
		v, _ := decodeJSON([]byte(a.Request))
		n, err := Normalize(v)
		if err != nil {
			t.Errorf("Normalize(%s): %v", a.Request, err)
			continue
		}
		checkJSON(t, "Normalize "+a.Request, n, a.Answer)
		n2, err := Normalize(n)
		if err != nil {
			t.Errorf("Normalize(Normalize(%s)): %v", a.Request, err)
			continue
		}
		checkJSON(t, "Normalize twice "+a.Request, n2, a.Answer)
	}
}

func TestParseFindAsCouchDB(t *testing.T) {
	for _, a := range loadAnswers(t, "couchdb_find.json") {
		f, err := ParseFind([]byte(a.Request))
		if a.Status != 200 {
			if strings.Contains(string(a.Answer), "You must specify an index") {
				// the planner's answer to allow_fallback false without an
				// index, not the request's
				if err != nil || f.AllowFallback {
					t.Errorf("find %s: %v %+v", a.Request, err, f)
				}
				continue
			}
			checkErr(t, "find", err, a)
			continue
		}
		if err != nil {
			t.Errorf("find %s: %v, CouchDB answers %s", a.Request, err, a.Answer)
			continue
		}
		var want struct{ Selector, Opts json.RawMessage }
		if err := json.Unmarshal(a.Answer, &want); err != nil {
			t.Fatal(err)
		}
		checkJSON(t, "find selector "+a.Request, f.Selector, want.Selector)
		opts := f.ExplainOpts()
		checkJSON(t, "find opts "+a.Request, opts, want.Opts)
	}
}

func TestParseFindDefaults(t *testing.T) {
	f, err := ParseFind([]byte(`{"selector":{"a":{"$gt":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Find{Selector: Object{{"a", Object{{"$gt", json.Number("1")}}}},
		RawSelector: Object{{"a", Object{{"$gt", json.Number("1")}}}},
		Limit:       25, R: 1, Update: true, AllowFallback: true, UseIndex: []string{}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("got %+v\nwant %+v", f, want)
	}
}

func TestParseIndexAsCouchDB(t *testing.T) {
	checkIndexes(t, "couchdb_index.json", false)
	checkIndexes(t, "couchdb_partitioned.json", true)
}

// checkIndexes checks the recorded index requests on a database
// partitioned or not.
func checkIndexes(t *testing.T, file string, dbPartitioned bool) {
	for _, a := range loadAnswers(t, file) {
		r, err := ParseIndexRequest([]byte(a.Request))
		if a.Status != 200 {
			checkErr(t, "index", err, a)
			continue
		}
		if err != nil {
			t.Errorf("index %s: %v, CouchDB answers %s", a.Request, err, a.Answer)
			continue
		}
		var want struct {
			Result struct{ ID, Name string }
			DDoc   json.RawMessage
			Index  json.RawMessage
			AllDoc json.RawMessage `json:"all_docs"`
		}
		if err := json.Unmarshal(a.Answer, &want); err != nil {
			t.Fatal(err)
		}
		if r.DDoc != want.Result.ID || r.Name != want.Result.Name {
			t.Errorf("index %s: named %s %s, CouchDB %s %s", a.Request, r.DDoc, r.Name, want.Result.ID, want.Result.Name)
		}
		if !sameJSON(r.DesignDoc(), want.DDoc) {
			t.Errorf("index %s design doc:\n got %s\nwant %s", a.Request, r.DesignDoc(), want.DDoc)
		}
		// read back as settee's views package keeps it: the view's map
		// as raw JSON, the design doc's options
		var dd struct {
			Views   map[string]struct{ Map json.RawMessage }
			Options map[string]any
		}
		if err := json.Unmarshal(want.DDoc, &dd); err != nil {
			t.Fatal(err)
		}
		ix, err := ParseIndexView(want.Result.ID, want.Result.Name, dd.Views[want.Result.Name].Map, dd.Options)
		if err != nil {
			t.Errorf("index %s: ParseIndexView: %v", a.Request, err)
			continue
		}
		if _, set := dd.Options["partitioned"]; !set {
			ix.Partitioned = dbPartitioned // the database's default
		}
		if !sameJSON(r.Index(dbPartitioned).JSON(), want.Index) {
			t.Errorf("index %s: Index() listed %s, CouchDB %s", a.Request, r.Index(dbPartitioned).JSON(), want.Index)
		}
		if !sameJSON(ix.JSON(), want.Index) {
			t.Errorf("index %s listed:\n got %s\nwant %s", a.Request, ix.JSON(), want.Index)
		}
		if !reflect.DeepEqual(ix.Fields, r.Fields) {
			t.Errorf("index %s: fields %v, request's %v", a.Request, ix.Fields, r.Fields)
		}
		if !sameJSON(AllDocsIndex().JSON(), want.AllDoc) {
			t.Errorf("_all_docs listed as %s, CouchDB %s", AllDocsIndex().JSON(), want.AllDoc)
		}
	}
}

func TestKeysAsCouchDB(t *testing.T) {
	answers := loadAnswers(t, "couchdb_keys.json")
	var dd struct {
		ID      string `json:"_id"`
		Views   map[string]struct{ Map json.RawMessage }
		Options map[string]any
	}
	if err := json.Unmarshal(answers[0].Answer, &dd); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers[1:] {
		ix, err := ParseIndexView(dd.ID, a.Request, dd.Views[a.Request].Map, dd.Options)
		if err != nil {
			t.Fatalf("%s: %v", a.Request, err)
		}
		var want []struct {
			ID  string
			Key json.RawMessage
		}
		if err := json.Unmarshal(a.Answer, &want); err != nil {
			t.Fatal(err)
		}
		wantKeys := map[string]json.RawMessage{}
		for _, r := range want {
			wantKeys[r.ID] = r.Key
		}
		for _, d := range keysDocs {
			// as a view's map gets it: decoded by encoding/json
			var doc map[string]any
			if err := json.Unmarshal([]byte(d), &doc); err != nil {
				t.Fatal(err)
			}
			id := doc["_id"].(string)
			key, ok := ix.Keys(doc)
			wk, wok := wantKeys[id]
			switch {
			case ok != wok:
				t.Errorf("index %s doc %s: indexed %v (%v), CouchDB %v (%s)", a.Request, id, ok, key, wok, wk)
			case ok && !sameJSON(marshal(t, key), wk):
				t.Errorf("index %s doc %s: key %s, CouchDB %s", a.Request, id, marshal(t, key), wk)
			}
			// and the same from this package's own decoding
			od, _ := decodeJSON([]byte(d))
			key2, ok2 := ix.Keys(od)
			if ok2 != ok || (ok && !sameJSON(marshal(t, key2), marshal(t, key))) {
				t.Errorf("index %s doc %s: Keys of an Object %v %v, of a map %v %v", a.Request, id, key2, ok2, key, ok)
			}
		}
	}
}

func TestFieldsAsCouchDB(t *testing.T) {
	answers := loadAnswers(t, "couchdb_fields.json")
	var doc map[string]any
	if err := json.Unmarshal(answers[0].Answer, &doc); err != nil {
		t.Fatal(err)
	}
	od, _ := decodeJSON(answers[0].Answer)
	for _, a := range answers[1:] {
		f, err := ParseFind([]byte(`{"selector":{},"fields":` + a.Request + `}`))
		if err != nil {
			t.Fatalf("fields %s: %v", a.Request, err)
		}
		fields := f.Fields
		err = f.ProjectionError()
		if a.Status != 200 {
			checkErr(t, "fields", err, a)
			continue
		}
		if err != nil {
			t.Errorf("fields %s: %v", a.Request, err)
		}
		got := Fields(od, fields)
		if !sameJSON(marshal(t, got), a.Answer) {
			t.Errorf("fields %s:\n got %s\nwant %s", a.Request, marshal(t, got), a.Answer)
		}
		// a map has no order: compare as values
		var w any
		_ = json.Unmarshal(a.Answer, &w)
		var g any
		_ = json.Unmarshal(marshal(t, Fields(doc, fields)), &g)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("fields %s of a map: got %v want %v", a.Request, g, w)
		}
	}
}

// TestMatchAsCouchDB runs the normalized selectors with the matcher over
// the docs CouchDB's _find ran them over.
func TestMatchAsCouchDB(t *testing.T) {
	var docs []map[string]any
	for _, d := range matchDocs {
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m)
	}
	for _, a := range loadAnswers(t, "couchdb_match.json") {
		v, _ := decodeJSON([]byte(a.Request))
		n, err := Normalize(v)
		if err != nil {
			t.Fatalf("%s: %v", a.Request, err)
		}
		s, err := Compile(n)
		if err != nil {
			t.Errorf("%s: normalized %s does not compile: %v", a.Request, marshal(t, n), err)
			continue
		}
		ids := []string{}
		for _, d := range docs {
			if s.Match(d) {
				ids = append(ids, d["_id"].(string))
			}
		}
		var want struct{ Find, Changes []string }
		if err := json.Unmarshal(a.Answer, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids, want.Changes) {
			t.Errorf("%s (normalized %s): matched %v, CouchDB's _changes filter %v", a.Request, marshal(t, n), ids, want.Changes)
		}
		if !reflect.DeepEqual(want.Find, want.Changes) && !reflect.DeepEqual(want.Find, []string{}) {
			t.Errorf("%s: CouchDB's _find found %v, its _changes filter %v", a.Request, want.Find, want.Changes)
		}
	}
}

func TestAddToAsCouchDB(t *testing.T) {
	for _, a := range loadAnswers(t, "couchdb_add.json") {
		var want struct {
			Before, Result, After json.RawMessage
		}
		if err := json.Unmarshal(a.Answer, &want); err != nil {
			t.Fatal(err)
		}
		body := a.Request[strings.LastIndex(a.Request, "} {")+2:]
		if !strings.HasPrefix(a.Request, "{") {
			body = strings.TrimSpace(a.Request)
		}
		r, err := ParseIndexRequest([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var before []byte
		if string(want.Before) != "null" {
			before = want.Before
		}
		doc, exists, err := r.AddTo(before)
		if a.Status != 200 {
			checkErr(t, "add", err, answer{Request: a.Request, Status: a.Status, Answer: want.Result})
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", a.Request, err)
			continue
		}
		var res struct{ Result string }
		_ = json.Unmarshal(want.Result, &res)
		if exists != (res.Result == "exists") {
			t.Errorf("%s: exists %v, CouchDB %s", a.Request, exists, want.Result)
		}
		if !sameJSON(doc, want.After) {
			t.Errorf("%s:\n got %s\nwant %s", a.Request, doc, want.After)
		}
	}
}

func TestParseIndexDesignAsCouchDB(t *testing.T) {
	answers := loadAnswers(t, "couchdb_designs.json")
	list := []json.RawMessage{AllDocsIndex().JSON()}
	for _, a := range answers[:len(answers)-1] {
		ixs, err := ParseIndexDesign(a.Answer, false)
		if err != nil {
			t.Fatalf("%s: %v", a.Answer, err)
		}
		for _, ix := range ixs {
			list = append(list, ix.JSON())
		}
	}
	checkJSON(t, "GET _index", list, answers[len(answers)-1].Answer)
}
