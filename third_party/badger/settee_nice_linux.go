//go:build linux

package badger

import (
	"runtime"
	"syscall"
)

// settee patch.

// setteeLowPriority moves the calling goroutine to an OS thread of its own
// at nice opt.setteeBackgroundNice, for good: the goroutine must end
// without runtime.UnlockOSThread, so that the thread ends with it and its
// priority never passes to another goroutine (a thread may not raise its
// priority back without privileges).
func setteeLowPriority(opt Options) {
	if opt.setteeBackgroundNice <= 0 {
		return
	}
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), opt.setteeBackgroundNice)
}
