package y

// settee patch.

// Gate bounds how many goroutines do background CPU work (memtable
// flushes, compactions) at once. Go's scheduler has no priorities: a
// compaction's merge goroutines and table builders, runnable on every P,
// made a user write's goroutines wait for a P until the scheduler's 10 ms
// preemption (seen in an execution trace of settee: commit and HTTP
// goroutines runnable for 5-12 ms during a flatten). With fewer gate slots
// than Ps, background work leaves a P to the writes.
//
// A nil *Gate lets everything through. Holders must not block on another
// gated goroutine while they hold a slot.
type Gate struct{ slots chan struct{} }

// NewGate returns a gate of n slots, or nil (no bound) when n <= 0.
func NewGate(n int) *Gate {
	if n <= 0 {
		return nil
	}
	return &Gate{slots: make(chan struct{}, n)}
}

// Enter takes a slot, waiting for one.
func (g *Gate) Enter() {
	if g != nil {
		g.slots <- struct{}{}
	}
}

// Leave gives the slot back.
func (g *Gate) Leave() {
	if g != nil {
		<-g.slots
	}
}

// Yield gives the slot to a waiting goroutine, if any, and takes one again.
func (g *Gate) Yield() {
	if g != nil && len(g.slots) == cap(g.slots) {
		<-g.slots
		g.slots <- struct{}{}
	}
}
