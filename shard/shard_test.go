package shard

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

type fixture struct {
	t   *testing.T
	sys *actor.ActorSystem
	pid *actor.PID
	cfg Config
}

func newFixture(t *testing.T) *fixture {
	db := openTestDB(t)
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	cfg := Config{DB: db, Handle: 7, Name: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &fixture{t: t, sys: sys, pid: sys.Root.Spawn(Props(cfg)), cfg: cfg}
}

func (f *fixture) update(newEdits bool, docs ...*pb.DocUpdate) []*pb.DocResult {
	f.t.Helper()
	for i, d := range docs {
		d.Tag = uint32(i)
	}
	res, err := actors.Ask[*pb.UpdateResult](context.Background(), f.sys.Root, f.pid, &pb.UpdateDocs{Docs: docs, NewEdits: newEdits, Reply: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return res.Results
}

func (f *fixture) get(id string) *pb.DocReply {
	f.t.Helper()
	r, err := actors.Ask[*pb.DocReply](context.Background(), f.sys.Root, f.pid, &pb.GetDoc{Id: id})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) meta() *pb.ShardMeta {
	f.t.Helper()
	r, err := actors.Ask[*pb.ShardInfo](context.Background(), f.sys.Root, f.pid, &pb.GetShardInfo{})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Meta
}

func code(r *pb.DocResult) string {
	if r.Error == nil {
		return "ok"
	}
	return r.Error.Code
}

func TestUpdateSemantics(t *testing.T) {
	f := newFixture(t)
	body := []byte(`{"a":1}`)

	r := f.update(true, &pb.DocUpdate{Id: "a", Body: body}, &pb.DocUpdate{Id: "a", Body: []byte(`{"a":2}`)})
	if code(r[0]) != "ok" || code(r[1]) != "conflict" || r[0].Tag != 0 || r[1].Tag != 1 {
		t.Fatalf("duplicate ids in one batch: %v", r)
	}
	rev1 := r[0].Rev
	if !strings.HasPrefix(rev1, "1-") {
		t.Fatalf("rev %s", rev1)
	}

	tests := []struct {
		name string
		doc  *pb.DocUpdate
		want string
	}{
		{"no rev on existing doc", &pb.DocUpdate{Id: "a", Body: body}, "conflict"},
		{"unknown rev", &pb.DocUpdate{Id: "a", Rev: "1-00000000000000000000000000000000", Body: body}, "conflict"},
		{"rev on missing doc", &pb.DocUpdate{Id: "zz", Rev: rev1, Body: body}, "conflict"},
		{"bad rev", &pb.DocUpdate{Id: "a", Rev: "x", Body: body}, "bad_request"},
		{"stub without parent attachment", &pb.DocUpdate{Id: "s", Body: body, HasAtts: true, Atts: []*pb.Att{{Name: "f", Stub: true}}}, "missing_stub"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(f.update(true, tc.doc)[0]); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}

	// update, delete, re-create without rev continues the branch
	r = f.update(true, &pb.DocUpdate{Id: "a", Rev: rev1, Body: []byte(`{"a":3}`)})
	rev2 := r[0].Rev
	r = f.update(true, &pb.DocUpdate{Id: "a", Rev: rev2, Deleted: true, Body: []byte(`{}`)})
	if !strings.HasPrefix(r[0].Rev, "3-") {
		t.Fatalf("delete rev %v", r)
	}
	if m := f.meta(); m.DocCount != 0 || m.DelCount != 1 {
		t.Fatalf("counts after delete: %+v", m)
	}
	r = f.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"a":4}`)})
	if !strings.HasPrefix(r[0].Rev, "4-") {
		t.Fatalf("re-create rev %v", r)
	}
	if m := f.meta(); m.DocCount != 1 || m.DelCount != 0 {
		t.Fatalf("counts after re-create: %+v", m)
	}
}

func TestReplicatedEditsMerge(t *testing.T) {
	f := newFixture(t)
	r := f.update(false,
		&pb.DocUpdate{Id: "x", Rev: "1-aaaa", Body: []byte(`{"v":"a"}`)},
		&pb.DocUpdate{Id: "x", Rev: "1-bbbb", Body: []byte(`{"v":"b"}`)},
	)
	// every merged doc is acknowledged (the coordinator counts copies);
	// httpgw leaves them out of the answer as CouchDB does
	if len(r) != 2 || code(r[0]) != "ok" || code(r[1]) != "ok" {
		t.Fatalf("new_edits=false results: %v", r)
	}
	g := f.get("x")
	if g.Info.Winner != "1-bbbb" || len(g.Info.Nodes) != 2 {
		t.Fatalf("winner %s, nodes %d", g.Info.Winner, len(g.Info.Nodes))
	}
	// a known rev with another body is ignored
	f.update(false, &pb.DocUpdate{Id: "x", Rev: "1-bbbb", Body: []byte(`{"v":"changed"}`)})
	if g := f.get("x"); string(g.Bodies[0].Json) != `{"v":"b"}` {
		t.Fatalf("known rev overwritten: %s", g.Bodies[0].Json)
	}
	// extending a branch with _revisions
	f.update(false, &pb.DocUpdate{Id: "x", Body: []byte(`{"v":"a3"}`), Revisions: &pb.Revisions{Start: 3, Ids: []string{"cccc", "dddd", "aaaa"}}})
	if g := f.get("x"); g.Info.Winner != "3-cccc" {
		t.Fatalf("winner after extension: %s", g.Info.Winner)
	}
	if m := f.meta(); m.DocCount != 1 || m.UpdateSeq != 3 {
		t.Fatalf("meta %+v", m)
	}
}

func TestGroupCommitUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := string(rune('a'+w%26)) + strings.Repeat("x", w/26) + "-" + string(rune('0'+i%10)) + string(rune('a'+i/10))
				if r := f.update(true, &pb.DocUpdate{Id: id, Body: []byte(`{}`)}); code(r[0]) != "ok" {
					t.Errorf("%s: %v", id, r[0])
				}
			}
		}()
	}
	wg.Wait()
	if m := f.meta(); m.DocCount != 640 || m.UpdateSeq != 640 {
		t.Fatalf("meta after 640 concurrent writes: %+v", m)
	}
	// a flush answers after everything before it
	fr, err := actors.Ask[*pb.FlushReply](context.Background(), f.sys.Root, f.pid, &pb.Flush{})
	if err != nil || fr.UpdateSeq != 640 {
		t.Fatalf("flush: %v %v", fr, err)
	}
}

func TestMetaSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	f.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{}`)}, &pb.DocUpdate{Id: "b", Body: []byte(`{}`)})
	if err := f.sys.Root.PoisonFuture(f.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	f.pid = f.sys.Root.Spawn(Props(f.cfg))
	if m := f.meta(); m.DocCount != 2 || m.UpdateSeq != 2 {
		t.Fatalf("meta after respawn: %+v", m)
	}
	f.update(true, &pb.DocUpdate{Id: "c", Body: []byte(`{}`)})
	if m := f.meta(); m.UpdateSeq != 3 {
		t.Fatalf("seq after respawn: %+v", m)
	}
}

// A copy takes the coordinator's rev hash only for the parent it was
// computed for: the doc's _rev, or none. Recreating a deleted doc without
// a _rev extends the deleted leaf, so the copy hashes that edit itself.
func TestRevHashHint(t *testing.T) {
	f := newFixture(t)
	hint := func(d *pb.DocUpdate) *pb.DocUpdate {
		var parent *revtree.Rev
		if d.Rev != "" {
			p, _ := revtree.ParseRev(d.Rev)
			parent = &p
		}
		d.RevHash = revtree.NewRevHash(d.Deleted, parent, d.Body, nil)
		return d
	}
	plain := newFixture(t) // the same edits, no hints
	same := func(a, b []*pb.DocResult) {
		t.Helper()
		if a[0].Error != nil || b[0].Error != nil || a[0].Rev != b[0].Rev {
			t.Fatalf("with hint %v, without %v: want the same rev", a[0], b[0])
		}
	}
	r1 := f.update(true, hint(&pb.DocUpdate{Id: "a", Body: []byte(`{"v":1}`)}))
	same(r1, plain.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"v":1}`)}))
	r2 := f.update(true, hint(&pb.DocUpdate{Id: "a", Rev: r1[0].Rev, Deleted: true, Body: []byte(`{}`)}))
	same(r2, plain.update(true, &pb.DocUpdate{Id: "a", Rev: r1[0].Rev, Deleted: true, Body: []byte(`{}`)}))
	// recreate without _rev: the hint (for no parent) does not apply
	r3 := f.update(true, hint(&pb.DocUpdate{Id: "a", Body: []byte(`{"v":3}`)}))
	same(r3, plain.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"v":3}`)}))
	if !strings.HasPrefix(r3[0].Rev, "3-") {
		t.Fatalf("recreated rev %s, want 3-… (extends the deleted leaf)", r3[0].Rev)
	}
	// for its parent, the hint is what the copy uses
	r4 := f.update(true, &pb.DocUpdate{Id: "b", Body: []byte(`{}`), RevHash: "0123456789abcdef0123456789abcdef"})
	if r4[0].Rev != "1-0123456789abcdef0123456789abcdef" {
		t.Fatalf("rev %s, want the hinted hash", r4[0].Rev)
	}
}

