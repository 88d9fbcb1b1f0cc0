package couchjs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// residentBytes is process pid's resident set size (/proc/PID/statm).
func residentBytes(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// virtualBytes is this process's address space size (/proc/self/statm).
func virtualBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 1 {
		return 0, fmt.Errorf("couchjs: /proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// limitAddressSpace bounds this process's address space to what it has
// now plus twice n (RLIMIT_AS): an allocation past it fails, and the Go
// runtime answers a failed allocation by exiting. Twice: the heap's
// address space runs ahead of its resident memory (freed spans keep
// their addresses, the collector lets the heap reach twice what is live
// before its memory limit is near); the resident bound n is the parent's
// to hold (Pool.monitor), this one stops the single huge allocation
// before it is made. Not under the race detector, whose shadow memory
// needs terabytes of address space; the parent's watch holds the bound
// there alone.
func limitAddressSpace(n int64) error {
	if raceEnabled {
		return nil
	}
	base, err := virtualBytes()
	if err != nil {
		return err
	}
	lim := uint64(base + 2*n)
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: lim, Max: lim})
}

// growPipe makes the pipe to a worker hold a whole view batch (1 MiB), so
// a batch is written in one go rather than 64 KiB at a time.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		const fSetPipeSz = 1031 // F_SETPIPE_SZ
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, 1<<20)
	})
}

// newSharedMemory makes a memory file of n bytes, mapped read-write
// here; a worker maps it read-only (fd 4) and reads a view batch's docs
// there, with no copy through a pipe.
func newSharedMemory(n int) (*os.File, []byte, error) {
	fd, err := unix.MemfdCreate("couchjs-docs", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("couchjs: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "couchjs-docs")
	if err := f.Truncate(int64(n)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("couchjs: memfd: %w", err)
	}
	b, err := syscall.Mmap(fd, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("couchjs: memfd: %w", err)
	}
	return f, b, nil
}

// mapSharedMemory maps n bytes of fd read-only.
func mapSharedMemory(fd, n int) ([]byte, error) {
	return syscall.Mmap(fd, 0, n, syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmapSharedMemory(b []byte) { _ = syscall.Munmap(b) }
