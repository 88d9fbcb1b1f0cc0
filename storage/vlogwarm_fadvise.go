//go:build linux && (amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package storage

import (
	"os"
	"syscall"
)

// noReadahead turns the kernel's readahead off for reads through f
// (POSIX_FADV_RANDOM): each read brings in what it asks for.
func noReadahead(f *os.File) {
	const fadvRandom = 1
	_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvRandom, 0, 0)
}

// readahead asks the kernel to read n bytes of f at off into the page cache
// (readahead(2), which does not wait for them).
func readahead(f *os.File, off, n int64) bool {
	_, _, e := syscall.Syscall(syscall.SYS_READAHEAD, f.Fd(), uintptr(off), uintptr(n))
	return e == 0
}
