package replicator

import (
	"context"
	"time"
)

// maxBackoff caps the doubling delay between retries of a request.
const maxBackoff = 10 * time.Second

// backoff is the wait between tries of one request (or of one feed since
// its last page): the endpoint's Backoff, doubling up to maxBackoff. Every
// retry loop of the package waits through it, so they all back off alike.
type backoff struct{ delay time.Duration }

func (e *HTTPEndpoint) backoff() *backoff { return &backoff{delay: e.Backoff} }

// next sleeps the current delay and doubles it. It returns ctx's error
// when ctx ends first: a stopping job does not sit out a delay.
func (b *backoff) next(ctx context.Context) error {
	if err := sleep(ctx, b.delay); err != nil {
		return err
	}
	b.delay = min(b.delay*2, maxBackoff)
	return nil
}

// sleep waits d or until ctx ends, and then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
