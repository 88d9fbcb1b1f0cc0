package kivik_test

import (
	"net/http"
	"slices"
	"testing"
)

func testServer(t *testing.T, e *env) {
	c := e.admin
	v, err := c.Version(ctx(t))
	must(t, "Version", err)
	if v.Version == "" {
		t.Errorf("Version: empty version: %+v", v)
	}
	if ok, err := c.Ping(ctx(t)); err != nil || !ok {
		t.Errorf("Ping: %v %v", ok, err)
	}

	name := e.dbName("server")
	ok, err := c.DBExists(ctx(t), name)
	if err != nil || ok {
		t.Fatalf("DBExists(%s) before create: %v %v, want false <nil>", name, ok, err)
	}
	must(t, "CreateDB", c.CreateDB(ctx(t), name))
	ok, err = c.DBExists(ctx(t), name)
	if err != nil || !ok {
		t.Fatalf("DBExists(%s) after create: %v %v, want true <nil>", name, ok, err)
	}
	all, err := c.AllDBs(ctx(t))
	must(t, "AllDBs", err)
	for _, want := range []string{"_users", "_replicator", name} {
		if !slices.Contains(all, want) {
			t.Errorf("AllDBs = %v, want it to hold %s", all, want)
		}
	}
	if !slices.IsSorted(all) {
		t.Errorf("AllDBs not sorted: %v", all)
	}

	for _, tc := range []struct {
		what   string
		err    error
		status int
		reason string
	}{
		{"CreateDB existing", c.CreateDB(ctx(t), name), http.StatusPreconditionFailed, "The database could not be created, the file already exists."},
		{"CreateDB bad name", c.CreateDB(ctx(t), "Bad Name"), http.StatusBadRequest, ""},
		{"DestroyDB missing", c.DestroyDB(ctx(t), e.dbName("never")), http.StatusNotFound, "Database does not exist."},
	} {
		wantStatus(t, tc.what, tc.err, tc.status, tc.reason)
	}

	must(t, "DestroyDB", c.DestroyDB(ctx(t), name))
	if ok, err := c.DBExists(ctx(t), name); err != nil || ok {
		t.Errorf("DBExists after DestroyDB: %v %v", ok, err)
	}
	_, err = c.DB(name).Stats(ctx(t))
	wantStatus(t, "Stats of a destroyed db", err, http.StatusNotFound, "Database does not exist.")
}

func testDBsStats(t *testing.T, e *env) {
	db := e.newDB(t, "stats")
	for _, id := range []string{"a", "b", "c"} {
		_, err := db.Put(ctx(t), id, map[string]any{"n": id})
		must(t, "Put "+id, err)
	}
	rev, err := db.GetRev(ctx(t), "c")
	must(t, "GetRev", err)
	_, err = db.Delete(ctx(t), "c", rev)
	must(t, "Delete", err)

	st, err := db.Stats(ctx(t))
	must(t, "Stats", err)
	if st.Name != db.Name() || st.DocCount != 2 || st.DeletedCount != 1 || st.UpdateSeq == "" {
		t.Errorf("Stats = %+v, want name %s, 2 docs, 1 deleted, an update seq", st, db.Name())
	}

	missing := e.dbName("missing")
	stats, err := e.admin.DBsStats(ctx(t), []string{db.Name(), missing})
	must(t, "DBsStats", err)
	if len(stats) != 2 || stats[0] == nil || stats[0].Name != db.Name() || stats[0].DocCount != 2 || stats[1] != nil {
		t.Errorf("DBsStats(%s, %s) = %v, want the first's stats and nil", db.Name(), missing, stats)
	}

	all, err := e.admin.AllDBsStats(ctx(t))
	must(t, "AllDBsStats", err)
	found := false
	for _, s := range all {
		if s != nil && s.Name == db.Name() {
			found = true
			if s.DocCount != 2 || s.DeletedCount != 1 {
				t.Errorf("AllDBsStats entry %+v, want 2 docs, 1 deleted", s)
			}
		}
	}
	if !found {
		t.Errorf("AllDBsStats has no %s", db.Name())
	}
}

func testCluster(t *testing.T, e *env) {
	state, err := e.admin.ClusterStatus(ctx(t))
	must(t, "ClusterStatus", err)
	if !slices.Contains([]string{"cluster_disabled", "single_node_disabled", "single_node_enabled", "cluster_enabled", "cluster_finished"}, state) {
		t.Errorf("ClusterStatus = %q, not one of CouchDB's states", state)
	}
	m, err := e.admin.Membership(ctx(t))
	must(t, "Membership", err)
	if len(m.AllNodes) == 0 || len(m.ClusterNodes) == 0 {
		t.Errorf("Membership = %+v, want this node in both lists", m)
	}
	for _, n := range m.AllNodes {
		if !slices.Contains(m.ClusterNodes, n) {
			t.Errorf("Membership: %s in all_nodes, not in cluster_nodes (%+v)", n, m)
		}
	}
}
