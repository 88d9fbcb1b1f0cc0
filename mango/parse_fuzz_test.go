package mango

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseRequests reads _find and _index bodies from user input: it
// must not panic, a refusal must be a *RequestError with a status and
// an error name, and what is accepted must encode (the selector, the
// design doc) and read back (the index from its design doc's view).
func FuzzParseRequests(f *testing.F) {
	for _, s := range findCases {
		f.Add([]byte(s))
	}
	for _, s := range indexCases {
		f.Add([]byte(s))
	}
	checkErr := func(t *testing.T, body []byte, err error) {
		var re *RequestError
		if !errors.As(err, &re) || re.Status == 0 || re.Err == "" {
			t.Fatalf("%s: error %T %v, want a *RequestError", body, err, err)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if fd, err := ParseFind(body); err != nil {
			checkErr(t, body, err)
		} else {
			if _, err := json.Marshal(fd.Selector); err != nil {
				t.Fatalf("%s: selector does not encode: %v", body, err)
			}
			if err := fd.ProjectionError(); err != nil {
				checkErr(t, body, err)
			}
		}
		r, err := ParseIndexRequest(body)
		if err != nil {
			checkErr(t, body, err)
			return
		}
		var dd struct {
			Views   map[string]struct{ Map json.RawMessage }
			Options map[string]any
		}
		if err := json.Unmarshal(r.DesignDoc(), &dd); err != nil {
			t.Fatalf("%s: design doc %s: %v", body, r.DesignDoc(), err)
		}
		ix, err := ParseIndexView(r.DDoc, r.Name, dd.Views[r.Name].Map, dd.Options)
		if err != nil {
			t.Fatalf("%s: its view does not read back: %v", body, err)
		}
		if !json.Valid(ix.JSON()) {
			t.Fatalf("%s: listed as %s", body, ix.JSON())
		}
		ix.Keys(map[string]any{"_id": "x", "a": 1.0})
		if string(r.Index(false).JSON()) != string(ix.JSON()) {
			t.Fatalf("%s: Index() %s, read back %s", body, r.Index(false).JSON(), ix.JSON())
		}
	})
}
