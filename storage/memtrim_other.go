//go:build !linux

package storage

import (
	"log/slog"
	"time"
)

// fileTrimmer is Linux-only (memtrim_linux.go); elsewhere it does nothing.
type fileTrimmer struct{}

func startFileTrimmer(string, int, time.Duration, *slog.Logger) *fileTrimmer { return &fileTrimmer{} }

func (*fileTrimmer) Close() {}

func (*fileTrimmer) Pause() {}

func (*fileTrimmer) Resume() {}
