package node

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"
	"github.com/settee/settee/storage"
)

// Creating databases while badger blocks writes now and then (a reclaim's
// DropPrefix) spawns each copy once: the record's write is retried, and a
// retry used to list the copies again, so the create failed with "name
// exists" (seen in CI when an admin test's detached compaction overlapped
// a replication's create_target).
func TestCreateWhileWritesAreBlocked(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	c, err := newCatalog(db, sys, "n1", quiet, nil, nil, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			_ = storage.DropPrefix(db, []byte("no-such-prefix"))
			time.Sleep(200 * time.Microsecond) // let writes through now and then
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for i := range 40 {
		name := "db" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := c.Create(context.Background(), name, 4, nil, 1, nil, false); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		rec := c.record(name)
		if len(rec.Shards) != 4 {
			t.Fatalf("%s has %d copies, want 4", name, len(rec.Shards))
		}
	}
	c.mu.RLock()
	spawned := len(c.pids)
	c.mu.RUnlock()
	if spawned != 40*4 {
		t.Fatalf("%d shard actors for 40 databases of 4 ranges", spawned)
	}
}
