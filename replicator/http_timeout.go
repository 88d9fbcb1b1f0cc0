package replicator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// TimeoutError is a request whose peer sent nothing for the endpoint's
// Timeout: no headers, or no more of the body, while it was awaited.
type TimeoutError struct {
	URL   string // redacted
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timeout: no answer from %s for %v", e.URL, e.After)
}

// Timeout tells it apart as net.Error's timeouts are.
func (e *TimeoutError) Timeout() bool { return true }

// watchdog fails a request whose peer is silent for d. It runs while the
// request waits on the peer (dialling, sending the body, waiting for the
// headers, inside a Read of the answer) and is paused while the caller
// holds the answer unread, as a feed does under backpressure: that
// silence is ours, not the peer's. nil: no limit.
type watchdog struct {
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	err    *TimeoutError

	mu      sync.Mutex
	t       *time.Timer
	headers bool // the answer's headers came: sending no longer counts
}

// watch starts a watchdog over a request to be made with the returned
// context; done releases it.
func (e *HTTPEndpoint) watch(ctx context.Context, where string) (context.Context, *watchdog) {
	if e.Timeout <= 0 {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{d: e.Timeout, ctx: ctx, cancel: cancel, err: &TimeoutError{URL: where, After: e.Timeout}}
	w.t = time.AfterFunc(w.d, func() { cancel(w.err) })
	return ctx, w
}

// sent: the transport took more of the request body, so the peer reads.
func (w *watchdog) sent() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.headers {
		w.t.Reset(w.d)
	}
	w.mu.Unlock()
}

// answered: the headers came (or the request failed); the body's reads
// arm the watchdog from now on.
func (w *watchdog) answered() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.headers = true
	w.t.Stop()
	w.mu.Unlock()
}

// reading and idle bracket a Read of the answer (one reader at a time).
func (w *watchdog) reading() {
	if w != nil {
		w.t.Reset(w.d)
	}
}

func (w *watchdog) idle() {
	if w != nil {
		w.t.Stop()
	}
}

func (w *watchdog) done() {
	if w != nil {
		w.t.Stop()
		w.cancel(nil)
	}
}

// explain turns the error of a request the watchdog cancelled into the
// timeout it was.
func (w *watchdog) explain(err error) error {
	if w != nil && errors.Is(context.Cause(w.ctx), w.err) {
		return w.err
	}
	return err
}

// sending is a request body whose reads show the peer is taking it.
type sending struct {
	r  io.Reader
	wd *watchdog
}

func (s *sending) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.wd.sent()
	}
	return n, err
}

// receiving is an answer's body read under the watchdog.
type receiving struct {
	rc io.ReadCloser
	wd *watchdog
}

func (r *receiving) Read(p []byte) (int, error) {
	r.wd.reading()
	n, err := r.rc.Read(p)
	r.wd.idle()
	if err != nil && err != io.EOF {
		err = r.wd.explain(err)
	}
	return n, err
}

func (r *receiving) Close() error {
	err := r.rc.Close()
	r.wd.done()
	return err
}
