package metrics

import (
	"bytes"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/settee/settee/tasks"
)

// ContentType is the media type of Text, as CouchDB 3.5 answers
// /_node/_local/_prometheus.
const ContentType = "text/plain; version=0.0.4"

// Sizer reports the sizes of the node's badger files; badger's *DB
// satisfies it.
type Sizer interface {
	Size() (lsm, vlog int64)
}

// Allocator reports the bytes the data directory holds on disk;
// storage.Disk satisfies it.
type Allocator interface {
	Allocated() int64
}

// Config wires a node's metrics. Every field is optional.
type Config struct {
	// Tasks is the node's task registry: replications and compactions
	// are read from it at each scrape.
	Tasks *tasks.Registry
	// Storage is the node's badger.
	Storage Sizer
	// Disk measures the data directory.
	Disk Allocator
	// HistoryInterval is the sampling interval of History (0:
	// DefaultHistoryInterval).
	HistoryInterval time.Duration
}

// Metrics is one node's registry and the instruments the node feeds. Its
// methods are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	cfg     Config
	history *History

	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	docsWritten prometheus.Counter
	docsRead    prometheus.Counter
	commitDocs  prometheus.Histogram
	commitTime  prometheus.Histogram
}

// New builds a node's registry with its instruments and collectors.
func New(cfg Config) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		cfg: cfg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settee_http_requests_total",
			Help: "HTTP requests answered, by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "settee_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route and method.",
			Buckets: latencyBuckets,
		}, []string{"route", "method"}),
		docsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "settee_docs_written_total",
			Help: "Document updates accepted by this node's shard copies (each copy counts).",
		}),
		docsRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "settee_docs_read_total",
			Help: "Documents read from this node's shard copies: by id, or as include_docs rows.",
		}),
		commitDocs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "settee_shard_commit_docs",
			Help:    "Document updates per shard group commit (groups that carry any).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13), // 1 .. 4096
		}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "settee_shard_commit_duration_seconds",
			Help:    "Time of a shard group's synced badger commit (the fsync).",
			Buckets: prometheus.ExponentialBuckets(.0001, 2, 16), // 100µs .. 3.3s
		}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.docsWritten, m.docsRead, m.commitDocs, m.commitTime,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Tasks != nil {
		m.reg.MustRegister(&taskCollector{tasks: cfg.Tasks})
	}
	if cfg.Storage != nil || cfg.Disk != nil {
		m.reg.MustRegister(&storageCollector{s: cfg.Storage, d: cfg.Disk})
	}
	m.history = newHistory(m, cfg.HistoryInterval)
	return m
}

// latencyBuckets are the upper bounds of the request latency histogram
// (seconds).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// History is the node's recent history of its own metrics (the console's
// graphs, GET /_node/_local/_history); the node runs its sampler.
func (m *Metrics) History() *History { return m.history }

// ObserveRequest records one answered HTTP request. route must come from a
// fixed set of words (the gateway's endpoint names), never from the path.
func (m *Metrics) ObserveRequest(route, method string, code int, took time.Duration) {
	if code == 0 {
		code = 200 // net/http's answer when a handler writes nothing
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route, method).Observe(took.Seconds())
}

// Committed records one shard group commit (shard.Observer).
func (m *Metrics) Committed(docs, written int, took time.Duration) {
	if docs > 0 {
		m.commitDocs.Observe(float64(docs))
	}
	m.docsWritten.Add(float64(written))
	m.commitTime.Observe(took.Seconds())
}

// DocsRead records documents read from a shard copy (shard.Observer).
func (m *Metrics) DocsRead(n int) { m.docsRead.Add(float64(n)) }

// Text gathers every metric and renders them in Prometheus' text
// exposition format (ContentType).
func (m *Metrics) Text() ([]byte, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}
