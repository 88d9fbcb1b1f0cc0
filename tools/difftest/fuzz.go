package difftest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
)

// Fuzz generates n sequences of steps requests each, from seed: the same
// seed gives the same sequences. Each starts with a q=1 database (so that
// row and change order does not depend on how shards interleave) and a
// few docs, then draws requests from the grammar below: an endpoint, a
// method, parameters with valid and invalid values, and a body. Revs the
// answers give are bound per doc ({rev_ID}) and used by later requests, so
// a sequence edits the same documents on both sides.
func Fuzz(seed uint64, n, steps int, mode string) []Sequence {
	out := make([]Sequence, 0, n)
	for i := range n {
		// one stream per sequence, so sequence i is the same whatever n is
		g := &gen{r: rand.New(rand.NewPCG(seed, uint64(i))), cluster: mode == "cluster"}
		out = append(out, g.sequence(fmt.Sprintf("fuzz-%d-%d", seed, i), steps))
	}
	return out
}

type gen struct {
	r       *rand.Rand
	cluster bool
}

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }

// ids are the doc ids sequences work on: plain ones, one that needs
// escaping, a design doc, a local doc, and bad ones.
var fuzzIDs = []string{"d1", "d2", "d3", "d4", "a%2Fb", "_design/dd", "_local/l1"}
var badIDs = []string{"_bad", "_design/", "%C3%A9", "nope", "_local/"}

func (g *gen) id() string {
	if g.chance(0.15) {
		return g.pick(badIDs...)
	}
	return g.pick(fuzzIDs...)
}

func revVar(id string) string {
	return "{rev_" + strings.NewReplacer("%2F", "_", "/", "_", "%", "_").Replace(id) + "}"
}

func bindName(id string) string { r := revVar(id); return r[1 : len(r)-1] }

func (g *gen) rev(id string) string {
	switch g.r.IntN(6) {
	case 0:
		return "1-0123456789abcdef0123456789abcdef"
	case 1:
		return g.pick("bad", "1-", "0-1", "-1-abc", "")
	default:
		return revVar(id)
	}
}

func (g *gen) boolVal() string { return g.pick("true", "false", "true", "false", "maybe", "1", "") }
func (g *gen) intVal() string  { return g.pick("0", "1", "2", "5", "100", "-1", "abc", "1.5", "") }

func (g *gen) jsonKey() string {
	switch g.r.IntN(6) {
	case 0:
		return g.pick("1", "null", "[\"d1\"]", "{}", "nope", "\"")
	default:
		return `"` + g.pick("d1", "d2", "d3", "d4", "a", "z", "_design/dd") + `"`
	}
}

// value is a random JSON value, small.
func (g *gen) value(depth int) any {
	switch k := g.r.IntN(8); {
	case k == 0:
		return nil
	case k == 1:
		return g.chance(0.5)
	case k == 2:
		return g.r.IntN(1000) - 500
	case k == 3:
		return g.r.Float64()*1000 - 500
	case k == 4 && depth < 3:
		a := make([]any, g.r.IntN(4))
		for i := range a {
			a[i] = g.value(depth + 1)
		}
		return a
	case k == 5 && depth < 3:
		return g.object(depth + 1)
	default:
		return g.pick("", "x", "é中", "hello world", "\u0000", "\ud7ff")
	}
}

func (g *gen) object(depth int) map[string]any {
	o := map[string]any{}
	for range g.r.IntN(4) {
		o[g.pick("a", "b", "n", "s", "nested", "list", "_x")] = g.value(depth)
	}
	return o
}

func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// docBody is a doc for id: sometimes with its bound rev, deleted, with an
// inline attachment, or with a bad special member.
func (g *gen) docBody(id string, withID bool) map[string]any {
	o := g.object(1)
	delete(o, "_x")
	if withID {
		o["_id"] = strings.ReplaceAll(id, "%2F", "/")
	}
	if g.chance(0.5) {
		o["_rev"] = g.rev(id)
	}
	switch g.r.IntN(10) {
	case 0:
		o["_deleted"] = true
	case 1:
		o["_attachments"] = map[string]any{g.pick("f.bin", "t.txt"): map[string]any{
			"content_type": g.pick("application/octet-stream", "text/plain"), "data": g.pick("AAECAw==", "aGVsbG8=", "!!")}}
	case 2:
		o[g.pick("_foo", "_revisions", "_attachments")] = g.value(2)
	}
	return o
}

func (g *gen) query(params map[string]func() string) string {
	var parts []string
	for _, k := range sortedKeys(params) {
		if g.chance(0.25) {
			parts = append(parts, k+"="+params[k]())
		}
	}
	if g.chance(0.05) {
		parts = append(parts, "nonsense=1")
	}
	if len(parts) == 0 {
		return ""
	}
	g.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "?" + strings.Join(parts, "&")
}

