package admin

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

func TestConfigCommands(t *testing.T) {
	s := testserver.Start(t)
	u := adminURL(s, testserver.AdminUser, testserver.AdminPassword)
	for _, tc := range []struct {
		name string
		args []string
		want string // in the output; a regexp
	}{
		{"set new", []string{"config", "set", "zz", "k/1", "v one"}, `^set zz/k/1 \(was ""\)\n$`},
		{"set again", []string{"config", "set", "zz", "k/1", "v2"}, `^set zz/k/1 \(was "v one"\)\n$`},
		{"get key", []string{"config", "get", "zz", "k/1"}, `^v2\n$`},
		{"get section", []string{"config", "get", "zz"}, `^k/1\s+v2\n$`},
		{"get all", []string{"config", "get"}, `(?m)^SECTION\s+KEY\s+VALUE\n(.|\n)*^zz\s+k/1\s+v2$`},
		{"get key of the node by name", []string{"config", "get", "--node", "settee@127.0.0.1", "zz", "k/1"}, `^v2\n$`},
		{"live setting", []string{"config", "set", "couchdb", "max_document_size", "1000"}, `^set couchdb/max_document_size \(was ""\)\n$`}, // CouchDB's default.ini leaves the default unlisted
		{"admin hashed", []string{"config", "set", "admins", "bob", "pw"}, `^set admins/bob \(was ""\)\n$`},
		{"admin shown hashed", []string{"config", "get", "admins", "bob"}, `^-pbkdf2:sha256-[0-9a-f]{64},[0-9a-f]{32},600000\n$`},
		{"delete", []string{"config", "delete", "zz", "k/1"}, `^deleted zz/k/1 \(was "v2"\)\n$`},
		{"json", []string{"--json", "config", "delete", "couchdb", "max_document_size"}, `"old": "1000"`},
	} {
		out, err := run(t, append([]string{"--url", u}, tc.args...)...)
		if err != nil || !regexp.MustCompile(tc.want).MatchString(out) {
			t.Fatalf("%s: %q %v, want %s", tc.name, out, err, tc.want)
		}
	}
	out, err := run(t, "--url", u, "--json", "config", "get", "couchdb")
	var sec map[string]string
	if err != nil || json.Unmarshal([]byte(out), &sec) != nil || sec["database_dir"] == "" || sec["max_document_size"] != "" {
		t.Fatalf("config get --json: %q %v", out, err)
	}
	// failures: one line
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing key", []string{"config", "get", "zz", "k/1"}, "not_found: unknown_config_value"},
		{"delete missing", []string{"config", "delete", "zz", "nope"}, "not_found: unknown_config_value"},
		{"bad value", []string{"config", "set", "couchdb", "max_document_size", "big"}, "bad_request"},
		{"blacklisted", []string{"config", "set", "query_servers", "js", "x"}, "forbidden"},
		{"no such node", []string{"config", "get", "--node", "nosuch@127.0.0.1"}, "no such node"},
		{"arguments", []string{"config", "set", "zz", "k"}, "accepts 3 arg(s)"},
	} {
		_, err := run(t, append([]string{"--url", u}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", tc.name, err, tc.want)
		}
	}
	for _, args := range [][]string{{"config", "--help"}, {"config", "set", "--help"}} {
		out, _ := run(t, args...)
		if !strings.Contains(out, "Usage:\n  settee admin "+strings.Join(args[:len(args)-1], " ")) {
			t.Errorf("%v: usage:\n%s", args, out)
		}
	}
}
