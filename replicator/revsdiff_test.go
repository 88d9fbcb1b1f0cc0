package replicator

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The walker reads _revs_diff answers as encoding/json does, and gives up
// (for encoding/json to take or explain) on anything else.
func TestParseRevsDiff(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{}`, true},
		{` { "a" : { "missing" : [ "1-x" , "2-y" ] , "possible_ancestors" : ["1-w"] } , "b":{"missing":["3-z"]}} `, true},
		{`{"q\"<\u00e9>":{"missing":["1-\u0078"],"other":{"n":[1,2]}}}`, true},
		{`{"a":{"missing":null}}`, false},
		{`{"a":{"\u006dissing":["1-x"]}}`, false},
		{`{"a":{"missing":[1]}}`, false},
		{`{"a":"b"}`, false},
		{`[]`, false},
	} {
		got, ok := parseRevsDiff([]byte(tc.in))
		if ok != tc.ok {
			t.Fatalf("%s: ok %v, want %v", tc.in, ok, tc.ok)
		}
		if !ok {
			continue
		}
		want := map[string]RevDiff{}
		if err := json.Unmarshal([]byte(tc.in), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %#v, want %#v", tc.in, got, want)
		}
	}
}
