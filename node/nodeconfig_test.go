package node_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// The layers, as CouchDB's ini files: the flags are the start values, a
// value written through _config is stored and wins over them at the next
// start (even over a different flag), and a DELETE goes back to the
// flag's value.
func TestConfigLayers(t *testing.T) {
	lv := new(slog.LevelVar)
	s := testserver.Start(t, func(c *node.Config) { c.MaxDocumentSize = 1000; c.LogLevel = lv; c.Q = 3 })
	n := s.Node
	for _, tc := range []struct {
		section, key, want string
	}{
		{"couchdb", "max_document_size", "1000"},
		{"cluster", "q", "3"},
		{"cluster", "n", "3"},
		{"log", "level", "info"},
		{"smoosh", "threshold", "2.0"},
		{"replicator", "max_jobs", "500"},
		{"replicator", "interval", "60000"},
		{"replicator", "connection_timeout", "30000"},
	} {
		if v, err := n.ConfigValue(tc.section, tc.key); err != nil || v != tc.want {
			t.Errorf("%s/%s = %q %v, want %q", tc.section, tc.key, v, err, tc.want)
		}
	}
	// in force but not listed, as CouchDB's default.ini has them commented out
	for _, k := range []string{"couchdb/max_attachment_size", "chttpd/require_valid_user"} {
		s, key, _ := strings.Cut(k, "/")
		if v, err := n.ConfigValue(s, key); !errors.Is(err, node.ErrConfigNotFound) {
			t.Errorf("%s = %q %v, want unknown_config_value as CouchDB", k, v, err)
		}
	}
	if _, err := n.ConfigValue("nosuch", "k"); !errors.Is(err, node.ErrConfigNotFound) {
		t.Errorf("missing key: %v", err)
	}
	for _, tc := range []struct{ section, key, value string }{
		{"couchdb", "max_document_size", "-1"},
		{"couchdb", "max_document_size", "1e3"},
		{"cluster", "q", "300"},
		{"log", "level", "loud"},
		{"smoosh", "threshold", "0.5"},
	} {
		if _, err := n.SetConfig(tc.section, tc.key, tc.value); !errors.Is(err, node.ErrConfigBadValue) {
			t.Errorf("%s/%s %q: %v, want ErrConfigBadValue", tc.section, tc.key, tc.value, err)
		}
	}
	if _, err := n.SetConfig("query_servers", "js", "x"); !errors.Is(err, node.ErrConfigForbidden) {
		t.Errorf("blacklisted: %v", err)
	}
	if old, err := n.SetConfig("couchdb", "max_document_size", "500"); err != nil || old != "1000" {
		t.Fatalf("set: %q %v", old, err)
	}
	if n.MaxDocumentSize() != 500 {
		t.Fatalf("live: %d", n.MaxDocumentSize())
	}
	if _, err := n.SetConfig("log", "level", "error"); err != nil || lv.Level() != slog.LevelError {
		t.Fatalf("log level: %v %v", lv.Level(), err)
	}
	// a restart with another flag: the stored value wins
	s.Stop(t)
	s = testserver.Start(t, func(c *node.Config) { c.DataDir = s.DataDir; c.MaxDocumentSize = 2000; c.LogLevel = lv })
	n = s.Node
	if v, _ := n.ConfigValue("couchdb", "max_document_size"); v != "500" || n.MaxDocumentSize() != 500 {
		t.Fatalf("after restart: %q %d", v, n.MaxDocumentSize())
	}
	if lv.Level() != slog.LevelError {
		t.Fatalf("log level after restart: %v", lv.Level())
	}
	if old, err := n.DeleteConfig("couchdb", "max_document_size"); err != nil || old != "500" {
		t.Fatalf("delete: %q %v", old, err)
	}
	if v, _ := n.ConfigValue("couchdb", "max_document_size"); v != "2000" || n.MaxDocumentSize() != 2000 {
		t.Fatalf("after delete, the flag's value: %q %d", v, n.MaxDocumentSize())
	}
}
