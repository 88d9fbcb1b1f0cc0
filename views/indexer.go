package views

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/settee/settee/tasks"
)

var errStopped = errors.New("views: indexer stopped")

const (
	refreshEvery = 200 * time.Millisecond
	keepWarm     = 10 * time.Minute
)

// indexer builds one index on a goroutine of its own: the shard actor
// never waits for it, and it is the only writer of the index's keys.
// Queries ask it to catch up (build) and read the index themselves, on
// badger snapshots, between its commits.
type indexer struct {
	x    *index
	reqs chan chan error  // a build request; nil: do not answer (update=lazy)
	keep chan []bucketRed // reductions queries computed, to keep
	quit chan struct{}
	done chan struct{}

	mu sync.Mutex
	cp checkpoint // as committed
}

func startIndexer(x *index, wg *sync.WaitGroup) (*indexer, error) {
	cp, err := x.loadCheckpoint()
	if err != nil {
		return nil, err
	}
	ix := &indexer{x: x, reqs: make(chan chan error, 64), keep: make(chan []bucketRed, 16), quit: make(chan struct{}), done: make(chan struct{}), cp: cp}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ix.done)
		ix.run()
	}()
	return ix, nil
}

func (ix *indexer) stop() {
	select {
	case <-ix.quit:
	default:
		close(ix.quit)
	}
}

func (ix *indexer) checkpoint() checkpoint {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.cp
}

// catchUp returns once the index holds every change the copy had when it
// was called (or ctx ends: the build goes on for the next query).
func (ix *indexer) catchUp(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case ix.reqs <- reply:
	case <-ix.quit:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ix.done:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kick starts a build without waiting for it (update=lazy).
func (ix *indexer) kick() {
	select {
	case ix.reqs <- nil:
	default: // a build is asked for already
	}
}

func (ix *indexer) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-ix.quit
		cancel()
	}()
	// an index that was queried lately is kept current in the background
	// (CouchDB's ken): it looks at the copy's last seq every refreshEvery
	// and builds when behind, so a query after a burst of writes rarely
	// waits; one left unqueried for keepWarm is built by queries only
	var lastAsked time.Time
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		var waiting []chan error
		select {
		case r := <-ix.reqs:
			waiting = append(waiting, r)
			lastAsked = time.Now()
		case reds := <-ix.keep:
			ix.storeReductions(reds)
			continue
		case <-tick.C:
			if time.Since(lastAsked) > keepWarm || (ix.x.refresh != nil && !ix.x.refresh()) || ix.x.current(ix.checkpoint()) {
				continue
			}
		case <-ix.quit:
			return
		}
		// every request queued now is answered by this pass, which reads
		// the by-seq index from after they were made
	drain:
		for {
			select {
			case r := <-ix.reqs:
				waiting = append(waiting, r)
			default:
				break drain
			}
		}
		err := ix.build(ctx)
		for _, w := range waiting {
			if w != nil {
				w <- err
			}
		}
		if errors.Is(err, context.Canceled) {
			return
		}
	}
}

// build runs batches until the by-seq index has no more.
func (ix *indexer) build(ctx context.Context) error {
	cp := ix.checkpoint()
	var task *tasks.Task
	defer func() {
		if task != nil {
			task.Done()
		}
	}()
	start, last := cp.Seq, ix.x.changes.LastSeq()
	for {
		next, more, err := ix.x.step(ctx, cp)
		if err != nil {
			ix.x.log.Error("view index build failed", "err", err)
			return err
		}
		ix.mu.Lock()
		ix.cp = next
		ix.mu.Unlock()
		cp = next
		if !more {
			return nil
		}
		if task == nil && ix.x.tasks != nil {
			// a build of more than one batch is listed, as CouchDB's
			// indexer tasks
			task = ix.x.tasks.Start("indexer", map[string]any{
				"database": ix.x.shardName, "design_document": ix.x.def.ID,
				"changes_done": 0, "total_changes": 0, "progress": 0,
			})
		}
		if task != nil {
			total := max(last, cp.Seq) - start
			done := cp.Seq - start
			progress := 0
			if total > 0 {
				progress = int(done * 100 / total)
			}
			task.Update(map[string]any{"changes_done": done, "total_changes": total, "progress": progress})
		}
		ix.yield()
		select {
		case <-ix.quit:
			return context.Canceled
		default:
		}
	}
}

// yield pauses a build between batches while users write, as compaction
// does: a batch commits in the same badger write queue as their writes
// and maps on the same cores, so a build that never waits costs every
// write during it a batch's commit.
func (ix *indexer) yield() {
	since := ix.x.sinceWrite
	if since == nil {
		return
	}
	for i := 0; i < yieldMax && since() < yieldWindow; i++ {
		select {
		case <-ix.quit:
			return
		case <-time.After(yieldWindow):
		}
	}
}

const (
	yieldWindow = 3 * time.Millisecond
	yieldMax    = 2 // at most 6 ms per batch: a build under writes goes on
)
