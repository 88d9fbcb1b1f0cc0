package storage

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The trimmer takes a value log's pages out of the process's RSS and
// loses nothing: what was written through the mapping reads back the same,
// through the mapping and through the file.
func TestFileTrimmerPagesOutValueLog(t *testing.T) {
	dir := absDir(t.TempDir())
	const size = 32 << 20
	f, err := os.OpenFile(filepath.Join(dir, "000001.vlog"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(m) }()
	for i := range m {
		m[i] = byte(i*7 + i>>12)
	}
	before, ok := fileRSS()
	if !ok {
		t.Skip("no RssFile in /proc/self/status")
	}
	tr := &fileTrimmer{dir: dir, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	tr.trim()
	after, _ := fileRSS()
	if before-after < size/2 {
		t.Fatalf("file-backed RSS %d MB -> %d MB, want at least %d MB less", before>>20, after>>20, size>>21)
	}
	for i := range m {
		if m[i] != byte(i*7+i>>12) {
			t.Fatalf("byte %d changed in the mapping", i)
		}
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != byte(i*7+i>>12) {
			t.Fatalf("byte %d changed in the file", i)
		}
	}
}

// eventLog records, in order, the messages logged and the trims made.
type eventLog struct {
	mu     sync.Mutex
	events []string
	attrs  map[string]slog.Value // of the last "storage reclaimed"
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *eventLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *eventLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *eventLog) WithGroup(string) slog.Handler            { return l }
func (l *eventLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "storage reclaimed" {
		l.mu.Lock()
		l.attrs = map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value; return true })
		l.mu.Unlock()
	}
	l.add(r.Message)
	return nil
}

// The node's Disk pauses the trimmer while it reclaims space: no page-out
// between the start of a reclamation and its end (value-log GC reads the
// files it rewrites; pages put out would come back from the disk), and
// the trimming goes on after it.
func TestTrimmerPausesDuringReclaim(t *testing.T) {
	dir := t.TempDir()
	events := &eventLog{}
	log := slog.New(events)
	db, err := openBadger(dir, 64, 1, log) // 1 MB value-log files
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// value-log garbage: 2 KB values (in the value log), all overwritten
	val := make([]byte, 2048)
	for round := range 2 {
		for b := range 30 {
			err := db.Update(func(txn *badger.Txn) error {
				for i := range 100 {
					val[0] = byte(round)
					if err := txn.Set(fmt.Appendf(nil, "k%05d", b*100+i), val); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// the trimmer checks every millisecond and trims whatever the RSS
	trim := newFileTrimmer(absDir(badgerDir(dir)), 0, slog.New(slog.DiscardHandler))
	trim.onTrim = func() { events.add("trim") }
	disk := newDisk(db, dir, trim, log)
	trim.start(time.Millisecond)
	defer trim.Close()
	waitFor := func(what string, since int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if slices.Contains(events.snapshot()[since:], what) {
				return
			}
		}
		t.Fatalf("no %q within 10s", what)
	}
	waitFor("trim", 0)
	if err := disk.Reclaim(); err != nil {
		t.Fatal(err)
	}
	ev := events.snapshot()
	begin, end := slices.Index(ev, "reclaiming storage"), slices.Index(ev, "storage reclaimed")
	if begin < 0 || end < begin {
		t.Fatalf("reclamation not logged: begin %d, end %d", begin, end)
	}
	if n := events.attrs["vlog_files_rewritten"].Int64(); n == 0 {
		t.Fatal("value-log GC rewrote no file: nothing to check")
	}
	if n := countOf(ev[begin:end], "trim"); n > 0 {
		t.Fatalf("%d trims during the reclamation (%d events)", n, end-begin)
	}
	waitFor("trim", end) // resumed
}

func countOf(s []string, v string) int {
	n := 0
	for _, e := range s {
		if e == v {
			n++
		}
	}
	return n
}

// A sealed value-log file is put out once: the pages reads bring back
// afterwards stay (a GET must not fault its body in from the disk after
// every trim), while the file being appended to is put out each time.
func TestFileTrimmerLeavesPagesReadFromSealedFiles(t *testing.T) {
	dir := absDir(t.TempDir())
	const size = 32 << 20
	mapFile := func(name string) []byte {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Munmap(m) })
		for i := range m {
			m[i] = byte(i)
		}
		return m
	}
	sealed := mapFile("000001.vlog")
	active := mapFile("000002.vlog")
	if _, ok := fileRSS(); !ok {
		t.Skip("no RssFile in /proc/self/status")
	}
	tr := &fileTrimmer{dir: dir, log: slog.New(slog.DiscardHandler)}
	tr.trim() // both put out: both were written
	before, _ := fileRSS()
	sum := 0
	for i := 0; i < size; i += 4096 {
		sum += int(sealed[i]) // read back in
	}
	for i := 0; i < size; i += 4096 {
		active[i] = byte(sum) // written again
	}
	read, _ := fileRSS()
	if read-before < size {
		t.Fatalf("file-backed RSS %d MB -> %d MB after reading and writing %d MB", before>>20, read>>20, 2*size>>20)
	}
	tr.trim()
	after, _ := fileRSS()
	switch {
	case read-after < size/2:
		t.Fatalf("the file being written was not put out: RSS %d MB -> %d MB", read>>20, after>>20)
	case read-after > size+size/2:
		t.Fatalf("the pages read from the sealed file were put out again: RSS %d MB -> %d MB", read>>20, after>>20)
	}
}
