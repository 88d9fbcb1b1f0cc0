package bench

import (
	"testing"
	"time"
)

func TestFsyncMeasures(t *testing.T) {
	r, err := Fsync(t.TempDir(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops < 1 || r.Hz <= 0 || r.P50Ms <= 0 {
		t.Fatalf("fsync result %+v", r)
	}
}
