package mango

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
)

// answer is one recorded exchange with CouchDB 3.5.2.
type answer struct {
	Request string          `json:"request"`
	Status  int             `json:"status"`
	Answer  json.RawMessage `json:"answer"`
}

// couch is a CouchDB to ask.
type couch struct {
	t    testing.TB
	base string // with credentials
}

// couchFor is a CouchDB to record from or check against: the one at
// $MANGO_COUCHDB_URL (http://user:pw@host:port), else one testcouch
// starts (the test is skipped when there is none).
func couchFor(t testing.TB) *couch {
	if u := os.Getenv("MANGO_COUCHDB_URL"); u != "" {
		return &couch{t: t, base: strings.TrimRight(u, "/")}
	}
	s := testcouch.Start(t, "")
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(s.User, s.Password)
	return &couch{t: t, base: u.String()}
}

func (c *couch) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, bytes.TrimSpace(b)
}

// freshDB creates the database name (with a query string, its options).
func (c *couch) freshDB(name string) {
	c.t.Helper()
	c.do("DELETE", "/"+strings.Split(name, "?")[0], "")
	for try := 0; ; try++ {
		st, b := c.do("PUT", "/"+name, "")
		if st == 201 {
			return
		}
		if st != 412 || try == 50 {
			c.t.Fatalf("PUT /%s: %d %s", name, st, b)
		}
		// the DELETE before is not quite done on every shard yet
		time.Sleep(100 * time.Millisecond)
		c.do("DELETE", "/"+strings.Split(name, "?")[0], "")
	}
}

// errBody keeps a CouchDB error's "error" and "reason" ("ref" is a
// hash of the crash, different every time).
func errBody(t testing.TB, b []byte) json.RawMessage {
	var e struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	return marshal(t, e)
}

