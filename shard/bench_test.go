package shard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

func openTestDB(tb testing.TB) *badger.DB {
	tb.Helper()
	opts := badger.DefaultOptions(tb.TempDir()).WithSyncWrites(true).WithValueThreshold(1024).
		WithDetectConflicts(false).WithMemTableSize(32 << 20).WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkBadgerSyncedCommit is the storage floor of one durable update:
// one badger transaction with a doc-sized value, committed with SyncWrites.
// Sequential single-doc updates cannot go faster than this.
func BenchmarkBadgerSyncedCommit(b *testing.B) {
	for _, size := range []int{200, 14500} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			db := openTestDB(b)
			val := bytes.Repeat([]byte("x"), size)
			i := 0
			for b.Loop() {
				i++
				err := db.Update(func(txn *badger.Txn) error {
					return txn.Set([]byte(fmt.Sprintf("k%08d", i)), val)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShardSequentialUpdate is one writer updating through the shard
// actor: tag, group commit of one, synced badger commit, reply.
func BenchmarkShardSequentialUpdate(b *testing.B) {
	db := openTestDB(b)
	sys := quietSystem()
	b.Cleanup(sys.Shutdown)
	pid := sys.Root.Spawn(Props(Config{DB: db, Handle: 1, Name: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	body := []byte(`{"data":"` + string(bytes.Repeat([]byte("x"), 14400)) + `"}`)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		msg := &pb.UpdateDocs{NewEdits: true, Reply: true, Docs: []*pb.DocUpdate{{Id: fmt.Sprintf("d%08d", i), Body: body}}}
		res, err := actors.Ask[*pb.UpdateResult](ctx, sys.Root, pid, msg)
		if err != nil || res.Results[0].Error != nil {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkShardConcurrentUpdates shows group commit: many writers, one
// synced commit per group.
func BenchmarkShardConcurrentUpdates(b *testing.B) {
	db := openTestDB(b)
	sys := quietSystem()
	b.Cleanup(sys.Shutdown)
	pid := sys.Root.Spawn(Props(Config{DB: db, Handle: 1, Name: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	body := []byte(`{"data":"` + string(bytes.Repeat([]byte("x"), 1400)) + `"}`)
	ctx := context.Background()
	b.SetParallelism(64)
	var n atomic.Int64
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			id := fmt.Sprintf("d%d", n.Add(1))
			msg := &pb.UpdateDocs{NewEdits: true, Reply: true, Docs: []*pb.DocUpdate{{Id: id, Body: body}}}
			if _, err := actors.Ask[*pb.UpdateResult](ctx, sys.Root, pid, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

// BenchmarkShardReadDoc is the shard's part of a GET: ask the actor for a
// medium doc (14.5 KB) and get it back, from the node's read pool. A
// quorum read can hide another node's round trip behind this much and no
// more.
func BenchmarkShardReadDoc(b *testing.B) {
	db := openTestDB(b)
	sys := quietSystem()
	b.Cleanup(sys.Shutdown)
	reads := NewReadPool(8)
	b.Cleanup(reads.Close)
	pid := sys.Root.Spawn(Props(Config{DB: db, Handle: 1, Name: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Reads: reads}))
	body := []byte(`{"data":"` + string(bytes.Repeat([]byte("x"), 14400)) + `"}`)
	ctx := context.Background()
	var docs []*pb.DocUpdate
	for i := range 1000 {
		docs = append(docs, &pb.DocUpdate{Tag: uint32(i), Id: fmt.Sprintf("d%04d", i), Body: body})
	}
	if _, err := actors.Ask[*pb.UpdateResult](ctx, sys.Root, pid, &pb.UpdateDocs{NewEdits: true, Reply: true, Docs: docs}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i = (i + 7919) % 1000
		r, err := actors.Ask[*pb.DocReply](ctx, sys.Root, pid, &pb.GetDoc{Id: fmt.Sprintf("d%04d", i)})
		if err != nil || len(r.Bodies) != 1 {
			b.Fatal(err, r)
		}
	}
}
