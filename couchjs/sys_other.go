//go:build !linux

package couchjs

import (
	"errors"
	"os"
)

// Without /proc the Pool does not watch its workers' resident memory; the
// address-space bound holds alone.
func residentBytes(int) (int64, bool) { return 0, false }

func limitAddressSpace(int64) error { return nil }

func growPipe(*os.File) {}

// Elsewhere batches go through the pipe.
func newSharedMemory(int) (*os.File, []byte, error) {
	return nil, nil, errors.New("couchjs: no shared memory here")
}

func mapSharedMemory(int, int) ([]byte, error) {
	return nil, errors.New("couchjs: no shared memory here")
}

func unmapSharedMemory([]byte) {}
