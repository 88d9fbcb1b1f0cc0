package shard

import "sync"

// ReadPool runs shard reads on long-lived goroutines. A read on a fresh
// goroutine pays for growing its stack through badger's call chain on
// every request (runtime.newstack was 12% of a GET's CPU in pprof); a
// pooled goroutine keeps the stack it grew. A read never waits for a
// worker: when every worker is busy it gets a goroutine of its own, so a
// slow page read cannot hold up the point reads behind it.
type ReadPool struct {
	work chan func() // never closed: Go after Close starts a goroutine
	quit chan struct{}
	wg   sync.WaitGroup
}

// NewReadPool starts n workers.
func NewReadPool(n int) *ReadPool {
	p := &ReadPool{work: make(chan func()), quit: make(chan struct{})}
	p.wg.Add(n)
	for range n {
		go func() {
			defer p.wg.Done()
			for {
				select {
				case f := <-p.work:
					f()
				case <-p.quit:
					return
				}
			}
		}()
	}
	return p
}

// Go runs f on an idle worker, or on a new goroutine when none is idle.
// A nil pool always starts a goroutine.
func (p *ReadPool) Go(f func()) {
	if p != nil {
		select {
		case p.work <- f:
			return
		default:
		}
	}
	go f()
}

// Close stops the workers once they finish what they run; reads started
// later get goroutines of their own.
func (p *ReadPool) Close() {
	close(p.quit)
	p.wg.Wait()
}
