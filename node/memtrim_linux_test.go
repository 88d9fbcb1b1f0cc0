package node

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
