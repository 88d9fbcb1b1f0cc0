//go:build linux

package shard

import (
	"runtime"
	"syscall"
)

// lowPriority moves the calling goroutine to an OS thread of its own at
// nice +compactNice, for CPU work that must yield to request handling (a
// compactor's walk). The goroutine must end without calling
// runtime.UnlockOSThread: the thread then ends with it, so its priority
// never passes to another goroutine. RocksDB lowers its compaction threads
// the same way. Goroutines the work starts run at normal priority.
func lowPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), compactNice)
}
