package shard

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

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

// aliasBodyRecord reads what proto.Unmarshal reads of a BodyRecord, and
// fails, never panics, on bytes that are not one.
func FuzzAliasBodyRecord(f *testing.F) {
	for _, r := range []*pb.BodyRecord{
		{},
		{Json: []byte(`{"a":1}`)},
		{Json: []byte(`{}`), Atts: []*pb.AttMeta{{Name: "x.txt", ContentType: "text/plain", Length: 3, Digest: "md5-abc"}, {Name: "y"}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rb pb.RevBody
		err := aliasBodyRecord(b, &rb)
		var want pb.BodyRecord
		werr := proto.Unmarshal(b, &want)
		if werr != nil {
			return // not a record: aliasBodyRecord may fail or not
		}
		if err != nil {
			t.Fatalf("a record proto.Unmarshal reads: %v", err)
		}
		if string(rb.Json) != string(want.Json) || len(rb.Atts) != len(want.Atts) {
			t.Fatalf("json %q atts %d, want %q %d", rb.Json, len(rb.Atts), want.Json, len(want.Atts))
		}
		for i := range rb.Atts {
			if !proto.Equal(rb.Atts[i], want.Atts[i]) {
				t.Fatalf("att %d: %v, want %v", i, rb.Atts[i], want.Atts[i])
			}
		}
	})
}

// ReadDocs renders the docs asked rendered one after the other into the
// caller's buffer: each DocReply.Rendered is what a GetDoc alone renders,
// capped so that nothing appended after it writes into it.
func TestReadDocsInto(t *testing.T) {
	f := newFixture(t)
	f.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"v":1}`)}, &pb.DocUpdate{Id: "b", Body: []byte(`{"v":"two","w":[1,2]}`)},
		&pb.DocUpdate{Id: "c", Body: []byte(`{}`)})
	p, ok := f.sys.ProcessRegistry.GetLocal(ReaderID(f.pid.Id))
	if !ok {
		t.Fatal("no reader")
	}
	r := p.(*Reader)
	ms := []*pb.GetDoc{{Id: "a", Render: true}, {Id: "nope", Render: true}, {Id: "b"}, {Id: "c", Render: true}, {Id: "b", Render: true}}
	old := make([]byte, 3, 8) // what the caller's buffer held before is kept
	copy(old, "xyz")
	reply, buf := r.ReadDocs(ms, old)
	if len(reply.Docs) != len(ms) {
		t.Fatalf("%d replies to %d docs", len(reply.Docs), len(ms))
	}
	if string(buf[:3]) != "xyz" {
		t.Errorf("the buffer's first bytes became %q", buf[:3])
	}
	var total int
	for i, m := range ms {
		got := reply.Docs[i]
		alone, _ := r.ReadDoc(m, nil)
		if string(got.Rendered) != string(alone.Rendered) || got.Info.GetWinner() != alone.Info.GetWinner() {
			t.Errorf("%s: rendered %s, alone %s", m.Id, got.Rendered, alone.Rendered)
		}
		if cap(got.Rendered) != len(got.Rendered) {
			t.Errorf("%s: rendered with room after it (len %d, cap %d)", m.Id, len(got.Rendered), cap(got.Rendered))
		}
		total += len(got.Rendered)
	}
	if reply.Docs[1].Info != nil || reply.Docs[2].Rendered != nil || reply.Docs[2].Bodies[0].Json == nil {
		t.Errorf("missing doc %v, unrendered doc %v", reply.Docs[1], reply.Docs[2])
	}
	if len(buf) != 3+total {
		t.Errorf("buffer of %d bytes for %d rendered", len(buf), total)
	}
	want := string(reply.Docs[0].Rendered)
	_ = append(reply.Docs[0].Rendered, "overwrite"...)
	if string(reply.Docs[0].Rendered) != want || !strings.HasPrefix(string(reply.Docs[3].Rendered), `{"_id":"c"`) {
		t.Errorf("an append to one rendered doc reached the next: %s", reply.Docs[3].Rendered)
	}
}
