package auth

import (
	"encoding/json"
	"testing"
)

func TestCredential(t *testing.T) {
	c := NewCredential("alice", "s3cret", 10)
	if c.Scheme != "pbkdf2" || c.PRF != "sha256" || c.Iterations != 10 || len(c.Salt) != 32 || len(c.DerivedKey) != 64 {
		t.Fatalf("credential %+v", c)
	}
	if NewCredential("alice", "s3cret", 10).Salt == c.Salt {
		t.Fatal("two credentials share a salt")
	}
	// what node stores and reads back is what verifies
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var stored Credential
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    Credential
		pw   string
		want bool
	}{
		{"right password", stored, "s3cret", true},
		{"wrong password", stored, "s3cret ", false},
		{"empty password", stored, "", false},
		{"other scheme", func() Credential { x := stored; x.Scheme = "simple"; return x }(), "s3cret", false},
		{"no iterations", func() Credential { x := stored; x.Iterations = 0; return x }(), "s3cret", false},
		{"key not hex", func() Credential { x := stored; x.DerivedKey = "zz"; return x }(), "s3cret", false},
	} {
		if got := tc.c.Verify(tc.pw); got != tc.want {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want)
		}
	}
}
