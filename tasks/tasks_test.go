package tasks

import "testing"

func TestRegistry(t *testing.T) {
	r := New("n1")
	a := r.Start("database_compaction", map[string]any{"database": "db1", "progress": 0})
	b := r.Start("replication", map[string]any{"docs_read": 0})
	a.Update(map[string]any{"progress": 50})
	l := r.List()
	if len(l) != 2 || l[0]["progress"] != 50 || l[1]["type"] != "replication" || l[0]["node"] != "n1" {
		t.Fatalf("list %v", l)
	}
	if got := r.Find("database_compaction", "database", "db1"); len(got) != 1 {
		t.Fatalf("find %v", got)
	}
	a.Done()
	b.Done()
	if len(r.List()) != 0 {
		t.Fatal("tasks left after Done")
	}
}
