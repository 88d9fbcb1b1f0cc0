//go:build !race

package difftest

import (
	"testing"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// TestDiffCluster runs the cluster corpus on a 3-node CouchDB cluster and
// a 3-node settee cluster (both q=2, n=3), requests going to the node each
// step names, against deliberate.txt and known-cluster.txt. It starts
// several settee nodes in one process, which -race cannot (see
// node/cluster_test.go): make test's second pass runs it.
func TestDiffCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a CouchDB cluster")
	}
	cc := testcouch.StartCluster(t, 3, 2, 3)
	sc := testcluster.New(t, 3)
	sc.Join()
	st := Target{User: testserver.AdminUser, Password: testserver.AdminPassword}
	for _, n := range sc.Nodes {
		st.URLs = append(st.URLs, n.URL)
	}
	r := &Runner{Couch: Target{URLs: cc.URLs, User: cc.User, Password: cc.Password}, Settee: st}
	seqs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	var cluster []Sequence
	for _, s := range seqs {
		if s.Mode == "cluster" {
			cluster = append(cluster, s)
		}
	}
	runAndCheck(t, r, cluster, "known-cluster.txt", true)
}