// Spawn replaces a Reader left under the copy's name by an actor that is
// gone, and leaves a live copy's Reader alone when the name is taken.
func TestSpawnReaderLeftBehind(t *testing.T) {
	db := openTestDB(t)
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	cfg := Config{DB: db, Handle: 9, Name: "left", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	stale := &Reader{sys: sys}
	if _, ok := sys.ProcessRegistry.Add(stale, ReaderID("left")); !ok {
		t.Fatal("register the stale reader")
	}
	pid, err := Spawn(sys.Root, cfg, "left")
	if err != nil {
		t.Fatalf("spawn over a reader left behind: %v", err)
	}
	p, ok := sys.ProcessRegistry.GetLocal(ReaderID("left"))
	if !ok || p == stale {
		t.Fatalf("the reader left behind is still registered")
	}
	if _, err := Spawn(sys.Root, cfg, "left"); err == nil {
		t.Fatal("a second spawn under a live copy's name succeeded")
	}
	if q, ok := sys.ProcessRegistry.GetLocal(ReaderID("left")); !ok || q != p {
		t.Fatal("a failed spawn replaced the live copy's reader")
	}
	// the live copy's reads still answer
	r, err := actors.Ask[*pb.DocReply](context.Background(), sys.Root, actor.NewPID(pid.Address, ReaderID("left")), &pb.GetDoc{Id: "nope"})
	if err != nil || r.Error != nil || r.Info != nil {
		t.Fatalf("read through the reader: %v %v", r, err)
	}
}
