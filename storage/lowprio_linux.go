//go:build linux

package storage

import (
	"runtime"
	"syscall"
)

// LowPriority moves the calling goroutine to an OS thread of its own at
// nice +nice, for CPU work that must yield to request handling (a
// compactor's walk). The goroutine must end without calling
// runtime.UnlockOSThread: the thread then ends with it, so its priority
// never passes to another goroutine. RocksDB lowers its compaction threads
// the same way. Goroutines the work starts run at normal priority.
func LowPriority(nice int) {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}
