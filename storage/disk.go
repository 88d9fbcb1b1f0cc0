package storage

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Disk is the node-wide side of storage that no single shard owns: the bytes
// badger really holds on disk, how they are attributed to shards, and the
// reclamation of garbage (LSM compaction and value-log GC), which badger
// allows one at a time per instance. One Disk serves every shard of a node.
//
// sizes.file, and why it is computed this way: badger mixes every shard's
// records in one LSM tree and one value log, so no file belongs to a
// database. Each shard keeps an estimate of the bytes it holds, garbage
// included (ShardStats.file_size: the bytes its commits wrote since its last
// compaction, reset to its live bytes when it is compacted), updated at
// commit time, so a db info request costs no scan. The node measures the
// real allocated bytes of the data directory (a readdir and a stat per
// file, cached for a second). A shard's file size is its estimate, scaled
// down when the estimates add up to more than the disk holds (badger's own
// compactions reclaimed some garbage already). It is not scaled up: what
// the disk holds beyond the estimates is the node's fixed overhead (the
// value-log file being written, memtable logs, manifests), which belongs to
// no database; spreading it would make every small database look
// compactable forever. So a database edited a lot carries the garbage it
// made (what the auto-compactor looks for), one just compacted shows
// file ≈ active, and the sum over databases never exceeds the real disk
// usage.
type Disk struct {
	db  *badger.DB
	dir string
	log *slog.Logger

	estimates atomic.Int64 // sum of every live shard's estimate
	// commits counts the shards' commits: while a reclamation runs, the
	// users' (it holds the copy slot, so no compaction batch commits)
	commits atomic.Uint64
	// lastWrite is when a shard last started committing user writes
	// (unix nanoseconds): compaction batches of a shard with none of its
	// own wait for the node to be idle too (Actor.maybeCommit).
	lastWrite atomic.Int64

	sizeMu   sync.Mutex
	sized    time.Time
	lastSize int64
	sizedEst int64 // the estimates when lastSize was measured

	// gc runs one reclamation at a time; a request made while one runs
	// is served by one more run after it (garbage made meanwhile).
	gcMu      sync.Mutex
	gcRunning bool
	gcGen     uint64 // runs started
	gcDone    uint64 // runs finished
	gcCond    *sync.Cond

	// use guards badger against Close while a compactor reads or a
	// reclamation runs.
	use     sync.RWMutex
	bg      sync.WaitGroup // work started with Go
	closed  bool
	closing chan struct{} // closed by Close
	// quit is closed as Close begins, before it waits for the work that
	// holds use: a reclamation watches it to end early
	quit     chan struct{}
	quitOnce sync.Once

	// what reclamations did, for the node's metrics (ValueLogFiles)
	droppedFiles, droppedBytes, rewrittenFiles atomic.Int64
	// copied is what compactions copied: doc records their walks
	// rewrote and value-log bytes badger's GC read to rewrite
	copied atomic.Int64

	// copySlot lets one compactor at a time walk and commit (acquireCopy).
	copySlot chan struct{}

	// DiscardRatio is the value-log GC threshold: a log file is rewritten
	// when at least this share of it is garbage.
	DiscardRatio float64

	// Reclaiming, when set (before the Disk is used), is paused while a
	// reclamation runs and resumed after it: the node's value-log trimmer,
	// whose page-outs would make value-log GC read the files it rewrites
	// from the disk.
	Reclaiming Pauser
}

// Pauser is work that stops while the node reclaims space.
type Pauser interface {
	Pause()
	Resume()
}

// NewDisk returns the disk accounting of badger db whose files are in dir.
func NewDisk(db *badger.DB, dir string, log *slog.Logger) *Disk {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Disk{db: db, dir: dir, log: log, DiscardRatio: 0.5,
		closing: make(chan struct{}), quit: make(chan struct{}), copySlot: make(chan struct{}, 1)}
	d.gcCond = sync.NewCond(&d.gcMu)
	return d
}

// ErrClosed is returned by work that the node's shutdown interrupted.
var ErrClosed = errors.New("storage: closed")

// Acquire holds badger open until release; false once Close was called.
func (d *Disk) Acquire() bool {
	if d == nil {
		return true
	}
	d.use.RLock()
	if d.closed {
		d.use.RUnlock()
		return false
	}
	return true
}

func (d *Disk) Release() {
	if d != nil {
		d.use.RUnlock()
	}
}

// Close waits for compactor reads and reclamations in progress and refuses
// new ones, then waits for the background work started with Go (which
// the refusals end); the node calls it before closing badger.
func (d *Disk) Close() {
	d.quitOnce.Do(func() { close(d.quit) })
	d.use.Lock()
	if !d.closed {
		d.closed = true
		close(d.closing)
	}
	d.use.Unlock()
	d.bg.Wait()
}

