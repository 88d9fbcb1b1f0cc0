package storage

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// DefaultValueLogFileMB is the size of a badger value-log file.
const DefaultValueLogFileMB = 16

// Options sizes a node's store.
type Options struct {
	// DataDir holds badger's files (in DataDir/badger).
	DataDir string
	// MemoryMB is the budget for badger's memtables and caches; a quarter
	// of it is the file-backed RSS the trimmer leaves alone.
	MemoryMB int
	// ValueLogFileMB is the size of a value-log file (0: the default).
	ValueLogFileMB int
	Logger         *slog.Logger
}

// Store is a node's one badger instance with what runs beside it: the
// disk accounting and reclamation every shard shares (Disk) and the
// trimmer that keeps the value log out of resident memory.
type Store struct {
	// DB is badger itself. Shards key their records under their own
	// prefix (shard.Prefix); node keeps its catalog under its own.
	DB   *badger.DB
	Disk *Disk
	trim *fileTrimmer
}

// Open opens the store in o.DataDir and starts its trimmer.
func Open(o Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := openBadger(o.DataDir, o.MemoryMB, o.ValueLogFileMB, log)
	if err != nil {
		return nil, err
	}
	s := &Store{DB: db}
	s.trim = startFileTrimmer(absDir(badgerDir(o.DataDir)), fileRSSAllowMB(o.MemoryMB), time.Second/2, log)
	s.Disk = newDisk(db, o.DataDir, s.trim, log)
	return s, nil
}

// Close refuses new compactor reads and reclamations, waits for those in
// progress, stops the trimmer and closes badger. The shards must have
// stopped: badger's Close waits for no one.
func (s *Store) Close() error {
	s.Disk.Close()
	s.trim.Close()
	if err := s.DB.Close(); err != nil {
		return fmt.Errorf("storage: close badger: %w", err)
	}
	return nil
}

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
		return nil, fmt.Errorf("storage: open badger in %s: %w", dir, err)
	}
	return db, nil
}

// newDisk is the node's disk accounting and reclamation over db; the
// trimmer pauses while it reclaims space.
func newDisk(db *badger.DB, dataDir string, trim *fileTrimmer, log *slog.Logger) *Disk {
	d := NewDisk(db, badgerDir(dataDir), log)
	d.Reclaiming = trim
	return d
}

func badgerDir(dataDir string) string { return filepath.Join(dataDir, "badger") }

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(fmt.Sprintf(f, a...), "src", "badger") }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(fmt.Sprintf(f, a...), "src", "badger") }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug(fmt.Sprintf(f, a...), "src", "badger") }
func (b badgerLogger) Debugf(f string, a ...any)   {}
