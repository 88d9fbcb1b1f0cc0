package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 60 * time.Second

// ErrUnreachable is returned when the target actor does not exist (a dead
// letter): a shard that was stopped, or a node that went away.
var ErrUnreachable = errors.New("actors: target unreachable")

// Timeout turns ctx's deadline into a future timeout.
func Timeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Millisecond
	}
	return DefaultTimeout
}

// Ask sends msg to pid as a request and waits for a reply of type T. The
// timeout comes from ctx; a cancelled ctx returns at once.
func Ask[T any](ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any) (T, error) {
	f := root.RequestFuture(pid, msg, Timeout(ctx))
	return Await[T](ctx, f)
}

// Await waits for a future started earlier (to fan out several requests
// before waiting on any). The future's own timeout (from ctx's deadline)
// bounds the wait; a cancelled ctx is reported once the answer is in.
// Waiting on the future directly, rather than racing it against ctx.Done
// in another goroutine, saves a goroutine and two wake-ups per request.
func Await[T any](ctx context.Context, f *actor.Future) (T, error) {
	var zero T
	res, err := f.Result()
	switch {
	case errors.Is(err, actor.ErrTimeout):
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, context.DeadlineExceeded
	case errors.Is(err, actor.ErrDeadLetter):
		return zero, ErrUnreachable
	case err != nil:
		return zero, err
	}
	if _, ok := res.(*actor.DeadLetterResponse); ok {
		return zero, ErrUnreachable
	}
	t, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("actors: unexpected reply %T", res)
	}
	return t, nil
}
