//go:build !linux

package bench

import "os"

// fdatasync falls back to a full fsync where the system has no fdatasync
// (macOS, Windows): the measured rate is then that of fsync.
func fdatasync(f *os.File) error { return f.Sync() }
