package testcouch

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a running CouchDB cluster: every node answers.
type Cluster struct {
	// URLs are the nodes' base URLs without credentials.
	URLs           []string
	User, Password string
}

// StartCluster starts an n-node CouchDB cluster with the given q and
// n-copies default (cluster.sh), stopped when t ends; skipped like Start.
// The nodes' ports are free ones whose values mod 4000 differ (each node's
// Erlang distribution port is derived from it) and stay clear of the
// 25984-25986 and 7100-7200 other tests of this project use.
func StartCluster(t testing.TB, nodes, q, copies int) *Cluster {
	t.Helper()
	dir := Dir()
	script := filepath.Join(dir, "cluster.sh")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no Apache CouchDB cluster to compare with: %s not found", script)
	}
	used := map[int]bool{1984: true, 1985: true, 1986: true}
	var ports []string
	for len(ports) < nodes {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if used[p%4000] || (p%4000 >= 3100 && p%4000 <= 3200) {
			continue
		}
		used[p%4000] = true
		ports = append(ports, strconv.Itoa(p))
	}
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	out, err := exec.CommandContext(ctx, script, "--ports", strings.Join(ports, ","), "--data", data,
		"--q", strconv.Itoa(q), "--n", strconv.Itoa(copies)).CombinedOutput()
	cancel()
	t.Cleanup(func() {
		for _, p := range ports {
			if out, err := exec.Command(filepath.Join(dir, "stop.sh"), "--data", filepath.Join(data, p)).CombinedOutput(); err != nil {
				t.Logf("stop.sh --data %s: %v %s", filepath.Join(data, p), err, out)
			}
		}
	})
	if err != nil {
		t.Skipf("CouchDB cluster would not start here: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^COUCHDB_URLS=(\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s printed no COUCHDB_URLS:\n%s", script, out)
	}
	c := &Cluster{}
	for _, raw := range strings.Split(string(m[1]), ",") {
		u, err := url.Parse(raw)
		if err != nil || u.User == nil {
			t.Fatalf("CouchDB URL %q: want http://user:pw@127.0.0.1:port", raw)
		}
		c.User = u.User.Username()
		c.Password, _ = u.User.Password()
		c.URLs = append(c.URLs, u.Scheme+"://"+u.Host)
	}
	c.waitMembers(t, nodes)
	return c
}

// waitMembers waits until every node lists all n nodes in its
// _membership's cluster_nodes: cluster.sh returns when the nodes were
// added, and a node's own list can lag behind for a moment (a difftest
// run once saw one node alone).
func (c *Cluster) waitMembers(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, u := range c.URLs {
		for {
			var m struct {
				ClusterNodes []string `json:"cluster_nodes"`
			}
			req, err := http.NewRequest(http.MethodGet, u+"/_membership", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth(c.User, c.Password)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&m)
				resp.Body.Close()
			}
			if err == nil && len(m.ClusterNodes) >= n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CouchDB cluster: %s/_membership lists %v after 60 s (err %v), want %d nodes", u, m.ClusterNodes, err, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
