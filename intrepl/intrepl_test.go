package intrepl

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"

	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
)

// lossy stands in front of a shard copy and drops the casts it is told to,
// as a connection that drops and comes back would.
type lossy struct {
	to   *actor.PID
	drop *atomic.Int32
}

func (l *lossy) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.UpdateDocs:
		if !m.Reply && l.drop.Add(-1) >= 0 {
			return
		}
		ctx.Forward(l.to)
	case *actor.Started, *actor.Stopping, *actor.Stopped:
	default:
		ctx.Forward(l.to)
	}
}

// setup opens a badger in a temporary dir and an actor system, both
// closed with the test, and a logger that drops everything.
func setup(t *testing.T) (*badger.DB, *actor.ActorSystem, *slog.Logger) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return db, sys, quiet
}

// A cast lost on the way to the peer is noticed before the checkpoint
// passes it: the push fails, and the next one sends the page again.
func TestLostCastIsSentAgain(t *testing.T) {
	db, sys, quiet := setup(t)
	local := sys.Root.Spawn(shard.Props(shard.Config{DB: db, Handle: 1, Name: "local", Logger: quiet}))
	peer := sys.Root.Spawn(shard.Props(shard.Config{DB: db, Handle: 2, Name: "peer", Logger: quiet}))
	drop := &atomic.Int32{}
	drop.Store(1)
	front := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &lossy{to: peer, drop: drop} }))
	ctx := context.Background()

	var docs []*pb.DocUpdate
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("d%02d", i)
		ids = append(ids, id)
		docs = append(docs, &pb.DocUpdate{Tag: uint32(i), Id: id, Body: []byte(`{"i":1}`)})
	}
	if _, err := actors.Ask[*pb.UpdateResult](ctx, sys.Root, local, &pb.UpdateDocs{Docs: docs, NewEdits: true, Reply: true}); err != nil {
		t.Fatal(err)
	}
	p := Pair{Key: "t", Local: local, Peer: front, PeerNode: "peer"}
	if _, err := Push(ctx, sys.Root, p); err == nil || !strings.Contains(err.Error(), "peer lacks") {
		t.Fatalf("push with a lost cast: %v, want a 'peer lacks' error", err)
	}
	n, err := Push(ctx, sys.Root, p)
	if err != nil || n != len(ids) {
		t.Fatalf("second push: %d revs, %v; want %d", n, err, len(ids))
	}
	got, err := actors.Ask[*pb.DocInfosReply](ctx, sys.Root, peer, &pb.GetDocInfos{Ids: ids})
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range got.Infos {
		if info == nil || len(info.Nodes) == 0 {
			t.Fatalf("peer lacks %s", ids[i])
		}
	}
	if n, err := Push(ctx, sys.Root, p); err != nil || n != 0 {
		t.Fatalf("third push: %d revs, %v; want nothing to send", n, err)
	}
}

// A peer copy dropped and made again under the same node name (a node
// removed and re-added) has nothing: the checkpoint towards the old copy
// must not make the push skip what the old copy had.
func TestRemadePeerCopyGetsEverything(t *testing.T) {
	db, sys, quiet := setup(t)
	// copies made as the catalog makes them: meta with a copy id
	spawn := func(h uint32, copyID string) *actor.PID {
		mb, _ := proto.Marshal(&pb.ShardMeta{RevsLimit: shard.DefaultRevsLimit, CopyId: copyID})
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(append(shard.Prefix(h), 'm'), mb) }); err != nil {
			t.Fatal(err)
		}
		return sys.Root.Spawn(shard.Props(shard.Config{DB: db, Handle: h, Name: copyID, Logger: quiet}))
	}
	local := spawn(1, "local")
	ctx := context.Background()
	var docs []*pb.DocUpdate
	for i := range 10 {
		docs = append(docs, &pb.DocUpdate{Tag: uint32(i), Id: fmt.Sprintf("d%02d", i), Body: []byte(`{}`)})
	}
	if _, err := actors.Ask[*pb.UpdateResult](ctx, sys.Root, local, &pb.UpdateDocs{Docs: docs, NewEdits: true, Reply: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := Push(ctx, sys.Root, Pair{Key: "a", Local: local, Peer: spawn(2, "peer-old"), PeerNode: "peer"}); err != nil || n != 10 {
		t.Fatalf("push to the first copy: %d %v", n, err)
	}
	n, err := Push(ctx, sys.Root, Pair{Key: "b", Local: local, Peer: spawn(3, "peer-new"), PeerNode: "peer"})
	if err != nil || n != 10 {
		t.Fatalf("push to the remade copy: %d revs, %v; want all 10", n, err)
	}
}

// A copy that missed a security or revs_limit change gets it from a copy
// where it was set later; a later change on the peer is not undone.
func TestSettingsReachACopyThatMissedThem(t *testing.T) {
	db, sys, quiet := setup(t)
	local := sys.Root.Spawn(shard.Props(shard.Config{DB: db, Handle: 1, Name: "local", Logger: quiet}))
	peer := sys.Root.Spawn(shard.Props(shard.Config{DB: db, Handle: 2, Name: "peer", Logger: quiet}))
	ctx := context.Background()
	set := func(pid *actor.PID, m *pb.SetMeta) {
		t.Helper()
		if r, err := actors.Ask[*pb.MetaReply](ctx, sys.Root, pid, m); err != nil || r.Error != nil {
			t.Fatalf("set meta: %v %v", err, r)
		}
	}
	meta := func(pid *actor.PID) *pb.ShardMeta {
		t.Helper()
		info, err := actors.Ask[*pb.ShardInfo](ctx, sys.Root, pid, &pb.GetShardInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return info.Meta
	}
	set(local, &pb.SetMeta{Security: []byte(`{"members":{"names":["a"]}}`), Stamp: 100})
	set(local, &pb.SetMeta{RevsLimit: 7, Stamp: 100})
	p := Pair{Key: "s", Local: local, Peer: peer, PeerNode: "peer"}
	if _, err := Push(ctx, sys.Root, p); err != nil {
		t.Fatal(err)
	}
	if m := meta(peer); string(m.Security) != `{"members":{"names":["a"]}}` || m.RevsLimit != 7 {
		t.Fatalf("peer after push: security %s revs_limit %d", m.Security, m.RevsLimit)
	}
	// the peer changes security later; an older copy must not undo it,
	// neither by a push nor by a late stamped set
	set(peer, &pb.SetMeta{Security: []byte(`{"members":{"names":["b"]}}`), Stamp: 200})
	if _, err := Push(ctx, sys.Root, p); err != nil {
		t.Fatal(err)
	}
	set(peer, &pb.SetMeta{Security: []byte(`{"members":{"names":["old"]}}`), Stamp: 150})
	if m := meta(peer); string(m.Security) != `{"members":{"names":["b"]}}` || m.RevsLimit != 7 {
		t.Fatalf("peer after its own later change: security %s revs_limit %d", m.Security, m.RevsLimit)
	}
}
