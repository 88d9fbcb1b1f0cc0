//go:build !linux

package shard

// lowPriority does nothing where threads have no nice value of their own.
func lowPriority() {}
