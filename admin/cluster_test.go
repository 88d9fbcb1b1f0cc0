//go:build !race

// Several nodes in one process: see node/cluster_test.go for why these run
// without -race (make test's second pass).

package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
)

func TestClusterStatus(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	u := adminURL(c.Nodes[0], testserver.AdminUser, testserver.AdminPassword)
	if _, err := run(t, "--url", u, "db", "create", "spread", "--q", "2", "--n", "3"); err != nil {
		t.Fatal(err)
	}
	c.Stop(2)
	c.WaitFor(15*time.Second, func() error {
		out, err := run(t, "--url", u, "--json", "cluster", "status")
		if err != nil {
			return err
		}
		var st struct {
			Nodes []nodeStatus `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return err
		}
		up := 0
		for _, n := range st.Nodes {
			if n.Status == "up" {
				up++
				if n.Shards < 2 || n.Address == "" || n.Version == "" {
					return errf("node %+v", n)
				}
			}
		}
		if len(st.Nodes) != 3 || up != 2 {
			return errf("status %s", out)
		}
		return nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func errf(format string, a ...any) error {
	b, _ := json.Marshal(a)
	return errString(format + " " + string(b))
}