// Go runs f on a goroutine of its own as background work on the store (a
// shard's compaction), which Close waits for: f must end soon once the
// Disk's calls answer ErrClosed. It reports false, and does not run f,
// once Close was called. A nil Disk (tests of one shard) runs f unowned.
func (d *Disk) Go(f func()) bool {
	if d == nil {
		go f()
		return true
	}
	d.use.RLock()
	defer d.use.RUnlock()
	if d.closed {
		return false
	}
	d.bg.Go(f)
	return true
}

// AcquireCopy waits for the node's compaction copy slot; false once Close
// was called. A compactor holds it while it walks and commits (not while
// badger reclaims space, which Reclaim serialises on its own).
func (d *Disk) AcquireCopy() bool {
	if d == nil {
		return true
	}
	select {
	case d.copySlot <- struct{}{}:
		return true
	case <-d.closing:
		return false
	}
}

func (d *Disk) ReleaseCopy() {
	if d != nil {
		<-d.copySlot
	}
}

// DropPrefix is badger's DropPrefix, retried while another DropPrefix (a
// database being deleted) blocks writes.
func DropPrefix(db *badger.DB, prefix []byte) error {
	return whileBlocked(5*time.Millisecond, 200*time.Millisecond, func() error { return db.DropPrefix(prefix) })
}

// Update is badger's Update, retried while a DropPrefix blocks writes.
func Update(db *badger.DB, fn func(txn *badger.Txn) error) error {
	return whileBlocked(time.Millisecond, 50*time.Millisecond, func() error { return db.Update(fn) })
}

// whileBlocked runs f again while it fails with badger.ErrBlockedWrites (a
// DropPrefix in progress), waiting first between tries, twice as long each
// time up to most.
func whileBlocked(first, most time.Duration, f func() error) error {
	err := f()
	for delay := first; errors.Is(err, badger.ErrBlockedWrites); delay = min(2*delay, most) {
		time.Sleep(delay)
		err = f()
	}
	return err
}

// Add moves the sum of estimates by delta (a shard starting, committing,
// compacting or stopping).
func (d *Disk) Add(delta int64) {
	if d != nil {
		d.estimates.Add(delta)
	}
}

// Committed is add for a shard's commit; value-log GC yields more while
// commits go on (reclaim).
func (d *Disk) Committed(delta int64) {
	if d != nil {
		d.estimates.Add(delta)
		d.commits.Add(1)
	}
}

// Wrote notes that a shard starts committing user writes at t.
func (d *Disk) Wrote(t time.Time) {
	if d != nil {
		d.lastWrite.Store(t.UnixNano())
	}
}

