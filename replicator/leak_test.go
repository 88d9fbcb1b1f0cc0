package replicator_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/internal/testserver"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/replicator"
)

// noDBs is a cluster without databases: the scheduler's watcher finds no
// _replicator and keeps looking, and the jobs under test run HTTP to HTTP.
type noDBs struct{}

func (noDBs) Lookup(context.Context, string) (*pb.DbRecord, error) {
	return nil, coordinator.ErrDBNotFound
}
func (noDBs) PID(*pb.ShardRef) *actor.PID { return nil }
func (noDBs) Self() string                { return "leak" }
func (noDBs) Alive(string) bool           { return false }

// TestSchedulerCloseLeavesNoGoroutine: once Scheduler.Close returns,
// nothing the scheduler started runs, whatever its jobs were doing: one
// long-polling a caught-up source, one whose feed stalled mid-answer (its
// reader's goroutine blocked in a Read), and one stopped just before Close
// whose stop checkpoint waits on a silent target.
//
// Not parallel: goleak looks at every goroutine of the process, and the
// parallel tests wait while this one runs.
func TestSchedulerCloseLeavesNoGoroutine(t *testing.T) {
	a := testserver.Start(t)
	must(t, a, "PUT", "/src", nil, 201)
	loadDocs(t, a, "src", 0, 20, "")
	for _, db := range []string{"t1", "t2", "t3"} {
		must(t, a, "PUT", "/"+db, nil, 201)
	}
	stalled, silentTgt := newProxy(t, a), newProxy(t, a)
	// the limit=0 count goes through, the feed sends half its answer
	stalled.set(&fault{kind: stall, match: "GET _changes", after: 1, cut: 0.5})
	silentTgt.set(&fault{kind: silent, match: "PUT _local"})
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	coord := coordinator.New(sys.Root, noDBs{})

	// what runs now (the node, the proxies, the test runner) is not the
	// scheduler's
	before := goleak.IgnoreCurrent()
	s := replicator.Start(replicator.Config{System: sys, Coord: coord, ServerUUID: "leak", NodeName: "leak"})
	ctx := context.Background()
	rep := func(src, tgt string, extra string) []byte {
		return []byte(`{"source":"` + src + `","target":"` + tgt + `","continuous":true` + extra + `}`)
	}
	for _, r := range [][]byte{
		rep(dbURL(a, "src"), dbURL(a, "t1"), ""),
		rep(stalled.dbURL("src"), dbURL(a, "t2"), ""),
		rep(dbURL(a, "src"), silentTgt.dbURL("t3"), ""),
	} {
		if st, b := s.Replicate(ctx, r); st != 202 {
			t.Fatalf("POST _replicate %s: %d %s", r, st, b)
		}
	}
	waitFor(t, 10*time.Second, "t1 and t3 in sync", func() bool { return ndocs(t, a, "t1") == 20 && ndocs(t, a, "t3") == 20 })
	waitFor(t, 10*time.Second, "the stalled feed", func() bool { return stalled.count("GET _changes") >= 2 })
	if st, b := s.Replicate(ctx, rep(dbURL(a, "src"), silentTgt.dbURL("t3"), `,"cancel":true`)); st != 200 {
		t.Fatalf("cancel: %d %s", st, b)
	}
	s.Close()

	replicator.CloseIdleConnections()
	// the proxies' own connections to the node, and the test's
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	// protoactor starts its dead-letter log throttle lazily, on the actor
	// system's first dead letter (a stopped job's actor messaged late);
	// it belongs to the system, not the scheduler, and ends by itself
	goleak.VerifyNone(t, before,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
