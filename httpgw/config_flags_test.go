package httpgw_test

import (
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// The serve flags CouchDB has no key for are in _config's settee section:
// all readable, request_timeout live, the heartbeats at the next start,
// and the few the store or the cluster needs before _config exists are
// set by their flag only.
func TestConfigFlagKeys(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	_, b := c.do("GET", "/_node/_local/_config/settee", "", nil)
	for _, want := range []string{`"request_timeout":"`, `"memory_mb":"`, `"heartbeat_interval":"1s"`, `"node_down_after":"4s"`} {
		if !strings.Contains(b, want) {
			t.Errorf("settee section %s: want %s", b, want)
		}
	}
	if _, b := c.do("GET", "/_node/_local/_config/couchdb/database_dir", "", nil); !strings.Contains(b, s.DataDir) {
		t.Errorf("couchdb/database_dir %s, want %s", b, s.DataDir)
	}
	for _, tc := range []struct {
		key, value string
		status     int
	}{
		{"settee/request_timeout", "soon", 400},
		{"settee/request_timeout", "-1s", 400},
		{"settee/heartbeat_interval", "0s", 400},
		{"settee/node_down_after", "x", 400},
		{"couchdb/database_dir", "/tmp/elsewhere", 400},
		{"settee/memory_mb", "512", 400},
		{"settee/node_addr", "127.0.0.1:1", 400},
		{"settee/heartbeat_interval", "2s", 200},
	} {
		resp, b := c.do("PUT", "/_node/_local/_config/"+tc.key, `"`+tc.value+`"`, nil)
		if resp.StatusCode != tc.status {
			t.Errorf("PUT %s %q: %d %s, want %d", tc.key, tc.value, resp.StatusCode, b, tc.status)
		}
	}
	if resp, b := c.do("DELETE", "/_node/_local/_config/settee/memory_mb", "", nil); resp.StatusCode != 400 {
		t.Errorf("DELETE settee/memory_mb: %d %s", resp.StatusCode, b)
	}
	// request_timeout is live: a bound too short for any read fails reads
	c.do("PUT", "/db", "", nil)
	c.do("PUT", "/db/d", `{}`, nil)
	c.setConfig("settee", "request_timeout", "1ns")
	if resp, b := c.do("PUT", "/db/e", `{}`, nil); resp.StatusCode != 500 || !strings.Contains(b, `"timeout"`) {
		t.Errorf("PUT with request_timeout 1ns: %d %s, want 500 timeout", resp.StatusCode, b)
	}
	c.setConfig("settee", "request_timeout", "30s")
	if resp, b := c.do("PUT", "/db/f", `{}`, nil); resp.StatusCode != 201 {
		t.Errorf("PUT with request_timeout 30s: %d %s", resp.StatusCode, b)
	}
}
