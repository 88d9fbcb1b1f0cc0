package node

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/shard"
)

// openBadger opens the node's one badger instance with options sized from
// the memory budget (badger's defaults cost hundreds of MB): bodies go to
// the value log (ValueThreshold 1 KB) so LSM compactions do not rewrite
// them, and every commit is synced.
//
// Value-log files are vlogMB each (default 16): value-log GC reclaims space
// a whole file at a time and never touches the file being written, so the
// file size is what may stay as garbage after a compaction (seed 002's
// workload leaves one such file at most). 16 MB rather than 64: a 2000-doc
// database of small docs edited 100 times kept 65 MB after compaction with
// 64 MB files (5.3 MB live, the rest the file being written), 10.5 MB with
// 16 MB ones, and the compactions took as long; more files cost one open
// and one mmap each.
func openBadger(dir string, memoryMB, vlogMB int, log *slog.Logger) (*badger.DB, error) {
	budget := int64(memoryMB) << 20
	memtable := min(max(budget/8, 16<<20), 64<<20)
	if vlogMB <= 0 {
		vlogMB = DefaultValueLogFileMB
	}
	opts := badger.DefaultOptions(badgerDir(dir)).
		WithSyncWrites(true).
		WithDetectConflicts(false). // each key range has one writer: its shard actor
		WithValueThreshold(1024).
		WithMemTableSize(memtable).
		WithNumMemtables(3).
		WithBlockCacheSize(budget / 4).
		WithIndexCacheSize(budget / 8).
		WithNumCompactors(2).
		WithBackgroundCPU(max(runtime.GOMAXPROCS(0)-1, 1)).
		WithBackgroundNice(10).
		WithValueLogFileSize(int64(vlogMB) << 20).
		WithLogger(badgerLogger{log})
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("node: open badger in %s: %w", dir, err)
	}
	return db, nil
}

// newDisk is the node's disk accounting and reclamation over db; the
// trimmer pauses while it reclaims space.
func newDisk(db *badger.DB, dataDir string, trim *fileTrimmer, log *slog.Logger) *shard.Disk {
	d := shard.NewDisk(db, badgerDir(dataDir), log)
	d.Reclaiming = trim
	return d
}

// DefaultValueLogFileMB is the size of a badger value-log file.
const DefaultValueLogFileMB = 16

func badgerDir(dataDir string) string { return filepath.Join(dataDir, "badger") }

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(fmt.Sprintf(f, a...), "src", "badger") }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(fmt.Sprintf(f, a...), "src", "badger") }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug(fmt.Sprintf(f, a...), "src", "badger") }
func (b badgerLogger) Debugf(f string, a ...any)   {}