// SinceWrite is how long ago a shard of the node last started committing
// user writes; a very long time for a node without a Disk.
func (d *Disk) SinceWrite() time.Duration {
	if d == nil {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(time.Now().UnixNano() - d.lastWrite.Load())
}

// Allocated returns the bytes allocated on disk under the data directory
// (st_blocks, so sparse preallocated files count for what they hold),
// measured at most once a second unless the shards' estimates have grown
// by a megabyte since: a measure from before a burst of writes would
// scale every shard's sizes.file down to it (Share) for up to a second.
func (d *Disk) Allocated() int64 {
	d.sizeMu.Lock()
	defer d.sizeMu.Unlock()
	est := d.estimates.Load()
	if time.Since(d.sized) < time.Second && est-d.sizedEst < 1<<20 {
		return d.lastSize
	}
	d.lastSize = AllocatedBytes(d.dir)
	d.sized, d.sizedEst = time.Now(), est
	return d.lastSize
}

func (d *Disk) invalidate() {
	d.sizeMu.Lock()
	d.sized = time.Time{}
	d.sizeMu.Unlock()
}

// Share turns a shard's estimate into bytes on disk (see Disk).
func (d *Disk) Share(estimate int64) int64 {
	if d == nil || estimate <= 0 {
		return max(estimate, 0)
	}
	total := d.estimates.Load()
	disk := d.Allocated()
	if total <= disk {
		return estimate
	}
	return int64(float64(disk) * float64(estimate) / float64(total))
}

// AllocatedBytes sums the allocated size of every file under dir.
func AllocatedBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// gcPause is the pause after a value-log GC run that took took, with
// writes committed meanwhile or not (the next file is read during it).
// A run is CPU work in one goroutine (it reads and checksums the whole
// file and looks every record up in the tree) that allocates the file's
// size again, so the Go collector's marking starts during runs: with
// GOMAXPROCS 2, a request then waits for a P. On seed 002's medium
// workload, the GC marked 6% of the reclamation's time and 10 of the 22
// PUTs slower than 12 ms overlapped its marking. While writes come in, GC
// runs about a ninth of the time (a run, then eight times as long, at most
// a second, of pause); otherwise two thirds. On that workload, against
// pausing twice a run's time, the writer's p99 during the reclaim went from
// 8.3-9.8 to 5.2-5.7 ms and the reclaim took 2.5-3 times as long: the
// compaction is background work, the writes are someone's request.
func gcPause(took time.Duration, writes bool) time.Duration {
	if writes {
		return min(8*took, time.Second)
	}
	return min(took/2, 100*time.Millisecond)
}

// Reclaim makes badger give back the space of deleted and overwritten
// records: memtables are flushed (so that recent deletions reach the LSM
// tree), the tree is compacted into one level (dropping shadowed versions
// and counting the value-log bytes they pointed to), value-log files no
// remaining version points into are deleted unread, then those that are
// mostly garbage are rewritten until none is left. Runs are
// serialised node-wide and hold the compaction copy slot, so that no
// compactor commits while badger rewrites files; a call made while a run
// is in progress waits for the next run, which starts after it.
func (d *Disk) Reclaim() error { return d.ReclaimAfter(d.ReclaimTicket()) }

// ReclaimTicket names the first run that starts after it was taken: a
// compactor takes one before it gives up the copy slot, so that the run
// which waited for the slot serves it (and the shards copied meanwhile).
func (d *Disk) ReclaimTicket() uint64 {
	d.gcMu.Lock()
	defer d.gcMu.Unlock()
	return d.gcGen + 1
}

// ReclaimAfter waits until run want is done, starting runs as needed.
func (d *Disk) ReclaimAfter(want uint64) error {
	d.gcMu.Lock()
	for d.gcDone < want {
		if !d.gcRunning && d.gcGen < want {
			d.gcRunning = true
			d.gcMu.Unlock()
			ok := d.AcquireCopy()
			d.gcMu.Lock()
			if !ok {
				d.gcRunning = false
				d.gcCond.Broadcast()
				d.gcMu.Unlock()
				return ErrClosed
			}
			d.gcGen++ // the run starts now
			d.gcMu.Unlock()
			err := d.reclaim()
			d.ReleaseCopy()
			d.gcMu.Lock()
			d.gcRunning = false
			d.gcDone = d.gcGen
			d.gcCond.Broadcast()
			if err != nil {
				d.gcMu.Unlock()
				return err
			}
			continue
		}
		d.gcCond.Wait()
	}
	d.gcMu.Unlock()
	return nil
}

func (d *Disk) reclaim() error {
	if !d.Acquire() {
		return ErrClosed
	}
	defer d.Release()
	defer d.invalidate()
	if d.Reclaiming != nil {
		d.Reclaiming.Pause()
		defer d.Reclaiming.Resume()
	}
	start := time.Now()
	d.log.Debug("reclaiming storage")
	if err := d.flush(); err != nil {
		return err
	}
	flushed := time.Now()
	// one worker: with two, the merge took both cores from the writers
	// (small x 100: reclaim p99 4.2-7.4 ms in 8 runs, 4.4-5.1 ms in 5 with
	// one, and the merge as long: 0.18-0.24 s)
	if err := d.db.FlattenAll(1); err != nil {
		return err
	}
	flattened := time.Now()
	// Files no remaining version points into go without being read
	// (third_party/badger/SETTEE.md): after a compaction deleted a
	// database's old bodies, doc infos and seq entries, that is nearly every
	// file written before it. GC reads and rewrites only the rest.
	dropped, droppedBytes, err := d.dropUnreferenced()
	if err != nil {
		return err
	}
	d.droppedFiles.Add(int64(dropped))
	d.droppedBytes.Add(droppedBytes)
	droppedAt := time.Now()
	files, hits := 0, 0
	var warmed int64
	// the file GC rewrites next is read into the page cache while it
	// rewrites the current one (vlogwarm.go)
	warm := func(path string) {
		if path != "" {
			n, _ := warmFile(path)
			warmed += n
		}
	}
	next := nextGCFile(d.dir, d.DiscardRatio, 0)
	warm(next)
	for {
		// the node's shutdown waits for this (it holds use): stop
		// between files
		select {
		case <-d.quit:
			return ErrClosed
		default:
		}
		t0 := time.Now()
		cur := next
		ahead := make(chan struct{})
		go func() {
			defer close(ahead)
			next = nextGCFile(d.dir, d.DiscardRatio, vlogFid(cur))
			warm(next)
		}()
		commits := d.commits.Load()
		var size int64
		if cur != "" {
			if fi, serr := os.Stat(cur); serr == nil {
				size = fi.Size()
			}
		}
		err := d.db.RunValueLogGC(d.DiscardRatio)
		took := time.Since(t0)
		if err == nil {
			files++
			d.rewrittenFiles.Add(1)
			if cur != "" {
				if _, serr := os.Stat(cur); errors.Is(serr, fs.ErrNotExist) {
					hits++ // GC rewrote (and deleted) the file predicted
					// and read it whole (a file it chose otherwise,
					// rarely, is not counted: which one is not known)
					d.copied.Add(size)
				}
			}
			time.Sleep(gcPause(took, d.commits.Load() != commits))
		}
		<-ahead
		if err == nil {
			continue
		}
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			break
		}
		return err
	}
	discardTs, lastTs := d.db.Watermarks()
	d.log.Info("storage reclaimed", "vlog_files_dropped", dropped, "vlog_dropped_mb", droppedBytes>>20,
		"vlog_files_rewritten", files, "took", time.Since(start).Round(time.Millisecond),
		"flush", flushed.Sub(start).Round(time.Millisecond), "flatten", flattened.Sub(flushed).Round(time.Millisecond),
		"drop", droppedAt.Sub(flattened).Round(time.Millisecond),
		"vlog_gc", time.Since(droppedAt).Round(time.Millisecond), "vlog_warmed_mb", warmed>>20, "vlog_predicted", hits,
		"discard_ts", discardTs, "last_ts", lastTs)
	return nil
}

