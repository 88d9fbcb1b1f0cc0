package node_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/httpgw"
	"github.com/settee/settee/node"
)

func start(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return n
}

func stop(t *testing.T, n *node.Node) {
	t.Helper()
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func status(t *testing.T, n *node.Node, user, pw string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", n.URL()+"/_all_dbs", nil)
	req.SetBasicAuth(user, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAdminGeneratedOnceAndStored(t *testing.T) {
	cfg := node.Default()
	cfg.Handler = httpgw.ForNode
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	var shown []string
	cfg.AdminPasswordOut = func(user, pw string) { shown = append(shown, user+":"+pw) }

	n := start(t, cfg)
	if len(shown) != 1 {
		t.Fatalf("generated admin shown %d times, want once", len(shown))
	}
	user, pw, _ := strings.Cut(shown[0], ":")
	if got := status(t, n, user, pw); got != 200 {
		t.Fatalf("generated admin: status %d", got)
	}
	if got := status(t, n, user, pw+"x"); got != 401 {
		t.Fatalf("wrong password: status %d", got)
	}
	stop(t, n)

	// restart: the stored hash is used and nothing is shown again
	n = start(t, cfg)
	if len(shown) != 1 {
		t.Fatalf("admin shown again after restart")
	}
	if got := status(t, n, user, pw); got != 200 {
		t.Fatalf("stored admin after restart: status %d", got)
	}
	stop(t, n)

	// --admin replaces the stored admin
	cfg.Admin = "root:newpw"
	n = start(t, cfg)
	defer stop(t, n)
	if got := status(t, n, "root", "newpw"); got != 200 {
		t.Fatalf("--admin: status %d", got)
	}
	if got := status(t, n, user, pw); got != 401 {
		t.Fatalf("old admin still accepted: %d", got)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*node.Config)
		ok     bool
	}{
		{"default", func(*node.Config) {}, true},
		{"no data dir", func(c *node.Config) { c.DataDir = "" }, false},
		{"q zero", func(c *node.Config) { c.Q = 0 }, false},
		{"admin without password", func(c *node.Config) { c.Admin = "admin" }, false},
		{"admin with empty user", func(c *node.Config) { c.Admin = ":pw" }, false},
		{"tiny memory", func(c *node.Config) { c.MemoryMB = 1 }, false},
		{"negative replicator connection timeout", func(c *node.Config) { c.ReplicatorConnectionTimeout = -1 }, false},
		{"short liveness", func(c *node.Config) {
			c.HeartbeatInterval, c.NodeDownAfter = 100*time.Millisecond, 300*time.Millisecond
		}, true},
		{"heartbeat interval zero", func(c *node.Config) { c.HeartbeatInterval = 0 }, false},
		{"negative heartbeat interval", func(c *node.Config) { c.HeartbeatInterval = -time.Second }, false},
		{"down-after zero", func(c *node.Config) { c.NodeDownAfter = 0 }, false},
		{"down-after equal to the interval", func(c *node.Config) { c.HeartbeatInterval, c.NodeDownAfter = 2*time.Second, 2*time.Second }, false},
		{"down-after below the interval", func(c *node.Config) { c.HeartbeatInterval, c.NodeDownAfter = 2*time.Second, time.Second }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := node.Default()
			tc.change(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
