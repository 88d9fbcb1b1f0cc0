package metrics

import (
	"bytes"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// DefaultHistoryInterval is the sampling interval of a History when the
// node sets none; HistoryWindow is how far back a History reaches.
const (
	DefaultHistoryInterval = 5 * time.Second
	HistoryWindow          = 15 * time.Minute
)

// HistoryRoute is the route label of the requests that read the history
// (GET /_node/…/_history). The history leaves them out of its request
// rates and latencies: a page that polls it would otherwise only ever see
// its own polling. _prometheus still counts them.
const HistoryRoute = "_history"

// Sample is one interval of a node's history: rates over the interval
// that ends at T (unix milliseconds), gauges as they were at T.
type Sample struct {
	T int64 `json:"t"`
	// RequestsPerSec is by "METHOD Nxx" (method and status class); a key
	// with no requests in the interval is left out.
	RequestsPerSec map[string]float64 `json:"requests_per_sec"`
	// LatencyP50Ms and LatencyP99Ms are quantiles of the interval's
	// request latencies (histogram_quantile over the buckets' deltas);
	// 0 when no request was answered.
	LatencyP50Ms          float64 `json:"latency_p50_ms"`
	LatencyP99Ms          float64 `json:"latency_p99_ms"`
	DocsWrittenPerSec     float64 `json:"docs_written_per_sec"`
	DocsReadPerSec        float64 `json:"docs_read_per_sec"`
	ReplicationDocsPerSec float64 `json:"replication_docs_per_sec"`
	// CompactionMBPerSec is what compactions copied (MiB/s: the doc
	// records their walks rewrote, the value-log files GC rewrote);
	// CompactionReclaimedMBPerSec the value-log files they deleted unread.
	CompactionMBPerSec          float64 `json:"compaction_mb_per_sec"`
	CompactionReclaimedMBPerSec float64 `json:"compaction_reclaimed_mb_per_sec"`
	DiskBytes                   int64   `json:"disk_bytes"`
	RSSBytes                    int64   `json:"rss_bytes"`
}

// History is a ring of a node's last samples: HistoryWindow / interval of
// them, oldest first. Run fills it; Samples reads it. Its methods are
// safe for concurrent use.
type History struct {
	m        *Metrics
	interval time.Duration

	mu   sync.Mutex
	ring ring

	// the sampler's state: read and written by Run's goroutine only
	prev snapshot
}

// ring is a fixed-capacity ring of samples; it grows to its capacity as
// samples come, so a node that runs minutes holds only minutes.
type ring struct {
	buf  []Sample
	cap  int
	next int // where the next sample goes once buf is full
}

func (r *ring) push(s Sample) {
	if len(r.buf) < r.cap {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % r.cap
}

// since returns the samples with T > t, oldest first.
func (r *ring) since(t int64) []Sample {
	out := make([]Sample, 0, len(r.buf))
	for i := range len(r.buf) {
		s := r.buf[(r.next+i)%len(r.buf)]
		if s.T > t {
			out = append(out, s)
		}
	}
	return out
}

// newHistory builds the history of m, sampled every interval (0: the
// default).
func newHistory(m *Metrics, interval time.Duration) *History {
	if interval <= 0 {
		interval = DefaultHistoryInterval
	}
	n := max(1, int((HistoryWindow+interval-1)/interval))
	return &History{m: m, interval: interval, ring: ring{cap: n}}
}

// Interval is the time between two samples.
func (h *History) Interval() time.Duration { return h.interval }

// Window is the time the full ring covers.
func (h *History) Window() time.Duration { return time.Duration(h.ring.cap) * h.interval }

// Samples returns the samples taken after since (unix milliseconds;
// 0 or less: all of them), oldest first.
func (h *History) Samples(since int64) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ring.since(since)
}

// Run samples every interval until stop is closed. The node runs it on a
// goroutine of its own and waits for it as it closes.
func (h *History) Run(stop <-chan struct{}) {
	h.Tick(time.Now())
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			h.Tick(now)
		}
	}
}

