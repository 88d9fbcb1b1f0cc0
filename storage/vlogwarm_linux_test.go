//go:build linux && (amd64 || arm64)

package storage

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// warmFile reads what is not cached, and only that.
func TestWarmFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "000001.vlog")
	const size = 3<<20 + 1000
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	const fadvDontneed = 4
	if _, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontneed, 0, 0); e != 0 {
		t.Fatal(e)
	}
	resident := func() int {
		n := 0
		for _, p := range residentPages(f, size) {
			n += int(p & 1)
		}
		return n
	}
	if n := resident(); n > 16 {
		t.Skipf("%d pages still cached after POSIX_FADV_DONTNEED", n)
	}
	read, err := warmFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if read != size {
		t.Fatalf("read %d bytes, want %d", read, size)
	}
	if n, all := resident(), (size+os.Getpagesize()-1)/os.Getpagesize(); n != all {
		t.Fatalf("%d of %d pages cached after warmFile", n, all)
	}
	if read, err = warmFile(path); err != nil || read != 0 {
		t.Fatalf("second warmFile read %d bytes (err %v), want 0", read, err)
	}
}
