//go:build !race

// Several settee nodes in one process cannot run under -race (see
// node/cluster_test.go); make test runs this package whole without -race,
// beside the race pass.

package couchrepl_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// TestClusterReplication replicates between a 3-node settee cluster
// (q=2, n=3) and a 3-node CouchDB cluster (q=2, n=3), each replicator
// both ways, through different nodes of each cluster; then once more
// with a settee node down. The same checks as the single-node tests.
func TestClusterReplication(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CouchDB cluster")
	}
	cc := testcouch.StartCluster(t, 3, 2, 3)
	sc := testcluster.New(t, 3)
	sc.Join()
	sn := make([]server, 3)
	cn := make([]server, 3)
	for i := range 3 {
		sn[i] = server{name: "settee" + string(rune('1'+i)), url: sc.Nodes[i].URL, user: testserver.AdminUser, pw: testserver.AdminPassword}
		cn[i] = server{name: "CouchDB" + string(rune('1'+i)), url: cc.URLs[i], user: cc.User, pw: cc.Password}
	}
	sCorpus := fill(t, sn[0], "src", 1000)
	cCorpus := fill(t, cn[0], "src", 1000)
	// src was made through the first node of each cluster: a CouchDB node
	// learns of a new database from the cluster's _dbs a little later, and
	// CouchDB's replicator reading through such a node answers 401
	// "unauthorized to access or create database", as for a missing one
	for i := range 3 {
		for _, s := range []server{sn[i], cn[i]} {
			waitFor(t, time.Minute, s.name+" to know src", func() bool { return docCount(t, s, "src") >= 0 })
		}
	}
	runs := []struct {
		name     string
		on       server
		from, to server
		toDB     string
		c        *corpus
	}{
		{"CouchDB's cluster pulls from settee's", cn[1], sn[1], cn[2], "pulled", sCorpus},
		{"CouchDB's cluster pushes to settee's", cn[2], cn[1], sn[2], "pushed", cCorpus},
		{"settee's cluster pulls from CouchDB's", sn[1], cn[2], sn[0], "spulled", cCorpus},
		{"settee's cluster pushes to CouchDB's", sn[2], sn[0], cn[1], "spushed", sCorpus},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			res := replicate(t, r.on, map[string]any{"source": r.from.dbURL("src"), "target": r.to.dbURL(r.toDB), "create_target": true})
			settled(t, r.from, "src", r.to, r.toDB)
			same(t, r.from, "src", r.to, r.toDB, r.c)
			checkpoints(t, r.from, "src", r.to, r.toDB, res["session_id"].(string))
		})
	}
	t.Run("a settee node down", func(t *testing.T) {
		sc.Stop(2)
		more := `{"docs":[{"_id":"while-down-1"},{"_id":"while-down-2"}]}`
		sn[0].must(t, "POST", "/src/_bulk_docs", more, 201, 202)
		cn[0].must(t, "POST", "/src/_bulk_docs", more, 201, 202)
		// the targets were created through other nodes (see src above)
		waitFor(t, time.Minute, "CouchDB1 to know pulled", func() bool { return docCount(t, cn[0], "pulled") >= 0 })
		waitFor(t, time.Minute, "settee2 to know spulled", func() bool { return docCount(t, sn[1], "spulled") >= 0 })
		res := replicate(t, cn[0], map[string]any{"source": sn[1].dbURL("src"), "target": cn[0].dbURL("pulled")})
		if h := history0(t, res); h["docs_written"].(float64) < 2 {
			t.Fatalf("with a settee node down: %v", h)
		}
		settled(t, sn[0], "src", cn[0], "pulled")
		same(t, sn[0], "src", cn[0], "pulled", sCorpus)
		replicate(t, sn[0], map[string]any{"source": cn[1].dbURL("src"), "target": sn[1].dbURL("spulled")})
		settled(t, cn[1], "src", sn[0], "spulled")
		same(t, cn[1], "src", sn[0], "spulled", cCorpus)
	})
}

// settled waits until the two databases count the same docs and
// deletions: a cluster's write is acknowledged by a quorum of copies, and
// a read through another node may meet a copy that internal replication
// has not reached yet.
func settled(t *testing.T, a server, adb string, b server, bdb string) {
	t.Helper()
	counts := func(s server, db string) string {
		i := s.must(t, "GET", "/"+db, nil)
		return fmt.Sprint(i["doc_count"], "/", i["doc_del_count"])
	}
	waitFor(t, time.Minute, "the clusters to settle", func() bool { return counts(a, adb) == counts(b, bdb) })
}
