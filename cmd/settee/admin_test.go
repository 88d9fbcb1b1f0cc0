package main

import (
	"testing"
)

func TestServeRefusesMissingAdminWhenRequired(t *testing.T) {
	t.Setenv("SETTEE_REQUIRE_ADMIN", "1")
	t.Setenv("SETTEE_ADMIN", "")
	if err := serve([]string{"--data-dir", t.TempDir(), "--http", "127.0.0.1:0"}); err == nil {
		t.Fatal("serve started without an admin although SETTEE_REQUIRE_ADMIN is set")
	}
	t.Setenv("SETTEE_ADMIN", "nopassword")
	if err := serve([]string{"--data-dir", t.TempDir(), "--http", "127.0.0.1:0"}); err == nil {
		t.Fatal("serve started with a malformed SETTEE_ADMIN")
	}
}
