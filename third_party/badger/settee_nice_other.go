//go:build !linux

package badger

// settee patch: threads have no nice value of their own here.
func setteeLowPriority(Options) {}
