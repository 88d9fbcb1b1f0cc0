package metrics_test

import (
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settee/settee/metrics"
	"github.com/settee/settee/tasks"
)

// Prometheus' histogram_quantile, computed by hand over bounds 1, 2, 4
// (and +Inf).
func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, c := range []struct {
		name       string
		q          float64
		cumulative []float64
		want       float64
	}{
		{"no observations", 0.5, []float64{0, 0, 0, 0}, 0},
		{"no buckets at all", 0.5, nil, 0},
		{"first bucket starts at 0", 0.5, []float64{10, 10, 10, 10}, 0.5},
		{"middle bucket", 0.5, []float64{0, 10, 10, 10}, 1.5},
		{"rank across buckets", 0.99, []float64{2, 4, 8, 8}, 2 + 2*(7.92-4)/4},
		{"rank on a bucket's edge", 0.5, []float64{5, 5, 10, 10}, 1},
		{"q=1 is the top of the last bucket used", 1, []float64{2, 4, 8, 8}, 4},
		{"q=0", 0, []float64{2, 4, 8, 8}, 0},
		{"+Inf bucket answers the highest finite bound", 0.5, []float64{0, 0, 0, 5}, 4},
		{"p99 in +Inf, p50 not", 0.99, []float64{90, 90, 90, 100}, 4},
		{"counts not matching bounds", 0.5, []float64{1, 2}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := metrics.Quantile(c.q, bounds, c.cumulative); !near(got, c.want) {
				t.Errorf("Quantile(%v, %v) = %v, want %v", c.q, c.cumulative, got, c.want)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// reclaimDisk is a Disk whose reclaimed bytes move.
type reclaimDisk struct{ alloc, dropped, copied atomic.Int64 }

func (d *reclaimDisk) CopiedBytes() int64 { return d.copied.Load() }

func (d *reclaimDisk) Allocated() int64 { return d.alloc.Load() }
func (d *reclaimDisk) ValueLogFiles() (int64, int64, int64) {
	return 1, d.dropped.Load(), 0
}

// One interval's rates: requests by method and status class (the
// history's own reads left out), latency quantiles from the interval's
// buckets, documents, replication and compaction.
func TestHistoryRates(t *testing.T) {
	reg := tasks.New("n1")
	disk := &reclaimDisk{}
	disk.alloc.Store(12345)
	m := metrics.New(metrics.Config{Tasks: reg, Disk: disk, HistoryInterval: time.Minute})
	h := m.History()
	rep := reg.Start("replication", map[string]any{"replication_id": "abc", "docs_written": 0})
	m.ObserveRequest("doc", "PUT", 201, time.Second) // before the first tick: not in a sample
	t0 := time.UnixMilli(1733245200000)
	h.Tick(t0)
	if got := h.Samples(0); len(got) != 0 {
		t.Fatalf("the first tick recorded %v", got)
	}

	for range 10 {
		m.ObserveRequest("doc", "PUT", 201, 3*time.Millisecond)
	}
	m.ObserveRequest("doc", "GET", 404, 3*time.Millisecond)
	m.ObserveRequest("_all_docs", "GET", 404, 3*time.Millisecond)
	for range 5 { // the console polling: neither rates nor latency
		m.ObserveRequest(metrics.HistoryRoute, "GET", 200, time.Second)
	}
	m.Committed(3, 20, time.Millisecond)
	m.DocsRead(4)
	rep.Update(map[string]any{"docs_written": uint64(30)})
	disk.dropped.Store(4 << 20)
	disk.copied.Store(3 << 20)
	h.Tick(t0.Add(2 * time.Second))

	// the job restarts: its new task counts from 0 again
	rep.Done()
	reg.Start("replication", map[string]any{"replication_id": "abc", "docs_written": 4})
	disk.alloc.Store(999)
	h.Tick(t0.Add(4 * time.Second))

	got := h.Samples(0)
	if len(got) != 2 {
		t.Fatalf("samples: %+v", got)
	}
	s := got[0]
	if s.T != 1733245202000 {
		t.Errorf("t = %d", s.T)
	}
	if want := map[string]float64{"PUT 2xx": 5, "GET 4xx": 1}; !maps.Equal(s.RequestsPerSec, want) {
		t.Errorf("requests_per_sec = %v, want %v", s.RequestsPerSec, want)
	}
	// 3 ms lies in (2.5 ms, 5 ms]: interpolated as histogram_quantile does
	for name, c := range map[string][2]float64{
		"latency_p50_ms":                  {s.LatencyP50Ms, 2.5 + 2.5*0.5},
		"latency_p99_ms":                  {s.LatencyP99Ms, 2.5 + 2.5*0.99},
		"docs_written_per_sec":            {s.DocsWrittenPerSec, 10},
		"docs_read_per_sec":               {s.DocsReadPerSec, 2},
		"replication_docs_per_sec":        {s.ReplicationDocsPerSec, 15},
		"compaction_mb_per_sec":           {s.CompactionMBPerSec, 1.5},
		"compaction_reclaimed_mb_per_sec": {s.CompactionReclaimedMBPerSec, 2},
		"disk_bytes":                      {float64(s.DiskBytes), 12345},
	} {
		if !near(c[0], c[1]) {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if s.RSSBytes <= 0 {
		t.Errorf("rss_bytes = %d", s.RSSBytes)
	}

	s = got[1]
	if len(s.RequestsPerSec) != 0 || s.LatencyP50Ms != 0 || s.LatencyP99Ms != 0 || s.DocsWrittenPerSec != 0 ||
		s.CompactionMBPerSec != 0 || s.CompactionReclaimedMBPerSec != 0 || s.DiskBytes != 999 {
		t.Errorf("an idle interval: %+v", s)
	}
	if s.RequestsPerSec == nil {
		t.Error("requests_per_sec is nil, want {}")
	}
	if !near(s.ReplicationDocsPerSec, 2) {
		t.Errorf("replication_docs_per_sec after a restart = %v, want 2", s.ReplicationDocsPerSec)
	}
}

// The ring keeps the window's last samples, oldest first; since leaves
// out what a poller has.
func TestHistoryRing(t *testing.T) {
	for _, c := range []struct {
		interval         time.Duration
		ticks, keep      int
		wantInt, wantWin time.Duration
	}{
		{0, 3, 3, 5 * time.Second, 15 * time.Minute},               // the default: 180 samples
		{time.Minute, 10, 10, time.Minute, 15 * time.Minute},       // not full yet
		{time.Minute, 15, 15, time.Minute, 15 * time.Minute},       // full
		{time.Minute, 40, 15, time.Minute, 15 * time.Minute},       // wrapped more than twice
		{7 * time.Minute, 5, 3, 7 * time.Minute, 21 * time.Minute}, // the window rounds up
	} {
		h := metrics.New(metrics.Config{HistoryInterval: c.interval}).History()
		if h.Interval() != c.wantInt || h.Window() != c.wantWin {
			t.Errorf("interval %v: Interval %v Window %v, want %v %v", c.interval, h.Interval(), h.Window(), c.wantInt, c.wantWin)
		}
		t0 := time.UnixMilli(1_000_000)
		for i := range c.ticks + 1 { // the first is the baseline
			h.Tick(t0.Add(time.Duration(i) * time.Second))
		}
		got := h.Samples(0)
		if len(got) != c.keep {
			t.Fatalf("interval %v, %d ticks: %d samples, want %d", c.interval, c.ticks, len(got), c.keep)
		}
		for i, s := range got {
			if want := t0.Add(time.Duration(c.ticks-c.keep+1+i) * time.Second).UnixMilli(); s.T != want {
				t.Errorf("interval %v, %d ticks: sample %d at %d, want %d", c.interval, c.ticks, i, s.T, want)
			}
		}
		last := got[len(got)-1].T
		for _, sc := range []struct {
			since int64
			want  int
		}{{-1, c.keep}, {last, 0}, {last - 1, 1}, {last - 1000, 1}, {last - 1001, min(2, c.keep)}, {last + 1, 0}} {
			if n := len(h.Samples(sc.since)); n != sc.want {
				t.Errorf("interval %v, %d ticks: since %d gave %d samples, want %d", c.interval, c.ticks, sc.since, n, sc.want)
			}
		}
	}
}

// A tick on an idle node costs well under a millisecond (the sampler's
// only cost; it runs every 5 s).
func BenchmarkHistoryTick(b *testing.B) {
	m := metrics.New(metrics.Config{Tasks: tasks.New("n"), Storage: fakeSizer{1, 2}, Disk: fakeDisk(3)})
	for _, r := range []string{"doc", "db", "_all_docs", "_bulk_docs", "_changes", "_node"} {
		for _, meth := range []string{"GET", "PUT", "POST"} {
			m.ObserveRequest(r, meth, 200, time.Millisecond)
			m.ObserveRequest(r, meth, 404, time.Millisecond)
		}
	}
	h := m.History()
	now := time.Now()
	h.Tick(now)
	for b.Loop() {
		now = now.Add(time.Second)
		h.Tick(now)
	}
}
