package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FsyncResult is the disk's synced-write rate: the ceiling for sequential
// durable single-doc updates.
type FsyncResult struct {
	Ops    int
	Hz     float64
	P50Ms  float64
	P99Ms  float64
	Period time.Duration
}

// Fsync measures how many 4 KB append+fdatasync cycles per second the
// filesystem under dir sustains, for d.
func Fsync(dir string, d time.Duration) (*FsyncResult, error) {
	f, err := os.CreateTemp(dir, "fsyncbench-*")
	if err != nil {
		return nil, fmt.Errorf("bench: fsync: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(filepath.Join(f.Name()))
	}()
	buf := make([]byte, 4096)
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, fmt.Errorf("bench: fsync: %w", err)
		}
		if err := fdatasync(f); err != nil {
			return nil, fmt.Errorf("bench: fsync: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	el := time.Since(start)
	st := summarize(int64(len(lat)), el, lat)
	return &FsyncResult{Ops: len(lat), Hz: st.hz, P50Ms: st.p50, P99Ms: st.p99, Period: el}, nil
}