// Tick takes one sample at now: the rates since the previous tick. The
// first tick only reads the counters it starts from. Run calls it; tests
// and benchmarks may call it instead of Run, never beside it.
func (h *History) Tick(now time.Time) {
	cur := h.m.snapshot(now)
	prev := h.prev
	h.prev = cur
	if !prev.taken {
		return
	}
	s := cur.sample(&prev)
	h.mu.Lock()
	h.ring.push(s)
	h.mu.Unlock()
}

// reqKey is one series of settee_http_requests_total.
type reqKey struct{ route, method, code string }

// snapshot is the counters and gauges the history reads at one tick.
type snapshot struct {
	at       time.Time
	requests map[reqKey]float64
	// buckets are the cumulative counts of the latency histogram summed
	// over its series (bounds: latencyBuckets, then +Inf)
	buckets      []float64
	docsWritten  float64
	docsRead     float64
	replications map[string]float64 // docs written, by replication id
	dropped      float64            // value-log bytes reclaim deleted
	copied       float64            // bytes compactions copied
	disk, rss    int64
	taken        bool
}

// snapshot reads the history's numbers: the request counters and latency
// histogram (without the history's own route), the document counters, the
// task registry, the store's sizes and the process' RSS.
func (m *Metrics) snapshot(now time.Time) snapshot {
	s := snapshot{at: now, requests: map[reqKey]float64{}, buckets: make([]float64, len(latencyBuckets)+1),
		taken: true}
	var d dto.Metric
	each(m.requests, func(pm prometheus.Metric) {
		d.Reset()
		if pm.Write(&d) != nil {
			return
		}
		var k reqKey
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "route":
				k.route = l.GetValue()
			case "method":
				k.method = l.GetValue()
			case "code":
				k.code = l.GetValue()
			}
		}
		if k.route != HistoryRoute {
			s.requests[k] = d.GetCounter().GetValue()
		}
	})
	each(m.latency, func(pm prometheus.Metric) {
		d.Reset()
		if pm.Write(&d) != nil {
			return
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "route" && l.GetValue() == HistoryRoute {
				return
			}
		}
		hist := d.GetHistogram()
		for i, b := range hist.GetBucket() {
			if i < len(latencyBuckets) {
				s.buckets[i] += float64(b.GetCumulativeCount())
			}
		}
		s.buckets[len(latencyBuckets)] += float64(hist.GetSampleCount())
	})
	s.docsWritten = counterValue(m.docsWritten, &d)
	s.docsRead = counterValue(m.docsRead, &d)
	if m.cfg.Tasks != nil {
		for _, t := range m.cfg.Tasks.List() {
			if t["type"] == "replication" {
				id, _ := t["replication_id"].(string)
				if s.replications == nil {
					s.replications = map[string]float64{}
				}
				s.replications[id] += number(t["docs_written"])
			}
		}
	}
	if r, ok := m.cfg.Disk.(Reclaimer); ok {
		_, b, _ := r.ValueLogFiles()
		s.dropped = float64(b)
	}
	if c, ok := m.cfg.Disk.(Copier); ok {
		s.copied = float64(c.CopiedBytes())
	}
	switch {
	case m.cfg.Disk != nil:
		s.disk = m.cfg.Disk.Allocated()
	case m.cfg.Storage != nil:
		lsm, vlog := m.cfg.Storage.Size()
		s.disk = lsm + vlog
	}
	s.rss = rss()
	return s
}

