//go:build !race

package node_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
)

// /_db_updates is cluster-wide: every node's feed shows the creates,
// writes and deletes of every database, wherever its copies are and
// whichever node was asked.
func TestClusterDBUpdates(t *testing.T) {
	c := testcluster.New(t, 3)
	c.Join()
	events := func(i int) ([]string, error) {
		st, body := c.Do(i, "GET", "/_db_updates", "")
		var f struct {
			Results []struct {
				DB   string `json:"db_name"`
				Type string `json:"type"`
			} `json:"results"`
		}
		if st != 200 || json.Unmarshal(body, &f) != nil {
			return nil, fmt.Errorf("node %d: %d %s", i, st, body)
		}
		var out []string
		for _, r := range f.Results {
			if strings.HasPrefix(r.DB, "cdbu") {
				out = append(out, r.DB+" "+r.Type)
			}
		}
		slices.Sort(out)
		return out, nil
	}
	waitAll := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		c.WaitFor(15*time.Second, func() error {
			for i := range 3 {
				got, err := events(i)
				if err != nil {
					return err
				}
				if !slices.Equal(got, want) {
					return fmt.Errorf("node %d: %v, want %v", i, got, want)
				}
			}
			return nil
		})
	}
	// one copy of one range: the writes land on one node only
	if st, body := c.Do(0, "PUT", "/cdbu1?q=1&n=1", ""); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	waitAll("cdbu1 created")
	if st, body := c.Do(1, "PUT", "/cdbu1/doc", `{}`); st != 201 {
		t.Fatalf("write: %d %s", st, body)
	}
	waitAll("cdbu1 created", "cdbu1 updated")
	if st, body := c.Do(2, "DELETE", "/cdbu1", ""); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	waitAll("cdbu1 created", "cdbu1 updated", "cdbu1 deleted")

	// a node that was down learns of creates and deletes made meanwhile
	c.Stop(2)
	if st, body := c.Do(0, "PUT", "/cdbu2", ""); st != 201 && st != 202 {
		t.Fatalf("create while node 3 is down: %d %s", st, body)
	}
	c.Restart(2)
	waitAll("cdbu1 created", "cdbu1 updated", "cdbu1 deleted", "cdbu2 created")
}
