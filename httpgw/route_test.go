package httpgw

import (
	"strings"
	"testing"
)

func TestRouteLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path, want string
	}{
		{"", "root"},
		{"_up", "_up"},
		{"_node/_local/_prometheus", "_node"},
		{"_session", "_session"},
		{"_replicate", "_replicate"},
		{"_nonsense", "other"},
		{"albums", "db"},
		{"_users", "db"},
		{"_users/org.couchdb.user:bob", "doc"},
		{"albums/kind-of-blue", "doc"},
		{"albums/kind-of-blue/cover.png", "attachment"},
		{"albums/kind-of-blue/art/cover.png", "attachment"},
		{"albums/_design/app", "doc"},
		{"albums/_design/app/logo.svg", "attachment"},
		{"albums/_local/ckpt", "_local"},
		{"albums/_all_docs", "_all_docs"},
		{"albums/_all_docs/queries", "_all_docs"},
		{"albums/_changes", "_changes"},
		{"albums/_bulk_docs", "_bulk_docs"},
		{"albums/_bulk_get", "_bulk_get"},
		{"albums/_whatever", "db_other"},
	} {
		t.Run(c.path, func(t *testing.T) {
			var segs []string
			if c.path != "" {
				segs = strings.Split(c.path, "/")
			}
			if got := routeLabel(segs); got != c.want {
				t.Errorf("routeLabel(%q) = %q, want %q", c.path, got, c.want)
			}
		})
	}
}
