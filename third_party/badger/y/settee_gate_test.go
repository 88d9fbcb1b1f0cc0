/*
 * settee patch (not part of upstream badger v4.9.6): see SETTEE.md.
 */

package y

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// No more than n goroutines are inside at once, and a holder that yields
// lets a waiter in before it goes on.
func TestSetteeGate(t *testing.T) {
	g := NewGate(2)
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Enter()
			defer g.Leave()
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 2 {
		t.Fatalf("at most %d inside, want 2", m)
	}

	one := NewGate(1)
	one.Enter()
	entered := make(chan struct{})
	go func() {
		one.Enter()
		close(entered)
		time.Sleep(10 * time.Millisecond)
		one.Leave()
	}()
	// the waiter gets in only through a Yield: once it waits in Enter, the
	// next Yield hands the slot over
	handed := false
	for i := 0; i < 200 && !handed; i++ {
		time.Sleep(5 * time.Millisecond)
		one.Yield()
		select {
		case <-entered:
			handed = true
		default:
		}
	}
	if !handed {
		t.Fatal("Yield never let the waiting goroutine in")
	}
	one.Leave()

	var none *Gate // no bound
	none.Enter()
	none.Yield()
	none.Leave()
	if NewGate(0) != nil {
		t.Fatal("NewGate(0) bounds")
	}
}
