package mango

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestMatch(t *testing.T) {
	doc := `{"_id":"a","type":"user","age":31,"name":{"first":"Ada","last":"L"},"tags":["x","y"],"nil":null,"ok":true}`
	cases := []struct {
		sel  string
		want bool
	}{
		{`{}`, true},
		{`{"type":"user"}`, true},
		{`{"type":{"$eq":"admin"}}`, false},
		{`{"age":{"$gt":30}}`, true},
		{`{"age":{"$gte":31,"$lt":32}}`, true},
		{`{"age":{"$lte":30}}`, false},
		{`{"age":{"$ne":31}}`, false},
		{`{"missing":{"$ne":1}}`, false},
		{`{"name.first":"Ada"}`, true},
		{`{"name":{"last":"L"}}`, true},
		{`{"name":{"last":{"$in":["M","N"]}}}`, false},
		{`{"tags":{"$in":["y"]}}`, true},
		{`{"tags":{"$nin":["z"]}}`, true},
		{`{"missing":{"$exists":false}}`, true},
		{`{"nil":{"$exists":true}}`, true},
		{`{"$or":[{"type":"admin"},{"age":31}]}`, true},
		{`{"$and":[{"type":"user"},{"age":{"$lt":18}}]}`, false},
		{`{"$not":{"type":"user"}}`, false},
		{`{"type":{"$gt":null}}`, true},
		{`{"ok":{"$lt":0}}`, true},
		{`{"$nor":[{"type":"admin"}]}`, true},
	}
	var d any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		s, err := Parse([]byte(c.sel))
		if err != nil {
			t.Fatalf("%s: %v", c.sel, err)
		}
		if got := s.Match(d); got != c.want {
			t.Errorf("%s: got %v want %v", c.sel, got, c.want)
		}
	}
}

func TestBadSelectors(t *testing.T) {
	for _, s := range []string{`[]`, `{"$gt":1}`, `{"a":{"$in":1}}`, `{"a":{"$exists":1}}`, `{"a":{"$regex":"x"}}`, `{"$or":{}}`, `nope`} {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("%s: want an error", s)
		}
	}
}

// TestErrorReasons: a selector that does not compile says why in CouchDB's
// words (mango_error), which _changes?filter=_selector answers as its
// reason.
func TestErrorReasons(t *testing.T) {
	for _, c := range []struct{ sel, reason string }{
		{`[]`, "Selector error: expected a JSON object"},
		{`{"a":{"$foo":1}}`, "Invalid operator: $foo"},
		{`{"$foo":1}`, "Invalid operator: $foo"},
		{`{"a":{"$regex":"x"}}`, "Unsupported operator: $regex"},
		{`{"$gt":1}`, "One or more conditions is missing a field name."},
		{`{"a":{"$in":1}}`, "Bad argument for operator $in: 1"},
		{`{"a":{"$exists":"yes"}}`, `Bad argument for operator $exists: "yes"`},
		{`{"$or":{}}`, "Bad argument for operator $or: {}"},
		{`{"$not":[1]}`, "Bad argument for operator $not: [1]"},
	} {
		_, err := Parse([]byte(c.sel))
		var e *Error
		if !errors.As(err, &e) || e.Reason != c.reason {
			t.Errorf("%s: %v, want %q", c.sel, err, c.reason)
		}
	}
}
