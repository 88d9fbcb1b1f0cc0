//go:build !race

// The race detector makes sync.Pool drop what is put back at random, so
// allocation counts under -race are not what they are in a build: this
// test runs without it (scripts/norace.sh, in make test).

package revtree

import "testing"

func TestNewRevHashAllocations(t *testing.T) {
	body := []byte(`{"a":1,"b":[1,2,3],"c":{"d":"e"}}`)
	p := &Rev{1, "967a00dff5e02add41819138abb3284d"}
	NewRevHash(false, p, body, nil)
	if n := testing.AllocsPerRun(100, func() { _ = NewRevHash(false, p, body, nil) }); n > 1 {
		t.Fatalf("NewRevHash allocs = %v, want <= 1 (the string)", n)
	}
}
