package coordinator_test

import (
	"context"
	"testing"

	"github.com/settee/settee/coordinator"
	pb "github.com/settee/settee/proto"
)

// GetDocs answers each doc as GetDoc would, in the order asked: through
// one GetDocs request when the range's only copy is local, and doc by doc
// (r copies compared) when it has several, so a rev that this node's copy
// lacks is still found on the others.
func TestGetDocs(t *testing.T) {
	ctx := context.Background()
	c, sys, p := setup(t)
	write(t, sys, p, `{"v":1}`, &pb.Revisions{Start: 1, Ids: []string{"aaaa"}}, "n1", "n2")
	ms := []*pb.GetDoc{
		{Id: "x", Revs: []string{"1-aaaa"}, Latest: true},
		{Id: "nope", Revs: []string{"1-aaaa"}, Latest: true},
		{Id: "x"},
	}
	check := func(name string, got []coordinator.DocResult, err error) {
		t.Helper()
		if err != nil || len(got) != 3 {
			t.Fatalf("%s: %v %v", name, got, err)
		}
		for i, want := range []string{"1-aaaa", "", "1-aaaa"} {
			r := got[i]
			if r.Err != nil {
				t.Fatalf("%s: doc %d: %v", name, i, r.Err)
			}
			if want == "" {
				if r.Reply.Info != nil {
					t.Fatalf("%s: doc %d: %v, want none", name, i, r.Reply)
				}
				continue
			}
			if len(r.Reply.Bodies) != 1 || r.Reply.Bodies[0].Rev != want || string(r.Reply.Bodies[0].Json) != `{"v":1}` {
				t.Fatalf("%s: doc %d: %v, want %s", name, i, r.Reply, want)
			}
		}
	}
	got, err := c.GetDocs(ctx, "db", ms)
	check("three copies", got, err)

	// one copy, on this node: n1's copy under this node's name
	p.rec = &pb.DbRecord{Name: "db", Q: 1, N: 1, Shards: []*pb.ShardRef{{Db: "db", RangeEnd: ^uint32(0), Node: "n0", Handle: 2}}}
	p.pids["n0"] = p.pids["n1"]
	got, err = c.GetDocs(ctx, "db", ms)
	check("one local copy", got, err)
}
