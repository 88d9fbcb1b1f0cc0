/*
 * settee patch (not part of upstream badger v4.9.6): see SETTEE.md.
 */

package badger

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/dgraph-io/badger/v4/y"
)

// DropUnreferencedValueLogs deletes, without reading them, the value-log
// files that no version of any key in the LSM tree points into, and returns
// how many files it deleted (or scheduled for deletion once open iterators
// close) and their sizes.
//
// RunValueLogGC finds garbage by reading every record of a file and looking
// each key up in the tree, so reclaiming a file costs its whole size even
// when all of it is garbage: a store whose value log is mostly overwritten
// or deleted values pays for the garbage, not for what is live. This walks
// the tree instead (keys and value pointers only, every version, memtables
// included): its cost is the live index, and a file nobody points into is
// simply removed. Files that are partly live are left to RunValueLogGC.
//
// Why it is safe: only files older than the one being written are
// candidates, and a write barrier (an empty request through the serial
// write path) makes every value already written to them visible in the
// tree before the walk starts. Versions that a open transaction can still
// read are kept in the tree by compactions (they only drop versions at or
// below the oldest read timestamp), so they are seen and keep their file.
// Deletion goes through the same path as RunValueLogGC's: deferred while
// iterators are open. It runs under the GC lock, so no rewrite moves values
// meanwhile; it returns ErrRejected if a GC is running.
//
// between, when not nil, is called after each file deleted right away, with
// its size and how long the deletion took (unlinking a large file stalls
// the disk for other writers: the caller may pause).
func (db *DB) DropUnreferencedValueLogs(between func(size int64, took time.Duration)) (files int, bytes int64, err error) {
	if db.opt.InMemory || db.opt.ReadOnly {
		return 0, 0, nil
	}
	vlog := &db.vlog
	select {
	case vlog.garbageCh <- struct{}{}:
	default:
		return 0, 0, ErrRejected
	}
	defer func() { <-vlog.garbageCh }()

	candidates := make(map[uint32]bool)
	vlog.filesLock.RLock()
	maxFid := vlog.maxFid
	for fid := range vlog.filesMap {
		if fid < maxFid {
			candidates[fid] = true
		}
	}
	for _, fid := range vlog.filesToBeDeleted {
		delete(candidates, fid)
	}
	vlog.filesLock.RUnlock()
	if len(candidates) == 0 {
		return 0, 0, nil
	}

	// The barrier: writes are applied one batch at a time in order, so once
	// this empty request is done, every request that wrote into a candidate
	// (all of them before the file being written became maxFid) has put its
	// pointers into the memtable.
	req, err := db.sendToWriteCh(nil)
	if err != nil {
		return 0, 0, err
	}
	if err := req.Wait(); err != nil {
		return 0, 0, err
	}

	txn := db.NewTransaction(false)
	it := txn.NewIterator(IteratorOptions{AllVersions: true, InternalAccess: true})
	var vp valuePointer
	for it.Rewind(); it.Valid() && len(candidates) > 0; it.Next() {
		item := it.Item()
		if item.meta&bitValuePointer == 0 {
			continue
		}
		vp.Decode(item.vptr)
		delete(candidates, vp.Fid)
	}
	it.Close()
	txn.Discard()

	fids := make([]uint32, 0, len(candidates))
	for fid := range candidates {
		fids = append(fids, fid)
	}
	sort.Slice(fids, func(i, j int) bool { return fids[i] < fids[j] })
	for _, fid := range fids {
		var now *logFile
		vlog.filesLock.Lock()
		lf, ok := vlog.filesMap[fid]
		if ok {
			bytes += int64(lf.size.Load())
			files++
			if vlog.iteratorCount() == 0 {
				delete(vlog.filesMap, fid)
				now = lf
			} else {
				vlog.filesToBeDeleted = append(vlog.filesToBeDeleted, fid)
			}
		}
		vlog.filesLock.Unlock()
		if now != nil {
			vlog.opt.Infof("Removing unreferenced value log fid: %d", fid)
			size, t0 := int64(now.size.Load()), time.Now()
			if err := vlog.deleteLogFile(now); err != nil {
				return files, bytes, err
			}
			if between != nil {
				between(size, time.Since(t0))
			}
		}
	}
	return files, bytes, nil
}

// FlattenAll is Flatten that first merges level 0 into the levels below
// even when level 0 is the only one holding tables (Flatten then has
// nothing to consolidate and returns at once). Versions are dropped only
// when a compaction merges them, and DropUnreferencedValueLogs can delete
// only the files that no remaining version points into, so a store that
// never compacted yet (every table still in level 0) must be merged first.
func (db *DB) FlattenAll(workers int) error {
	if db.opt.ReadOnly {
		return ErrReadOnlyTxn
	}
	db.setteeLevelsMu.Lock() // not beside a DropPrefix (DB.setteeLevelsMu)
	defer db.setteeLevelsMu.Unlock()
	if db.lc.levels[0].numTables() > 0 {
		db.stopCompactions()
		err := db.lc.doCompact(176, compactionPriority{level: 0, score: 1.71})
		db.startCompactions()
		if err != nil && err != errFillTables {
			return err
		}
	}
	return db.Flatten(workers)
}

