package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// liveCheck is how often a wait on another node's copy looks whether that
// node is still up.
const liveCheck = 250 * time.Millisecond

// hedgeAfter is how long a hedging quorum waits on the copies it asked
// before it asks the others as well.
const hedgeAfter = 250 * time.Millisecond

// A quorum is the one wait on shard copies that every fan-out with a
// quorum shares (doc reads, writes, db info, a changes or all_docs page, a
// longpoll). It asks copies and collects their answers on one channel
// (actors.Gather: no future, timer or goroutine per copy).
//
// The copies come in groups (wants). A group wants need good answers: it
// asks that many copies at first (first, when set, instead), another copy
// in place of each that fails, and, with hedge, all the copies it has not
// asked once hedgeAfter passes short of its answers (a copy on a node
// that died unseen never answers). A copy fails when its target is
// unreachable, when take judges its reply an error, or when its node is
// seen down at a liveness check every liveCheck (a node that hangs with
// its connections open never answers, and would hold the wait to its
// deadline). A group is settled when it has its good answers or no copy
// left to wait on; answers to a settled group, or from a copy already
// counted failed, are dropped.
//
// The wait ends when every group is settled, when a group settles without
// a good answer (what the caller wanted from it cannot be had), when take
// calls stop, or at the deadline (timeout, else ctx's) or ctx's end: then
// wait returns context.DeadlineExceeded or ctx.Err(). The first copy
// failure, whatever ended the wait, is failure().
//
// A quorum is for one wait; its fields are set before wait.
type quorum struct {
	c     *Coordinator
	wants []want
	// ask sends copy i of group g its request, with q.request, or its
	// answer when it is read on this goroutine, with q.put.
	ask     func(q *quorum, g, i int)
	hedge   bool
	timeout time.Duration // 0: actors.Timeout(ctx)

	gather  *actors.Gather
	groups  []group
	stride  int    // a copy's tag is g*stride + i
	pending []bool // by tag: asked, neither answered nor failed
	left    int    // groups not settled
	stopped bool
	failed  error
}

// want is a group of copies of which need must answer well.
type want struct {
	copies []*pb.ShardRef
	need   int
	first  int // copies asked at first; 0: need
}

type group struct {
	copies  []*pb.ShardRef
	need    int // good answers still wanted; 0 once settled
	next    int // the next copy to ask
	waiting int // asked, not settled
	good    int
}

// answer is one copy's reply, for take to judge.
type answer struct {
	group, copy int
	ref         *pb.ShardRef
	msg         any
}

// request sends copy i of group g msg at pid (for ask).
func (q *quorum) request(g, i int, pid *actor.PID, msg any) {
	q.gather.Request(g*q.stride+i, pid, msg)
}

// put hands in copy i of group g's answer, read on this goroutine (for ask).
func (q *quorum) put(g, i int, msg any) { q.gather.Put(g*q.stride+i, msg) }

// stop ends the wait once take returns: the caller has what it needs.
func (q *quorum) stop() { q.stopped = true }

// failure is the first copy failure of the wait, nil when none failed.
func (q *quorum) failure() error { return q.failed }

// wait asks the copies and collects their answers until it ends (see
// quorum). take sees each reply of a copy whose group is not settled; a
// nil error counts it as a good answer, else as the copy's failure.
func (q *quorum) wait(ctx context.Context, take func(answer) error) error {
	q.stride = 1
	for _, w := range q.wants {
		q.stride = max(q.stride, len(w.copies))
	}
	q.groups = make([]group, len(q.wants))
	for g, w := range q.wants {
		q.groups[g] = group{copies: w.copies, need: min(w.need, len(w.copies))}
		if q.groups[g].need > 0 {
			q.left++
		}
	}
	if q.left == 0 {
		return nil
	}
	q.pending = make([]bool, len(q.wants)*q.stride)
	q.gather = actors.NewGather(q.c.root, len(q.pending))
	defer q.gather.Close()
	for g, w := range q.wants {
		if q.groups[g].need == 0 {
			continue
		}
		n := w.first
		if n <= 0 {
			n = q.groups[g].need
		}
		// the last first: copies come this node's first, and ask may read
		// this node's on this goroutine, so the other nodes' requests (the
		// longer round trip) go out before it
		q.groups[g].next = min(n, len(w.copies))
		for i := q.groups[g].next - 1; i >= 0; i-- {
			q.send(g, i)
		}
	}
	timeout := q.timeout
	if timeout <= 0 {
		timeout = actors.Timeout(ctx)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	live := time.NewTicker(liveCheck)
	defer live.Stop()
	var hedge <-chan time.Time
	if q.hedge {
		t := time.NewTimer(hedgeAfter)
		defer t.Stop()
		hedge = t.C
	}
	for q.left > 0 && !q.stopped {
		select {
		case a := <-q.gather.C():
			if !q.pending[a.Tag] {
				continue // counted failed already
			}
			g, i := a.Tag/q.stride, a.Tag%q.stride
			err := a.Err
			if err == nil && q.groups[g].need > 0 {
				err = take(answer{group: g, copy: i, ref: q.groups[g].copies[i], msg: a.Msg})
			}
			q.settle(g, i, err)
		case <-live.C:
			for tag, p := range q.pending {
				if !p {
					continue
				}
				g, i := tag/q.stride, tag%q.stride
				if ref := q.groups[g].copies[i]; q.c.seenDown(ref) {
					q.settle(g, i, errDown(ref))
				}
			}
		case <-hedge:
			for g := range q.groups {
				for q.groups[g].need > 0 && q.groups[g].next < len(q.groups[g].copies) {
					q.send(g, q.groups[g].next)
					q.groups[g].next++
				}
			}
		case <-deadline.C:
			return context.DeadlineExceeded
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (q *quorum) send(g, i int) {
	q.pending[g*q.stride+i] = true
	q.groups[g].waiting++
	q.ask(q, g, i)
}

// settle counts copy i of group g answered (err nil) or failed.
func (q *quorum) settle(g, i int, err error) {
	q.pending[g*q.stride+i] = false
	gr := &q.groups[g]
	gr.waiting--
	if gr.need == 0 {
		return // settled already: its other answers are not needed
	}
	if err == nil {
		gr.need--
		gr.good++
	} else {
		if q.failed == nil {
			q.failed = err
		}
		if gr.next < len(gr.copies) {
			// another copy in its place
			gr.next++
			q.send(g, gr.next-1)
		}
	}
	if gr.need == 0 || gr.waiting == 0 {
		gr.need = 0
		q.left--
		if gr.good == 0 {
			q.stopped = true
		}
	}
}

// seenDown reports whether ref is on another node that is now seen down:
// an ask waiting on that copy has failed (a node that hangs with its
// connections open never answers).
func (c *Coordinator) seenDown(ref *pb.ShardRef) bool {
	return ref.Node != c.pl.Self() && !c.pl.Alive(ref.Node)
}

// errDown is the failure of an ask to a copy whose node is seen down.
func errDown(ref *pb.ShardRef) error {
	return fmt.Errorf("%w: node %s is down", actors.ErrUnreachable, ref.Node)
}
