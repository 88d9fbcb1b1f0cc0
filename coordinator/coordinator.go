package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// Coordinator runs requests against a node's view of the cluster.
type Coordinator struct {
	root    *actor.RootContext
	pl      Placement
	reads   PointReads // nil: reads go to the copies' actors
	views   ViewService
	onWrite atomic.Pointer[func()]
}

// OnWrite registers a function called after every write (internal
// replication's kick; it must not block).
func (c *Coordinator) OnWrite(f func()) { c.onWrite.Store(&f) }

// New returns a coordinator sending through root.
func New(root *actor.RootContext, pl Placement) *Coordinator {
	c := &Coordinator{root: root, pl: pl}
	c.reads, _ = pl.(PointReads)
	return c
}

func (c *Coordinator) lookup(ctx context.Context, db string) (*pb.DbRecord, []Range, error) {
	rec, err := c.pl.Lookup(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return rec, Ranges(rec), nil
}

// copies returns the copies of a range on live nodes, this node's first.
// When none is alive it returns them all: a request then fails on its own
// rather than claiming the data is gone.
func (c *Coordinator) copies(r Range) []*pb.ShardRef {
	self := c.pl.Self()
	out := make([]*pb.ShardRef, 0, len(r.Copies))
	for _, cp := range r.Copies {
		if cp.Node == self {
			out = append(out, cp)
		}
	}
	for _, cp := range r.Copies {
		if cp.Node != self && c.pl.Alive(cp.Node) {
			out = append(out, cp)
		}
	}
	if len(out) == 0 {
		return r.Copies
	}
	return out
}

// readCopy picks the copy of a range that serves a read: the local one if
// there is one, else a live one.
func (c *Coordinator) readCopy(r Range) *actor.PID { return c.pl.PID(c.readRef(r)) }

func (c *Coordinator) readRef(r Range) *pb.ShardRef { return c.copies(r)[0] }

// otherCopy is a live copy of r on a node not in skip, this node's first.
func (c *Coordinator) otherCopy(r Range, skip map[string]bool) *pb.ShardRef {
	for _, cp := range c.copies(r) {
		if !skip[cp.Node] && (cp.Node == c.pl.Self() || c.pl.Alive(cp.Node)) {
			return cp
		}
	}
	return nil
}

func (c *Coordinator) docShard(ctx context.Context, db, id string) (*actor.PID, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	return c.readCopy(ranges[RangeOf(ranges, id)]), nil
}

// askCopy asks one shard copy through a quorum of one: when the copy is
// on another node that is seen down while the ask waits, it fails then
// rather than at its deadline (a request in flight to a node that stopped
// is never answered).
func askCopy[T any](ctx context.Context, c *Coordinator, ref *pb.ShardRef, msg any) (T, error) {
	if ref.Node != c.pl.Self() {
		return askResending[T](ctx, c, ref, c.pl.PID(ref), msg)
	}
	var reply T
	got := false
	q := &quorum{c: c, wants: []want{{copies: []*pb.ShardRef{ref}, need: 1}}}
	q.ask = func(q *quorum, g, i int) { q.request(g, i, c.pl.PID(ref), msg) }
	err := q.wait(ctx, func(a answer) error {
		t, ok := a.msg.(T)
		if !ok {
			return fmt.Errorf("coordinator: unexpected reply %T", a.msg)
		}
		reply, got = t, true
		return nil
	})
	if err == nil && !got {
		err = q.failure()
	}
	return reply, err
}

// askAll sends msg to every live copy of every range of db, all before
// awaiting any, and returns their answers; the first failure or shard
// error ends it.
func askAll[T replyWithError](ctx context.Context, c *Coordinator, db string, msg any, what string) ([]T, error) {
	out, _, err := askAllRanges[T](ctx, c, db, msg, what)
	return out, err
}

// askAllRanges is askAll, also telling each reply's range (its index in
// the database's ranges).
func askAllRanges[T replyWithError](ctx context.Context, c *Coordinator, db string, msg any, what string) ([]T, []int, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	var futures []*actor.Future
	var rng []int
	to := actors.Timeout(ctx)
	for i, r := range ranges {
		for _, cp := range c.copies(r) {
			futures = append(futures, c.root.RequestFuture(c.pl.PID(cp), msg, to))
			rng = append(rng, i)
		}
	}
	out := make([]T, 0, len(futures))
	for _, f := range futures {
		r, err := actors.Await[T](ctx, f)
		if err != nil {
			return nil, nil, fmt.Errorf("coordinator: %s: %w", what, err)
		}
		if e := r.GetError(); e != nil {
			return nil, nil, e
		}
		out = append(out, r)
	}
	return out, rng, nil
}

// resendAfter is how long a read asked of one copy on another node goes
// without an answer before it is asked again (then twice as long, up to
// maxAsks asks). The reads asked so (a page of _all_docs, _changes or a
// view, a doc) are idempotent, and the second ask of a slow one waits on
// the same work; but a reply can be lost when the asking node has just
// restarted (the other node's connection back to it is the dead
// process's until it reconnects), and one ask alone would then wait out
// the whole timeout: a _find through a restarted node waited 61 s in 2 of
// 4 runs of TestMangoClusterTwoCopies.
const (
	resendAfter = 2 * time.Second
	maxAsks     = 6 // 2+4+...+64 s covers the default timeout
)

// askResending asks one copy on another node (at pid) for a read, asking
// again while no answer comes (resendAfter); the first answer wins. It
// fails when every ask failed, when the copy's node is seen down, at the
// timeout or with ctx.
func askResending[T any](ctx context.Context, c *Coordinator, ref *pb.ShardRef, pid *actor.PID, msg any) (T, error) {
	var zero T
	deadline := time.NewTimer(actors.Timeout(ctx))
	defer deadline.Stop()
	live := time.NewTicker(liveCheck)
	defer live.Stop()
	g := actors.NewGather(c.root, maxAsks)
	defer g.Close()
	asked, wait := 1, resendAfter
	g.Request(0, pid, msg)
	resend := time.NewTimer(wait)
	defer resend.Stop()
	var lastErr error
	for answered := 0; ; {
		select {
		case a := <-g.C():
			answered++
			if a.Err == nil {
				if r, ok := a.Msg.(T); ok {
					return r, nil
				}
				a.Err = fmt.Errorf("coordinator: unexpected reply %T", a.Msg)
			}
			lastErr = a.Err
			if answered == asked {
				return zero, lastErr
			}
		case <-resend.C:
			if asked < maxAsks {
				g.Request(asked, pid, msg)
				asked++
				wait *= 2
				resend.Reset(wait)
			}
		case <-live.C:
			if c.seenDown(ref) {
				return zero, errDown(ref)
			}
		case <-deadline.C:
			return zero, context.DeadlineExceeded
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}
