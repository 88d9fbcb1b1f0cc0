package storage

import (
	"testing"
	"time"
)

// Close waits for the background work started with Go, which ends once
// the Disk's calls refuse (a compactor's walk and reclaim); afterwards Go
// refuses to start more.
func TestCloseWaitsForBackgroundWork(t *testing.T) {
	d := NewDisk(nil, t.TempDir(), nil)
	started, ended := make(chan struct{}), make(chan struct{})
	if !d.Go(func() {
		close(started)
		// as a compactor waiting for the copy slot another one holds
		for d.Acquire() {
			d.Release()
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		close(ended)
	}) {
		t.Fatal("Go refused before Close")
	}
	<-started
	d.Close()
	select {
	case <-ended:
	default:
		t.Fatal("Close returned while work started with Go still ran")
	}
	if d.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go accepted work after Close")
	}
}