// flush is badger's FlushMemtable (third_party/badger/SETTEE.md): recent
// deletions reach the tree's levels, where compactions drop what they
// shadow. Writes go on meanwhile; only a DropPrefix in progress refuses it.
func (d *Disk) flush() error {
	return whileBlocked(5*time.Millisecond, 200*time.Millisecond, d.db.FlushMemtable)
}

// ValueLogFiles reports, since the node started, the value-log files its
// reclamations deleted unread and their bytes, and the files badger's GC
// read and rewrote.
// Copied adds n bytes to what compactions copied (a walk's batch).
func (d *Disk) Copied(n int64) {
	if d != nil {
		d.copied.Add(n)
	}
}

// CopiedBytes is what compactions copied since the node started: the
// doc records their walks rewrote and the value-log files GC rewrote.
func (d *Disk) CopiedBytes() int64 { return d.copied.Load() }

func (d *Disk) ValueLogFiles() (dropped, droppedBytes, rewritten int64) {
	return d.droppedFiles.Load(), d.droppedBytes.Load(), d.rewrittenFiles.Load()
}

// dropUnreferenced is badger's DropUnreferencedValueLogs, retried while a
// DropPrefix (a database being deleted) blocks writes: its barrier is a
// write.
func (d *Disk) dropUnreferenced() (int, int64, error) {
	commits := d.commits.Load()
	var unlinking, paused time.Duration
	between := func(_ int64, took time.Duration) {
		c := d.commits.Load()
		p := unlinkPause(took, c != commits)
		time.Sleep(p)
		commits = c
		unlinking += took
		paused += p
	}
	start := time.Now()
	var files int
	var n int64
	err := whileBlocked(5*time.Millisecond, 200*time.Millisecond, func() (err error) {
		files, n, err = d.db.DropUnreferencedValueLogs(between)
		return err
	})
	d.log.Debug("unreferenced value-log files deleted", "files", files, "mb", n>>20, "took", time.Since(start).Round(time.Millisecond),
		"unlinking", unlinking.Round(time.Millisecond), "paused", paused.Round(time.Millisecond))
	return files, n, err
}

// unlinkPause is the pause after deleting a value-log file unread that
// took took, with writes committed meanwhile or not. badger frees the file
// a megabyte at a time (third_party/badger/settee_vlog.go), which keeps a
// synced writer's p99 within ~3x while it runs back to back; pausing half
// the deletion's time between files while writes come in spreads the rest.
// On seed 002's medium workload x 50 (67 files, 1.4 GB, a one-at-a-time
// writer at p99 2.0-3.4 ms before compaction), measured 2026-11-30: back to
// back, the deletion took 1.0-1.2 s and the writer's p99 during the reclaim
// was 5.6-6.3 ms; pausing half, 1.6-1.8 s and 3.7-4.8 ms; pausing twice,
// 3.7-4.3 s and 3.3-4.0 ms. Whatever the pause, the p99 of the whole
// compaction is the copy phase's (4.6-5.8 ms).
func unlinkPause(took time.Duration, writes bool) time.Duration {
	if writes {
		return took / 2
	}
	return 0
}
