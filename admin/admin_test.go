package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

func adminURL(s *testserver.Server, user, pw string) string {
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(user, pw)
	return u.String()
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), args, &out)
	return out.String(), err
}

func TestAdminAgainstANode(t *testing.T) {
	s := testserver.Start(t)
	u := adminURL(s, testserver.AdminUser, testserver.AdminPassword)

	if out, err := run(t, "--url", u, "ping"); err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("ping: %q %v", out, err)
	}
	if _, err := run(t, "--url", u, "db", "create", "albums", "--q", "3"); err != nil {
		t.Fatalf("db create: %v", err)
	}
	out, err := run(t, "--url", u, "--json", "db", "list")
	var names []string
	if err != nil || json.Unmarshal([]byte(out), &names) != nil || !strings.Contains(out, "albums") {
		t.Fatalf("db list --json: %q %v", out, err)
	}
	out, err = run(t, "--url", u, "db", "shards", "albums")
	if err != nil || strings.Count(out, "settee@") != 3 || !strings.HasPrefix(out, "RANGE") {
		t.Fatalf("db shards (table): %q %v", out, err)
	}
	out, err = run(t, "--url", u, "--json", "db", "info", "albums")
	var info map[string]any
	if err != nil || json.Unmarshal([]byte(out), &info) != nil || info["db_name"] != "albums" {
		t.Fatalf("db info: %q %v", out, err)
	}
	if out, err := run(t, "--url", u, "compact", "albums"); err != nil || !strings.Contains(out, "compacted albums") {
		t.Fatalf("compact: %q %v", out, err)
	}
	if out, err := run(t, "--url", u, "--json", "tasks"); err != nil || !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("tasks: %q %v", out, err)
	}
	if out, err := run(t, "--url", u, "replicate", "albums", "copy", "--create-target"); err != nil || !strings.Contains(out, "replicated albums -> copy") {
		t.Fatalf("replicate: %q %v", out, err)
	}
	if _, err := run(t, "--url", u, "db", "delete", "albums"); err != nil {
		t.Fatalf("db delete: %v", err)
	}

	// failures: one line, non-nil error
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"unknown db", []string{"--url", u, "db", "info", "nope"}, "not_found"},
		{"wrong credentials", []string{"--url", adminURL(s, "admin", "wrong"), "db", "list"}, "unauthorized"},
		{"unreachable", []string{"--url", "http://127.0.0.1:1", "ping"}, "unreachable"},
		{"bad url", []string{"--url", "nope", "ping"}, "bad URL"},
		{"bad flag", []string{"--url", u, "db", "create", "x", "--q", "many"}, "invalid argument"},
		{"unknown command", []string{"--url", u, "frobnicate"}, "unknown command"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

// Help and usage name the command as a user types it.
func TestHelpSaysSetteeAdmin(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {}, {"db", "--help"}, {"cluster"}, {"db", "create", "--help"}} {
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		want := "settee admin " + strings.Join(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--help" }), " ")
		if !strings.Contains(out, "Usage:\n  "+strings.TrimSpace(want)) {
			t.Errorf("%v: usage does not say %q:\n%s", args, want, out)
		}
	}
}