// FlushMemtable makes the memtable being written immutable and waits until
// it is flushed to a level-0 table, without blocking writes (upstream's only
// way to flush an open DB is DropPrefix of a prefix that holds data, which
// refuses writes with ErrBlockedWrites until it has flushed and compacted).
// Deletions reach the tree's levels, where compactions drop what they
// shadow, only through a flush. The rotation is done by the write
// goroutine, which alone writes to the memtable, as part of the write
// order: everything written before the call is in the flushed memtable.
func (db *DB) FlushMemtable() error {
	if db.opt.InMemory || db.opt.ReadOnly {
		return nil
	}
	req := requestPool.Get().(*request)
	req.reset()
	req.setteeFlush = true
	req.Wg.Add(1)
	req.IncrRef()
	if err := db.setteeSend(req); err != nil {
		req.DecrRef()
		return err
	}
	req.Wg.Wait()
	mt, err := req.setteeFlushed, req.Err
	req.DecrRef()
	if err != nil || mt == nil {
		return err
	}
	for {
		db.lock.RLock()
		pending := false
		for _, m := range db.imm {
			if m == mt {
				pending = true
				break
			}
		}
		db.lock.RUnlock()
		if !pending {
			return nil
		}
		if db.IsClosed() {
			return ErrDBClosed
		}
		time.Sleep(time.Millisecond)
	}
}

// setteeSend hands req to the write goroutine unless writes are blocked.
// Upstream checks blockWrites, then sends: a request sent between a
// DropPrefix's blockWrite (which stops the write goroutine and drains
// writeCh) and its end waits for a write goroutine that starts only once
// the DropPrefix returns, while the DropPrefix waits (filterPrefixesToDrop's
// read) for that request's commit timestamp: both hang for good. It
// happened to TestCreateWhileWritesAreBlocked (node), creating databases
// while DropPrefix runs in a loop. The check and the send are one step
// here: blockWrite takes setteeSendMu exclusively to set blockWrites.
func (db *DB) setteeSend(req *request) error {
	db.setteeSendMu.RLock()
	defer db.setteeSendMu.RUnlock()
	if db.blockWrites.Load() == 1 {
		return ErrBlockedWrites
	}
	db.writeCh <- req // handled in doWrites
	return nil
}

// setteeRotateMemtable is ensureRoomForWrite for a memtable that is not
// full: it hands the memtable to the flusher unless it is empty, and
// records it in req.
func (db *DB) setteeRotateMemtable(req *request) error {
	db.lock.Lock()
	defer db.lock.Unlock()
	if db.mt.sl.Empty() {
		return nil
	}
	for {
		select {
		case db.flushChan <- db.mt:
			req.setteeFlushed = db.mt
			db.imm = append(db.imm, db.mt)
			var err error
			db.mt, err = db.newMemTable()
			if err != nil {
				return y.Wrapf(err, "cannot create new mem table")
			}
			return nil
		default:
			if db.IsClosed() {
				return errNoRoom
			}
			db.flushCond.Wait()
		}
	}
}

// setteeTruncateStep is how much of a value-log file setteeDeleteLogFile
// frees at a time.
const setteeTruncateStep = 1 << 20

// setteeDeleteLogFile is deleteLogFile that frees the file's blocks a
// megabyte at a time (truncating it from the end) before removing it.
// Freeing a whole 16 MB file at once makes the next journal commit of the
// filesystem free (and, mounted with discard, trim) all of its blocks, and
// every writer's fsync waits for that commit: on our machine a writer of
// 14 KB synced appends went from p99 0.32 ms to 4.5 ms while 66 files of
// 21 MB were removed back to back (0.32 s), and to 0.76-0.87 ms when each
// was truncated a megabyte at a time first (0.44-0.55 s).
func (vlog *valueLog) setteeDeleteLogFile(lf *logFile) error {
	if lf == nil {
		return nil
	}
	lf.lock.Lock()
	defer lf.lock.Unlock()
	vlog.discardStats.Update(lf.fid, -1)
	if lf.Fd == nil {
		return nil
	}
	size := int64(len(lf.Data))
	if err := z.Munmap(lf.Data); err != nil {
		return fmt.Errorf("while munmap file: %s, error: %v", lf.Fd.Name(), err)
	}
	lf.Data = nil
	if fi, err := lf.Fd.Stat(); err == nil {
		size = fi.Size()
	}
	// The last step is the removal, not a truncation to zero: a crash may
	// leave the file shortened, never shorter than a step (its header
	// intact), and an empty value-log file makes badger's open fail. No
	// key points into it, so the next DropUnreferencedValueLogs deletes it.
	for size > 2*setteeTruncateStep {
		size -= setteeTruncateStep
		if err := lf.Fd.Truncate(size); err != nil {
			return fmt.Errorf("while truncate file: %s, error: %v", lf.Fd.Name(), err)
		}
	}
	if err := lf.Fd.Close(); err != nil {
		return fmt.Errorf("while close file: %s, error: %v", lf.Fd.Name(), err)
	}
	return os.Remove(lf.Fd.Name())
}

// Watermarks reports the timestamp at or below which compactions may drop
// overwritten versions (every read transaction that began before it is
// done) and the last commit timestamp. A discard watermark far behind the
// last commit means a read transaction is still open (or was never
// discarded), and compactions keep every version it can see.
func (db *DB) Watermarks() (discardAtOrBelow, lastCommit uint64) {
	db.orc.Lock()
	next := db.orc.nextTxnTs
	db.orc.Unlock()
	return db.orc.discardAtOrBelow(), next - 1
}
