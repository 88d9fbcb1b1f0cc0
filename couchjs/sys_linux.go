package couchjs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
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
