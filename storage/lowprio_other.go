//go:build !linux

package storage

// LowPriority does nothing where threads have no nice value of their own.
func LowPriority(int) {}
