package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progress writes status lines while a phase runs. Writes are serialised:
// the ticker goroutine of a phase and the runner share the writer.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	every time.Duration
}

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// Write lets the fabric_bench text go to the progress writer in JSON mode,
// serialised with the ticker lines.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// track prints "name: done/total" every interval until the returned stop
// function is called; stop waits for the ticker goroutine to end. total <= 0
// means unknown.
func (p *progress) track(name string, total int64, done *atomic.Int64) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				n := done.Load()
				rate := float64(n) / now.Sub(start).Seconds()
				if total > 0 {
					p.printf("  %s: %d/%d (%.0f/s, %.1fs)\n", name, n, total, rate, now.Sub(start).Seconds())
				} else {
					p.printf("  %s: %d (%.0f/s, %.1fs)\n", name, n, rate, now.Sub(start).Seconds())
				}
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}
