package coordinator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// fakeNodes is a placement of copies named by node, each node one actor
// that answers after a delay (negative: never).
type fakeNodes struct {
	sys  *actor.ActorSystem
	pids map[string]*actor.PID
	down sync.Map // node -> true once seen down
}

func (f *fakeNodes) Lookup(context.Context, string) (*pb.DbRecord, error) { return nil, nil }
func (f *fakeNodes) PID(ref *pb.ShardRef) *actor.PID                      { return f.pids[ref.Node] }
func (f *fakeNodes) Self() string                                         { return "n0" }
func (f *fakeNodes) Alive(n string) bool                                  { _, d := f.down.Load(n); return !d }

// node starts an actor answering reply after delay (< 0: never).
func (f *fakeNodes) node(name string, delay time.Duration, reply any) *pb.ShardRef {
	f.pids[name] = f.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*pb.GetShardInfo); !ok || delay < 0 {
			return
		}
		to := ctx.Sender()
		time.AfterFunc(delay, func() { f.sys.Root.Send(to, reply) })
	}))
	return &pb.ShardRef{Node: name}
}

func fakeCluster(t *testing.T) (*Coordinator, *fakeNodes) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	f := &fakeNodes{sys: sys, pids: map[string]*actor.PID{}}
	return New(sys.Root, f), f
}

var (
	good = &pb.ShardInfo{Meta: &pb.ShardMeta{}}
	bad  = &pb.ShardInfo{Error: &pb.Error{Code: "internal_error", Reason: "test"}}
)

// run waits on q, its copies asked GetShardInfo, and returns the nodes
// take saw, in order, how long it took and what wait returned.
func run(t *testing.T, c *Coordinator, q *quorum, stopAfter int) ([]string, time.Duration, error) {
	t.Helper()
	q.c = c
	q.ask = func(q *quorum, g, i int) { q.request(g, i, c.pl.PID(q.wants[g].copies[i]), &pb.GetShardInfo{}) }
	var mu sync.Mutex
	var seen []string
	start := time.Now()
	err := q.wait(context.Background(), func(a answer) error {
		mu.Lock()
		seen = append(seen, a.ref.Node)
		mu.Unlock()
		if len(seen) == stopAfter {
			q.stop()
		}
		if si := a.msg.(*pb.ShardInfo); si.Error != nil {
			return si.Error
		}
		return nil
	})
	return seen, time.Since(start), err
}

func TestQuorum(t *testing.T) {
	const soon = 20 * time.Millisecond
	t.Run("hedge asks the rest", func(t *testing.T) {
		c, f := fakeCluster(t)
		cps := []*pb.ShardRef{f.node("n0", soon, good), f.node("n1", -1, good), f.node("n2", soon, good)}
		q := &quorum{wants: []want{{copies: cps, need: 2}}, hedge: true, timeout: 5 * time.Second}
		seen, took, err := run(t, c, q, 0)
		if err != nil || !slices.Equal(seen, []string{"n0", "n2"}) || took < hedgeAfter || took > 2*time.Second {
			t.Fatalf("wait %v, saw %v in %v; want n0, then n2 after the hedge", err, seen, took)
		}
	})
	t.Run("no hedge waits to the deadline", func(t *testing.T) {
		c, f := fakeCluster(t)
		cps := []*pb.ShardRef{f.node("n0", soon, good), f.node("n1", -1, good), f.node("n2", soon, good)}
		q := &quorum{wants: []want{{copies: cps, need: 2}}, timeout: 600 * time.Millisecond}
		seen, _, err := run(t, c, q, 0)
		if !errors.Is(err, context.DeadlineExceeded) || !slices.Equal(seen, []string{"n0"}) {
			t.Fatalf("wait %v, saw %v; want the deadline after n0", err, seen)
		}
	})
	t.Run("a failed copy brings in the next", func(t *testing.T) {
		c, f := fakeCluster(t)
		cps := []*pb.ShardRef{f.node("n0", soon, good), f.node("n1", soon, bad), f.node("n2", soon, good)}
		q := &quorum{wants: []want{{copies: cps, need: 2}}, timeout: 5 * time.Second}
		seen, _, err := run(t, c, q, 0)
		if err != nil || len(seen) != 3 || !errors.Is(q.failure(), bad.Error) {
			t.Fatalf("wait %v, saw %v, failure %v; want all three (no hedge), n1's failure", err, seen, q.failure())
		}
	})
	t.Run("a copy seen down has failed; its late reply is dropped", func(t *testing.T) {
		c, f := fakeCluster(t)
		cps := []*pb.ShardRef{f.node("n0", time.Second, good), f.node("n1", 3*liveCheck, good)}
		time.AfterFunc(soon, func() { f.down.Store("n1", true) })
		q := &quorum{wants: []want{{copies: cps, need: 2}}, timeout: 5 * time.Second}
		seen, _, err := run(t, c, q, 0)
		if err != nil || !slices.Equal(seen, []string{"n0"}) || !errors.Is(q.failure(), actors.ErrUnreachable) {
			t.Fatalf("wait %v, saw %v, failure %v; want n0 alone and n1 unreachable", err, seen, q.failure())
		}
	})
	t.Run("a group without a good answer ends the wait", func(t *testing.T) {
		c, f := fakeCluster(t)
		f.node("n0", -1, good)
		q := &quorum{wants: []want{
			{copies: []*pb.ShardRef{{Node: "n0"}}, need: 1},
			{copies: []*pb.ShardRef{{Node: "gone"}}, need: 1}, // no such actor
		}, timeout: 5 * time.Second}
		f.pids["gone"] = actor.NewPID(f.sys.Address(), "gone")
		seen, took, err := run(t, c, q, 0)
		if err != nil || len(seen) != 0 || took > 2*time.Second || !errors.Is(q.failure(), actors.ErrUnreachable) {
			t.Fatalf("wait %v, saw %v in %v, failure %v; want an early end, unreachable", err, seen, took, q.failure())
		}
	})
	t.Run("first asks more copies than need", func(t *testing.T) {
		c, f := fakeCluster(t)
		cps := []*pb.ShardRef{f.node("n0", -1, good), f.node("n1", -1, good), f.node("n2", soon, good)}
		q := &quorum{wants: []want{{copies: cps, need: 1, first: 3}}, timeout: 5 * time.Second}
		seen, _, err := run(t, c, q, 0)
		if err != nil || !slices.Equal(seen, []string{"n2"}) {
			t.Fatalf("wait %v, saw %v; want n2 (no hedge)", err, seen)
		}
	})
	t.Run("stop ends it", func(t *testing.T) {
		c, f := fakeCluster(t)
		cps := []*pb.ShardRef{f.node("n0", -1, good), f.node("n1", soon, good), f.node("n2", -1, good)}
		q := &quorum{wants: []want{{copies: cps, need: 3}}, timeout: 5 * time.Second}
		seen, took, err := run(t, c, q, 1)
		if err != nil || !slices.Equal(seen, []string{"n1"}) || took > 2*time.Second {
			t.Fatalf("wait %v, saw %v in %v; want n1, then the end", err, seen, took)
		}
	})
}
