package mango

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSelector compiles a selector from user input and matches a document
// with it: a bad selector must be an *Error, and matching any JSON
// document must return, with the same answer every time.
func FuzzSelector(f *testing.F) {
	sels := []string{
		`{}`,
		`{"type":"user"}`,
		`{"type":{"$eq":"admin"}}`,
		`{"age":{"$gt":30}}`,
		`{"age":{"$gte":31,"$lt":32}}`,
		`{"age":{"$lte":30}}`,
		`{"age":{"$ne":31}}`,
		`{"name.first":"Ada"}`,
		`{"name":{"last":{"$in":["M","N"]}}}`,
		`{"tags":{"$nin":["z"]}}`,
		`{"missing":{"$exists":false}}`,
		`{"$or":[{"type":"admin"},{"age":31}]}`,
		`{"$and":[{"type":"user"},{"age":{"$lt":18}}]}`,
		`{"$not":{"type":"user"}}`,
		`{"$nor":[{"type":"admin"}]}`,
		`{"nil":{"$type":"null"}}`,
		`{"tags":{"$size":3}}`,
		`{"neg":{"$mod":[3,-1]}}`,
		`{"n":{"$mod":[-1,0]}}`,
		`{"name":{"$regex":"(?i)lovelace$"}}`,
		`{"name":{"$beginsWith":"Ada "}}`,
		`{"tags":{"$all":[["x","y","z"]]}}`,
		`{"people":{"$elemMatch":{"name":"Bob","age":{"$lt":18}}}}`,
		`{"nums":{"$elemMatch":{"$gt":5,"$lt":10}}}`,
		`{"people":{"$allMatch":{"age":{"$gte":17}}}}`,
		`{"m":{"$keyMapMatch":{"$regex":"^al"}}}`,
		`{"a\\.b":{"c.d":{"$exists":true}}}`,
		`{"a":{"b":{"$not":{"$elemMatch":{"$or":[{"c":1},{"$nor":[{"d":{"$type":"array"}}]}]}}}}}`,
		`{"$or":[{"n":{"$mod":[2,0]}},{"name":{"$regex":"lace$"}}]}`,
		`{"a":{"$text":"x"}}`,
		`{"a":{"$in":1}}`,
		`{"$gt":1}`,
		`[]`,
	}
	docs := []string{
		`{"_id":"a","type":"user","age":31,"name":{"first":"Ada","last":"L"},"tags":["x","y"],"nil":null,"ok":true}`,
		`{"_id":"b","name":"Ada Lovelace","n":7,"neg":-7,"f":7.5,"nil":null,"ok":false,"tags":["x","y","z"],"empty":[],` +
			`"nums":[3,8,12],"pairs":[[1,2],[3]],"people":[{"name":"Ann","age":30},{"name":"Bob","age":17}],"m":{"alpha":1,"beta":2},"em":{},"nl":"line\n"}`,
		`{"a.b":{"c":{"d":[1,{"c":1}]}},"a":{"b":{"c":1,"d":[]}}}`,
		`{"n":-9223372036854775808,"big":1e308,"huge":123456789012345678901234567890,"tiny":-1.5e-300,"z":-0}`,
		`{}`,
		`[]`,
		`null`,
		`"s"`,
		`true`,
	}
	for i, s := range sels {
		f.Add([]byte(s), []byte(docs[i%len(docs)]))
	}
	f.Fuzz(func(t *testing.T, sel, doc []byte) {
		s, err := Parse(sel)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("%s: error %T %v, want *Error", sel, err, err)
			}
			return
		}
		// as the replicator and _changes match: doc JSON decoded by MatchJSON
		got := s.MatchJSON(doc)
		if s.MatchJSON(doc) != got {
			t.Fatalf("%s on %s: two answers", sel, doc)
		}
		var sv, dv any
		if json.Unmarshal(sel, &sv) != nil {
			t.Fatalf("%s: parsed but does not decode", sel)
		}
		if json.Unmarshal(doc, &dv) != nil {
			if got {
				t.Fatalf("%s: invalid JSON %q matches", sel, doc)
			}
			return
		}
		if s.Match(dv) != got {
			t.Fatalf("%s on %s: Match and MatchJSON differ", sel, doc)
		}
		// $not, $nor, $or and $and of the selector alone (mango_selector.erl
		// match/3: not, none, any, all of one)
		wrap := func(op string, v any) bool {
			w, err := Compile(map[string]any{op: v})
			if err != nil {
				t.Fatalf("%s of %s: %v", op, sel, err)
			}
			return w.Match(dv)
		}
		// (not for {}: as an operator's argument it is {"$eq":{}},
		// see compileSub)
		if o, ok := sv.(map[string]any); ok && len(o) == 0 {
			return
		}
		if wrap("$not", sv) != !got || wrap("$nor", []any{sv}) != !got ||
			wrap("$or", []any{sv}) != got || wrap("$and", []any{sv}) != got {
			t.Fatalf("%s on %s: $not/$nor/$or/$and of it disagree with %v", sel, doc, got)
		}
		// Compile also takes json.Number values (UseNumber); it must not
		// panic on them either
		dec := json.NewDecoder(bytes.NewReader(sel))
		dec.UseNumber()
		var nsv, ndv any
		if dec.Decode(&nsv) != nil {
			return
		}
		ns, err := Compile(nsv)
		if err != nil {
			return
		}
		dec = json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&ndv) == nil {
			ns.Match(ndv)
		}
	})
}
