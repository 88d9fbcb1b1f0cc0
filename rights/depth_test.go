package rights_test

import (
	"strings"
	"testing"

	"github.com/settee/settee/rights"
)

// A value nested deeper than the gateway accepts (docjson's 512 levels) is
// refused by each parse, not followed down the stack.
func TestNestingBound(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name  string
		parse func([]byte) error
		body  func(n int) string
	}{
		{"user doc", func(b []byte) error { _, err := rights.ParseUserDoc(b); return err },
			func(n int) string { return `{"name":"u","x":` + nest(n) + `}` }},
		{"security", func(b []byte) error { _, err := rights.ParseSecurity(b); return err },
			func(n int) string { return `{"admins":{"names":[]},"x":` + nest(n) + `}` }},
		{"dedupe", func(b []byte) error { _, err := rights.Dedupe(b); return err },
			func(n int) string { return `{"x":` + nest(n) + `}` }},
	} {
		if err := tc.parse([]byte(tc.body(500))); err != nil {
			t.Errorf("%s nested 500 deep: %v, want it read", tc.name, err)
		}
		if err := tc.parse([]byte(tc.body(100000))); err == nil {
			t.Errorf("%s nested 100000 deep: read, want an error", tc.name)
		}
	}
}