// sample is the interval from prev to s.
func (s *snapshot) sample(prev *snapshot) Sample {
	out := Sample{T: s.at.UnixMilli(), RequestsPerSec: map[string]float64{}, DiskBytes: s.disk, RSSBytes: s.rss}
	secs := s.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return out
	}
	counts := map[string]float64{}
	for k, v := range s.requests {
		if d := delta(v, prev.requests[k]); d > 0 {
			counts[k.method+" "+statusClass(k.code)] += d
		}
	}
	for k, n := range counts {
		out.RequestsPerSec[k] = round3(n / secs)
	}
	deltas := make([]float64, len(s.buckets))
	for i := range s.buckets {
		deltas[i] = delta(s.buckets[i], prev.buckets[i])
	}
	out.LatencyP50Ms = round3(1000 * Quantile(0.5, latencyBuckets, deltas))
	out.LatencyP99Ms = round3(1000 * Quantile(0.99, latencyBuckets, deltas))
	out.DocsWrittenPerSec = round3(delta(s.docsWritten, prev.docsWritten) / secs)
	out.DocsReadPerSec = round3(delta(s.docsRead, prev.docsRead) / secs)
	var rep float64
	for id, v := range s.replications {
		rep += delta(v, prev.replications[id])
	}
	out.ReplicationDocsPerSec = round3(rep / secs)
	out.CompactionMBPerSec = round3(delta(s.copied, prev.copied) / (1 << 20) / secs)
	out.CompactionReclaimedMBPerSec = round3(delta(s.dropped, prev.dropped) / (1 << 20) / secs)
	return out
}

// delta is a counter's increase from prev to cur; a counter that went
// back (a replication job restarted, its task replaced) counts from 0, as
// Prometheus' rate() takes a reset.
func delta(cur, prev float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// statusClass is "2xx" for "201".
func statusClass(code string) string {
	if len(code) != 3 {
		return "other"
	}
	return code[:1] + "xx"
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// Quantile is Prometheus' histogram_quantile(q, …) over one histogram:
// bounds are the finite upper bounds in increasing order, cumulative the
// cumulative counts of those buckets followed by the +Inf bucket's (the
// total). The quantile's rank falls in a bucket and is interpolated
// linearly within it (the first bucket starting at 0); a rank in the +Inf
// bucket answers the highest finite bound. No observations answer 0 (where
// Prometheus answers NaN: a graph wants a number).
func Quantile(q float64, bounds, cumulative []float64) float64 {
	if len(cumulative) == 0 || len(cumulative) != len(bounds)+1 {
		return 0
	}
	total := cumulative[len(cumulative)-1]
	if total <= 0 || math.IsNaN(q) {
		return 0
	}
	if q <= 0 {
		q = 0
	}
	if q >= 1 {
		q = 1
	}
	rank := q * total
	b := sort.Search(len(cumulative), func(i int) bool { return cumulative[i] >= rank })
	if b == len(bounds) { // the +Inf bucket
		if len(bounds) == 0 {
			return 0
		}
		return bounds[len(bounds)-1]
	}
	if b == 0 && bounds[0] <= 0 {
		return bounds[0]
	}
	start, end := 0.0, bounds[b]
	count := cumulative[b]
	if b > 0 {
		start = bounds[b-1]
		count -= cumulative[b-1]
		rank -= cumulative[b-1]
	}
	if count <= 0 {
		return end
	}
	return start + (end-start)*(rank/count)
}

// each hands every metric c collects to f, on the caller's goroutine.
func each(c prometheus.Collector, f func(prometheus.Metric)) {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for pm := range ch {
		f(pm)
	}
}

func counterValue(c prometheus.Counter, d *dto.Metric) float64 {
	d.Reset()
	if c.Write(d) != nil {
		return 0
	}
	return d.GetCounter().GetValue()
}

// rss is the process' resident set: process_resident_memory_bytes as the
// process collector reports it (the kernel's RSS count, times the page
// size), read from /proc/self/statm alone; the collector's full Collect
// (stat, limits, fds) cost most of a tick. 0 where there is no /proc.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	// "size resident shared text lib data dt", in pages
	_, rest, _ := bytes.Cut(b, []byte(" "))
	res, _, _ := bytes.Cut(rest, []byte(" "))
	pages, err := strconv.ParseInt(string(res), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
