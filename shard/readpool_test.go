package shard

import (
	"sync"
	"testing"
	"time"
)

// A read never waits for a worker: with every worker blocked, more reads
// still run, and reads after Close run too.
func TestReadPoolNeverBlocks(t *testing.T) {
	p := NewReadPool(2)
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(5)
	for range 5 {
		p.Go(func() {
			started.Done()
			<-release
		})
	}
	waited := make(chan struct{})
	go func() { started.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("reads beyond the pool's workers did not start")
	}
	close(release)
	p.Close()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a read after Close did not run")
	}
	var nilPool *ReadPool
	ran := make(chan struct{})
	nilPool.Go(func() { close(ran) })
	<-ran
}
