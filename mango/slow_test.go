package mango

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLargeInputs reads bodies that a careless parser reads in quadratic
// time or more, or overflows its stack on: each must be answered in well
// under a second (10 s leaves room for -race and a busy machine).
func TestLargeInputs(t *testing.T) {
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	deepObj := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	var keys strings.Builder
	keys.WriteString("{")
	for i := range 20000 {
		if i > 0 {
			keys.WriteString(",")
		}
		keys.WriteString(`"k` + strconv.Itoa(i%15000) + `":1`) // some repeated
	}
	keys.WriteString("}")
	cases := map[string]string{
		"sort deep":     `{"selector":{},"sort":[` + deep + `]}`,
		"selector deep": `{"selector":` + deepObj + `}`,
		"$in deep":      `{"selector":{"a":{"$in":` + deep + `}}}`,
		"many keys":     `{"selector":` + keys.String() + `}`,
		"regex":         `{"selector":{"a":{"$regex":"` + strings.Repeat(`(?=a)\\1x*+`, 2000) + `"}}}`,
		"filter deep":   `{"index":{"fields":["a"],"partial_filter_selector":` + deepObj + `}}`,
		"$not deep":     `{"selector":` + strings.Repeat(`{"$not":`, 3000) + `{"a":1}` + strings.Repeat("}", 3000) + `}`,
		"too deep":      `{"selector":{"a":{"$in":` + strings.Repeat("[", maxDepth+10) + strings.Repeat("]", maxDepth+10) + `}}}`,
	}
	for name, body := range cases {
		start := time.Now()
		_, err := ParseFind([]byte(body))
		_, _ = ParseIndexRequest([]byte(body))
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: %v", name, d)
		}
		if name == "too deep" {
			if re, ok := err.(*RequestError); !ok || re.Err != "bad_request" {
				t.Errorf("%s: %v, want bad_request", name, err)
			}
		}
	}
}
