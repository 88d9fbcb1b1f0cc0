package storage

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// madvPageout is MADV_PAGEOUT (Linux 5.4): reclaim the range's pages.
const madvPageout = 21

// fileTrimmer keeps the value log out of the node's resident memory.
// badger maps every value-log file (and each memtable's WAL) shared into
// the process and never unmaps it until the file goes: each page written
// or read stays resident, so RSS grows with the data, past any memory
// budget (100,000 docs of 2 KB replicated in: 250 MB of value log
// resident). When the process's file-backed RSS passes the allowance, the
// trimmer asks the kernel to reclaim the pages of those mappings
// (MADV_PAGEOUT). That is safe whatever the mapping has become meanwhile:
// a page is only ever written back or dropped, never zeroed (as
// MADV_DONTNEED would do to anonymous memory that took a freed range's
// place). The cost is that a page read again comes from the disk; badger's
// tables (.sst), read through their own caches, are left alone.
//
// Only what was written is put out: the memtable logs, and the value-log
// files written since the last trim (the one being appended to then, and
// any newer). A sealed file is put out once; the pages reads bring back in
// later stay, like any page cache the kernel may reclaim. Putting those
// out too made every trim (twice a second under a read load) throw away
// the docs being read: a GET then faulted its body back from the disk,
// and p99 was 10x higher.
//
// It pauses while the node reclaims space (Pause, Resume: storage.Disk calls
// them around a reclamation): value-log GC reads every file it rewrites
// through these mappings, and pages put out meanwhile would be read from
// the disk twice, competing with the writers' syncs.
type fileTrimmer struct {
	dir   string // badger's directory, as /proc/self/maps names it
	allow int64  // bytes of file-backed RSS left alone
	log   *slog.Logger
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex // held while trimming
	paused int        // Pause calls not yet resumed
	// onTrim, when set (tests), is called at the start of each trim.
	onTrim func()
	// from is the value-log file appended to at the last trim: it and
	// newer files may have pages written since; older ones were put out
	from uint64
}

// startFileTrimmer checks every interval; allowMB is the file-backed RSS
// it lets the process keep (which includes the executable's own pages).
func startFileTrimmer(dir string, allowMB int, every time.Duration, log *slog.Logger) *fileTrimmer {
	t := newFileTrimmer(dir, allowMB, log)
	t.start(every)
	return t
}

func newFileTrimmer(dir string, allowMB int, log *slog.Logger) *fileTrimmer {
	return &fileTrimmer{dir: dir, allow: int64(allowMB) << 20, log: log, stop: make(chan struct{}), done: make(chan struct{})}
}

func (t *fileTrimmer) start(every time.Duration) { go t.run(every) }

func (t *fileTrimmer) Close() {
	close(t.stop)
	<-t.done
}

func (t *fileTrimmer) run(every time.Duration) {
	defer close(t.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		if t.paused == 0 {
			if rss, ok := fileRSS(); ok && rss > t.allow {
				t.trim()
			}
		}
		t.mu.Unlock()
	}
}

// Pause stops the trimming until the matching Resume; a trim in progress
// finishes first.
func (t *fileTrimmer) Pause() {
	t.mu.Lock()
	t.paused++
	t.mu.Unlock()
}

// Resume undoes one Pause.
func (t *fileTrimmer) Resume() {
	t.mu.Lock()
	t.paused--
	t.mu.Unlock()
}

// fileRSS is RssFile of /proc/self/status in bytes.
func fileRSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("RssFile:")); ok {
			f := strings.Fields(string(v))
			if len(f) == 0 {
				return 0, false
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// trim pages out the value-log and WAL mappings under the directory.
func (t *fileTrimmer) trim() {
	if t.onTrim != nil {
		t.onTrim()
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	prefix := t.dir + string(os.PathSeparator)
	var newest uint64
	defer func() { t.from = max(t.from, newest) }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || !strings.HasPrefix(fs[5], prefix) || !strings.HasSuffix(fs[1], "s") {
			continue
		}
		switch {
		case strings.HasSuffix(fs[5], ".vlog"):
			fid, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(fs[5]), ".vlog"), 10, 64)
			if err != nil {
				continue
			}
			newest = max(newest, fid)
			if fid < t.from {
				continue // sealed and put out before: what is in now was read
			}
		case strings.HasSuffix(fs[5], ".mem"):
		default:
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout); e != 0 && e != syscall.ENOMEM && e != syscall.EINVAL {
			t.log.Debug("madvise pageout", "file", fs[5], "err", e)
		}
	}
}