func marshal(t testing.TB, v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// member is one member of a JSON object, kept as its text.
func member(t testing.TB, b []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m[key]
}

func (c *couch) recordSelectors() []answer {
	c.freshDB("mango_sel")
	var out []answer
	for _, s := range selectorCases {
		st, b := c.do("POST", "/mango_sel/_explain", `{"selector":`+s+`}`)
		a := answer{Request: s, Status: st}
		if st == 200 {
			a.Answer = member(c.t, b, "selector")
		} else {
			a.Answer = errBody(c.t, b)
		}
		out = append(out, a)
	}
	return out
}

func (c *couch) recordFind() []answer {
	c.freshDB("mango_find")
	var out []answer
	for _, s := range findCases {
		st, b := c.do("POST", "/mango_find/_explain", s)
		a := answer{Request: s, Status: st}
		if st == 200 {
			a.Answer = marshal(c.t, map[string]json.RawMessage{"selector": member(c.t, b, "selector"), "opts": member(c.t, b, "opts")})
		} else {
			a.Answer = errBody(c.t, b)
		}
		out = append(out, a)
	}
	return out
}

func (c *couch) recordIndex() []answer { return c.recordIndexIn(indexCases, "mango_idx", "") }

// recordPartitioned records partitionedCases on partitioned databases.
func (c *couch) recordPartitioned() []answer {
	return c.recordIndexIn(partitionedCases, "mango_pidx", "?partitioned=true")
}

func (c *couch) recordIndexIn(cases []string, prefix, create string) []answer {
	var out []answer
	for i, s := range cases {
		db := fmt.Sprintf("%s%02d", prefix, i)
		c.freshDB(db + create)
		st, b := c.do("POST", "/"+db+"/_index", s)
		a := answer{Request: s, Status: st}
		if st != 200 {
			a.Answer = errBody(c.t, b)
			out = append(out, a)
			c.do("DELETE", "/"+db, "")
			continue
		}
		var res struct{ Result, ID, Name string }
		if err := json.Unmarshal(b, &res); err != nil {
			c.t.Fatal(err)
		}
		_, dd := c.do("GET", "/"+db+"/"+res.ID, "")
		var ddoc Object
		v, err := decodeJSON(dd)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, m := range v.(Object) {
			if m.Key != "_rev" {
				ddoc = append(ddoc, m)
			}
		}
		_, list := c.do("GET", "/"+db+"/_index", "")
		var l struct{ Indexes []json.RawMessage }
		if err := json.Unmarshal(list, &l); err != nil {
			c.t.Fatal(err)
		}
		var entry json.RawMessage
		for _, e := range l.Indexes {
			var x struct{ DDoc, Name string }
			_ = json.Unmarshal(e, &x)
			if x.DDoc == res.ID && x.Name == res.Name {
				entry = e
			}
		}
		a.Answer = marshal(c.t, map[string]any{"result": json.RawMessage(b), "ddoc": ddoc,
			"index": entry, "all_docs": l.Indexes[0]})
		out = append(out, a)
		c.do("DELETE", "/"+db, "")
	}
	return out
}

func (c *couch) recordKeys() []answer {
	c.freshDB("mango_keys")
	for _, ix := range keysIndexes {
		if st, b := c.do("POST", "/mango_keys/_index", ix); st != 200 {
			c.t.Fatalf("%s: %d %s", ix, st, b)
		}
	}
	if st, b := c.do("POST", "/mango_keys/_bulk_docs", `{"docs":[`+strings.Join(keysDocs, ",")+`]}`); st != 201 {
		c.t.Fatalf("_bulk_docs: %d %s", st, b)
	}
	_, dd := c.do("GET", "/mango_keys/_design/k", "")
	out := []answer{{Request: "_design/k", Status: 200, Answer: dd}}
	for _, ix := range keysIndexes {
		var r struct{ Name string }
		_ = json.Unmarshal([]byte(ix), &r)
		st, b := c.do("GET", "/mango_keys/_design/k/_view/"+r.Name+"?reduce=false", "")
		out = append(out, answer{Request: r.Name, Status: st, Answer: member(c.t, b, "rows")})
	}
	return out
}

func (c *couch) recordFields() []answer {
	c.freshDB("mango_fields")
	if st, b := c.do("PUT", "/mango_fields/f1", fieldsDoc); st != 201 {
		c.t.Fatalf("PUT f1: %d %s", st, b)
	}
	_, doc := c.do("GET", "/mango_fields/f1", "")
	out := []answer{{Request: "f1", Status: 200, Answer: doc}}
	for _, f := range fieldsCases {
		st, b := c.do("POST", "/mango_fields/_find", `{"selector":{"_id":"f1"},"fields":`+f+`}`)
		a := answer{Request: f, Status: st}
		if st == 200 {
			var r struct{ Docs []json.RawMessage }
			if err := json.Unmarshal(b, &r); err != nil || len(r.Docs) != 1 {
				c.t.Fatalf("%s: %s", f, b)
			}
			a.Answer = r.Docs[0]
		} else {
			a.Answer = errBody(c.t, b)
		}
		out = append(out, a)
	}
	return out
}

func (c *couch) recordMatch() []answer {
	c.freshDB("mango_match")
	if st, b := c.do("POST", "/mango_match/_bulk_docs", `{"docs":[`+strings.Join(matchDocs, ",")+`]}`); st != 201 {
		c.t.Fatalf("_bulk_docs: %d %s", st, b)
	}
	var out []answer
	for _, s := range matchSelectors {
		// _changes?filter=_selector matches every doc with the selector;
		// _find plans first (and finds nothing for an empty $and or $or)
		st, b := c.do("POST", "/mango_match/_find", `{"selector":`+s+`,"fields":["_id"],"limit":1000}`)
		st2, b2 := c.do("POST", "/mango_match/_changes?filter=_selector", `{"selector":`+s+`}`)
		if st != 200 || st2 != 200 {
			c.t.Fatalf("%s: _find %d %s, _changes %d %s", s, st, b, st2, b2)
		}
		var r struct {
			Docs []struct {
				ID string `json:"_id"`
			}
		}
		var ch struct{ Results []struct{ ID string } }
		if json.Unmarshal(b, &r) != nil || json.Unmarshal(b2, &ch) != nil {
			c.t.Fatalf("%s: %s %s", s, b, b2)
		}
		found, changed := []string{}, []string{}
		for _, d := range r.Docs {
			found = append(found, d.ID)
		}
		for _, d := range ch.Results {
			changed = append(changed, d.ID)
		}
		sort.Strings(changed)
		out = append(out, answer{Request: s, Status: st, Answer: marshal(c.t, map[string][]string{"find": found, "changes": changed})})
	}
	return out
}

func (c *couch) recordAdd() []answer {
	var out []answer
	for i, ac := range addCases {
		db := fmt.Sprintf("mango_add%02d", i)
		c.freshDB(db)
		before := json.RawMessage("null")
		if ac[0] != "" {
			if st, b := c.do("PUT", "/"+db+"/_design/x", ac[0]); st != 201 {
				c.t.Fatalf("PUT %s: %d %s", ac[0], st, b)
			}
			before = c.ddoc("/" + db + "/_design/x")
		}
		st, b := c.do("POST", "/"+db+"/_index", ac[1])
		a := answer{Request: ac[0] + " " + ac[1], Status: st}
		res := json.RawMessage(b)
		if st != 200 {
			res = errBody(c.t, b)
		}
		a.Answer = marshal(c.t, map[string]json.RawMessage{"before": before, "result": res, "after": c.ddoc("/" + db + "/_design/x")})
		out = append(out, a)
		c.do("DELETE", "/"+db, "")
	}
	return out
}

// ddoc is a doc without its _rev (null when there is none).
func (c *couch) ddoc(path string) json.RawMessage {
	st, b := c.do("GET", path, "")
	if st != 200 {
		return json.RawMessage("null")
	}
	v, err := decodeJSON(b)
	if err != nil {
		c.t.Fatal(err)
	}
	var d Object
	for _, m := range v.(Object) {
		if m.Key != "_rev" {
			d = append(d, m)
		}
	}
	return marshal(c.t, d)
}

func (c *couch) recordDesigns() []answer {
	c.freshDB("mango_ddocs")
	var out []answer
	for _, d := range designCases {
		var id struct {
			ID string `json:"_id"`
		}
		_ = json.Unmarshal([]byte(d), &id)
		if st, b := c.do("PUT", "/mango_ddocs/"+id.ID, d); st != 201 {
			c.t.Fatalf("PUT %s: %d %s", id.ID, st, b)
		}
		out = append(out, answer{Request: d, Status: 201, Answer: c.ddoc("/mango_ddocs/" + id.ID)})
	}
	st, b := c.do("GET", "/mango_ddocs/_index", "")
	return append(out, answer{Request: "_index", Status: st, Answer: member(c.t, b, "indexes")})
}

// recordings are the files in testdata and how to ask CouchDB for them.
var recordings = []struct {
	file string
	ask  func(*couch) []answer
}{
	{"couchdb_selectors.json", (*couch).recordSelectors},
	{"couchdb_find.json", (*couch).recordFind},
	{"couchdb_index.json", (*couch).recordIndex},
	{"couchdb_keys.json", (*couch).recordKeys},
	{"couchdb_fields.json", (*couch).recordFields},
	{"couchdb_match.json", (*couch).recordMatch},
	{"couchdb_add.json", (*couch).recordAdd},
	{"couchdb_partitioned.json", (*couch).recordPartitioned},
	{"couchdb_designs.json", (*couch).recordDesigns},
}

func loadAnswers(t testing.TB, file string) []answer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []answer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecordCouchDB writes testdata/couchdb_*.json from a live CouchDB
// when MANGO_RECORD=1.
func TestRecordCouchDB(t *testing.T) {
	if os.Getenv("MANGO_RECORD") != "1" {
		t.Skip("MANGO_RECORD=1 records CouchDB's answers into testdata")
	}
	c := couchFor(t)
	for _, r := range recordings {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r.ask(c)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", r.file), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLiveCouchDB asks a live CouchDB 3.5.2 again and checks its answers
// are still the recorded ones (skipped when there is none to start).
func TestLiveCouchDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no live CouchDB")
	}
	c := couchFor(t)
	for _, r := range recordings {
		want := loadAnswers(t, r.file)
		got := r.ask(c)
		if len(got) != len(want) {
			t.Errorf("%s: %d answers, recorded %d (re-record with MANGO_RECORD=1)", r.file, len(got), len(want))
			continue
		}
		for i := range got {
			if got[i].Request != want[i].Request || got[i].Status != want[i].Status || !sameJSON(got[i].Answer, want[i].Answer) {
				t.Errorf("%s %s: CouchDB now answers %d %s, recorded %d %s", r.file, got[i].Request,
					got[i].Status, got[i].Answer, want[i].Status, want[i].Answer)
			}
		}
	}
}

// sameJSON compares two JSON texts as written, but for whitespace.
func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}