func sortedKeys(m map[string]func() string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	// map order is random: sorted, a seed gives one sequence
	sort.Strings(ks)
	return ks
}

func (g *gen) sequence(name string, steps int) Sequence {
	s := Sequence{Name: name}
	s.Steps = append(s.Steps, Step{Method: "PUT", Path: "/{db}?q=1"})
	for _, id := range []string{"d1", "d2"} {
		s.Steps = append(s.Steps, Step{Method: "PUT", Path: "/{db}/" + id, Body: raw(map[string]any{"seed": id}),
			Bind: map[string]string{bindName(id): "/rev"}})
	}
	for range steps {
		s.Steps = append(s.Steps, g.step())
	}
	return s
}

// step draws one request of the grammar.
func (g *gen) step() Step {
	id := g.id()
	docParams := map[string]func() string{
		"rev": func() string { return g.rev(id) }, "revs": g.boolVal, "revs_info": g.boolVal,
		"conflicts": g.boolVal, "deleted_conflicts": g.boolVal, "latest": g.boolVal, "local_seq": g.boolVal,
		"meta": g.boolVal, "attachments": g.boolVal, "att_encoding_info": g.boolVal,
		"open_revs":  func() string { return g.pick("all", "[\""+g.rev(id)+"\"]", "bad", "[]", "[1]") },
		"atts_since": func() string { return g.pick("[\""+g.rev(id)+"\"]", "bad") },
	}
	viewParams := map[string]func() string{
		"key": g.jsonKey, "startkey": g.jsonKey, "endkey": g.jsonKey, "start_key": g.jsonKey,
		"keys":  func() string { return g.pick(`["d1","zz"]`, `[]`, `"d1"`, `nope`) },
		"limit": g.intVal, "skip": g.intVal, "descending": g.boolVal, "include_docs": g.boolVal,
		"inclusive_end": g.boolVal, "conflicts": g.boolVal, "update_seq": g.boolVal,
		"startkey_docid": func() string { return g.pick("d1", "d3") },
	}
	changesParams := map[string]func() string{
		"since": func() string { return g.pick("0", "now", "garbage", "-1") }, "limit": g.intVal,
		"descending": g.boolVal, "include_docs": g.boolVal, "conflicts": g.boolVal,
		"style": func() string { return g.pick("main_only", "all_docs", "nope") },
		"feed":  func() string { return g.pick("normal", "longpoll", "nope") },
		"filter": func() string {
			return g.pick("_doc_ids", "_selector", "_design", "_view", "nope/x", "bad")
		},
		"doc_ids": func() string { return g.pick(`["d1"]`, `nope`, `[1]`) },
	}
	w := g.r.IntN(100)
	switch {
	case w < 22: // read a doc
		m := g.pick("GET", "GET", "GET", "HEAD")
		return Step{Method: m, Path: "/{db}/" + id + g.query(docParams)}
	case w < 40: // write a doc
		st := Step{Method: "PUT", Path: "/{db}/" + id, Body: raw(g.docBody(id, g.chance(0.2))),
			Bind: map[string]string{bindName(id): "/rev"}}
		if g.chance(0.15) {
			st.Path += g.pick("?batch=ok", "?new_edits=false", "?rev="+g.rev(id))
			delete(st.Bind, bindName(id))
		}
		if g.chance(0.08) {
			st.Body, st.Raw = nil, ptr(g.pick(`{"a":`, `[1]`, `"s"`, ``, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}"))
		}
		return st
	case w < 48: // delete, copy
		if g.chance(0.7) {
			return Step{Method: "DELETE", Path: "/{db}/" + id + "?rev=" + g.rev(id), Bind: map[string]string{bindName(id): "/rev"}}
		}
		return Step{Method: "COPY", Path: "/{db}/" + id, Headers: map[string]string{"Destination": g.pick("d3", "d4", "_local/l2", "_bad", "d3?rev="+g.rev("d3"))}}
	case w < 54: // attachments
		att := g.pick("f.bin", "t.txt", "nope")
		switch g.r.IntN(3) {
		case 0:
			return Step{Method: "PUT", Path: "/{db}/" + id + "/" + att + "?rev=" + g.rev(id), Raw: ptr("0123456789"),
				Headers: map[string]string{"Content-Type": g.pick("application/octet-stream", "text/plain", "")}, Bind: map[string]string{bindName(id): "/rev"}}
		case 1:
			return Step{Method: "DELETE", Path: "/{db}/" + id + "/" + att + "?rev=" + g.rev(id), Bind: map[string]string{bindName(id): "/rev"}}
		default:
			st := Step{Method: g.pick("GET", "HEAD"), Path: "/{db}/" + id + "/" + att}
			if g.chance(0.3) {
				st.Headers = map[string]string{"Range": g.pick("bytes=0-3", "bytes=5-", "bytes=-2", "bytes=50-60", "junk")}
			}
			return st
		}
	case w < 64: // all_docs and friends
		ep := g.pick("_all_docs", "_all_docs", "_design_docs", "_local_docs")
		if g.chance(0.3) {
			return Step{Method: "POST", Path: "/{db}/" + ep, Body: raw(map[string]any{"keys": g.pick2([]any{"d1", "zz"}, "x", []any{1})})}
		}
		return Step{Method: "GET", Path: "/{db}/" + ep + g.query(viewParams)}
	case w < 72: // changes
		q := g.query(changesParams)
		if strings.Contains(q, "feed=longpoll") {
			q += "&timeout=50"
		}
		if g.chance(0.2) {
			return Step{Method: "POST", Path: "/{db}/_changes" + q, Body: raw(map[string]any{
				g.pick("doc_ids", "selector"): g.pick2([]any{"d1"}, map[string]any{"a": map[string]any{"$gt": 0}}, "x")})}
		}
		return Step{Method: "GET", Path: "/{db}/_changes" + q}
	case w < 80: // bulk
		switch g.r.IntN(4) {
		case 0, 1:
			docs := make([]any, 1+g.r.IntN(3))
			for i := range docs {
				docs[i] = g.docBody(g.pick(fuzzIDs[:4]...), true)
			}
			body := map[string]any{"docs": docs}
			if g.chance(0.2) {
				body["new_edits"] = g.pick2(false, "maybe")
			}
			return Step{Method: "POST", Path: "/{db}/_bulk_docs", Body: raw(body)}
		case 2:
			return Step{Method: "POST", Path: "/{db}/_bulk_get" + g.query(map[string]func() string{"revs": g.boolVal, "latest": g.boolVal, "attachments": g.boolVal}),
				Body: raw(map[string]any{"docs": []any{map[string]any{"id": g.pick("d1", "d2", "nope")}, map[string]any{"id": "d1", "rev": g.rev("d1")}}})}
		default:
			return Step{Method: "POST", Path: "/{db}/" + g.pick("_revs_diff", "_missing_revs"),
				Body: raw(map[string]any{g.pick("d1", "d2", "nope"): []any{g.rev("d1"), "1-0123456789abcdef0123456789abcdef"}})}
		}
	case w < 86: // mango
		sel := map[string]any{g.pick("a", "b", "n", "seed"): g.pick2(map[string]any{"$gt": 0}, map[string]any{"$exists": true}, "d1", map[string]any{"$bogus": 1})}
		body := map[string]any{"selector": sel}
		if g.chance(0.3) {
			body["limit"] = g.pick2(1, "x", -1)
		}
		if g.chance(0.2) {
			body["fields"] = g.pick2([]any{"_id"}, "x")
		}
		return Step{Method: "POST", Path: "/{db}/" + g.pick("_find", "_find", "_explain"), Body: raw(body), Ignore: []string{"/bookmark", "/index_candidates", "/selector_hints"}}
	case w < 92: // database-level
		switch g.r.IntN(5) {
		case 0:
			return Step{Method: g.pick("GET", "HEAD"), Path: "/{db}"}
		case 1:
			return Step{Method: g.pick("GET", "PUT"), Path: "/{db}/_revs_limit", Raw: ptr(g.pick("10", "0", "x", "\"5\""))}
		case 2:
			return Step{Method: g.pick("GET", "PUT"), Path: "/{db}/_security", Body: raw(g.pick2(map[string]any{}, map[string]any{"members": map[string]any{"names": []any{"x"}}}, []any{}))}
		case 3:
			return Step{Method: "POST", Path: "/{db}/" + g.pick("_ensure_full_commit", "_view_cleanup", "_compact"), Body: raw(map[string]any{})}
		default:
			return Step{Method: g.pick("PATCH", "POST", "PUT"), Path: "/{db}/" + g.pick("_all_docs", "_changes", "_bulk_docs", "_nope", "_security")}
		}
	default: // server
		switch g.r.IntN(4) {
		case 0:
			return Step{Method: "GET", Path: "/_uuids" + g.query(map[string]func() string{"count": g.intVal})}
		case 1:
			return Step{Method: "GET", Path: "/_all_dbs?startkey=\"{db}\"&endkey=\"{db}\\ufff0\"" + strings.Replace(g.query(viewParams), "?", "&", 1)}
		case 2:
			return Step{Method: g.pick("GET", "POST", "DELETE"), Path: g.pick("/_up", "/_session", "/_membership", "/_active_tasks")}
		default:
			return Step{Method: "GET", Path: "/" + url.PathEscape(g.pick("_nope", "Bad", "dt-no-such-db"))}
		}
	}
}

func (g *gen) pick2(xs ...any) any { return xs[g.r.IntN(len(xs))] }

func ptr(s string) *string { return &s }
