package shard

import (
	"context"
	"strings"
	"testing"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/couchdoc"
	pb "github.com/settee/settee/proto"
)

// A GetDoc with render answers the same JSON couchdoc.Append makes of the
// plain read's winner, conflicts included when asked, and the winner's
// flags in Bodies; a deleted winner and a missing doc answer as before.
func TestRenderWinner(t *testing.T) {
	f := newFixture(t)
	res := f.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"v":1,"s":"é\n"}`)}, &pb.DocUpdate{Id: "gone", Body: []byte(`{}`)},
		&pb.DocUpdate{Id: "empty", Body: []byte(`{}`)})
	f.update(true, &pb.DocUpdate{Id: "gone", Rev: res[1].Rev, Deleted: true, Body: []byte(`{}`)})
	// a conflicting branch of a, written as a replicator would
	f.update(false, &pb.DocUpdate{Id: "a", Rev: "1-ffffffffffffffffffffffffffffffff", Body: []byte(`{"v":"other"}`)})
	ask := func(m *pb.GetDoc) *pb.DocReply {
		t.Helper()
		r, err := actors.Ask[*pb.DocReply](context.Background(), f.sys.Root, f.pid, m)
		if err != nil || r.Error != nil {
			t.Fatalf("get %v: %v %v", m, err, r.GetError())
		}
		return r
	}
	for _, id := range []string{"a", "empty"} {
		for _, conflicts := range []bool{false, true} {
			plain := ask(&pb.GetDoc{Id: id})
			want := couchdoc.Append(nil, id, plain.Info, plain.Bodies[0], &couchdoc.Options{Conflicts: conflicts})
			got := ask(&pb.GetDoc{Id: id, Render: true, RenderConflicts: conflicts})
			if string(got.Rendered) != string(want) {
				t.Errorf("%s conflicts=%v: rendered %s, want %s", id, conflicts, got.Rendered, want)
			}
			if len(got.Bodies) != 1 || got.Bodies[0].Rev != plain.Bodies[0].Rev || got.Bodies[0].Json != nil || got.Info.GetWinner() != plain.Info.GetWinner() {
				t.Errorf("%s: bodies %v, info %v", id, got.Bodies, got.Info)
			}
		}
	}
	if r := ask(&pb.GetDoc{Id: "a", Render: true, RenderConflicts: true}); !strings.Contains(string(r.Rendered), `"_conflicts":["1-`) {
		t.Errorf("conflicts not rendered: %s", r.Rendered)
	}
	if r := ask(&pb.GetDoc{Id: "gone", Render: true}); len(r.Bodies) != 1 || !r.Bodies[0].Deleted {
		t.Errorf("deleted winner: %v", r.Bodies)
	}
	if r := ask(&pb.GetDoc{Id: "nope", Render: true}); r.Info != nil || r.Rendered != nil {
		t.Errorf("missing doc: %v", r)
	}
}
