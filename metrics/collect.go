package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/settee/settee/tasks"
)

// taskCollector reads the task registry at scrape time: running
// replications (their counters are the job's own, reset when a job
// restarts, which rate() takes in its stride) and compactions.
type taskCollector struct {
	tasks *tasks.Registry
}

var (
	descActive = prometheus.NewDesc("settee_active_tasks",
		"Running tasks (as in /_active_tasks), by type.", []string{"type"}, nil)
	descRepRead = prometheus.NewDesc("settee_replication_docs_read_total",
		"Documents a running replication read from its source.", []string{"replication_id"}, nil)
	descRepWritten = prometheus.NewDesc("settee_replication_docs_written_total",
		"Documents a running replication wrote to its target.", []string{"replication_id"}, nil)
	descRepFailures = prometheus.NewDesc("settee_replication_doc_write_failures_total",
		"Documents a running replication failed to write.", []string{"replication_id"}, nil)
	descRepPending = prometheus.NewDesc("settee_replication_changes_pending",
		"Source changes a running replication has not processed yet.", []string{"replication_id"}, nil)
	descCompaction = prometheus.NewDesc("settee_compaction_progress_percent",
		"Progress of a running shard compaction, 0-100.", []string{"database", "range"}, nil)
)

func (c *taskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descRepRead, descRepWritten, descRepFailures, descRepPending, descCompaction} {
		ch <- d
	}
}

// repStats is what one replication reports.
type repStats struct {
	read, written, failures, pending float64
	hasPending                       bool
}

func (c *taskCollector) Collect(ch chan<- prometheus.Metric) {
	active := map[string]float64{}
	reps := map[string]repStats{}
	compactions := map[[2]string]float64{}
	for _, t := range c.tasks.List() {
		typ, _ := t["type"].(string)
		active[typ]++
		switch typ {
		case "replication":
			id, _ := t["replication_id"].(string)
			r := reps[id] // one label set per id, should two tasks share one
			r.read += number(t["docs_read"])
			r.written += number(t["docs_written"])
			r.failures += number(t["doc_write_failures"])
			if p, ok := numeric(t["changes_pending"]); ok { // nil until known
				r.pending += p
				r.hasPending = true
			}
			reps[id] = r
		case "database_compaction":
			name, _ := t["database"].(string)
			k := shardLabels(name)
			compactions[k] = max(compactions[k], number(t["progress"]))
		}
	}
	for typ, n := range active {
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, n, typ)
	}
	for id, r := range reps {
		ch <- prometheus.MustNewConstMetric(descRepRead, prometheus.CounterValue, r.read, id)
		ch <- prometheus.MustNewConstMetric(descRepWritten, prometheus.CounterValue, r.written, id)
		ch <- prometheus.MustNewConstMetric(descRepFailures, prometheus.CounterValue, r.failures, id)
		if r.hasPending {
			ch <- prometheus.MustNewConstMetric(descRepPending, prometheus.GaugeValue, r.pending, id)
		}
	}
	for k, p := range compactions {
		ch <- prometheus.MustNewConstMetric(descCompaction, prometheus.GaugeValue, p, k[0], k[1])
	}
}

// shardLabels splits a shard's name, "shards/00000000-7fffffff/db", into
// the database and the range; another name is a database of its own.
func shardLabels(name string) [2]string {
	if rest, ok := strings.CutPrefix(name, "shards/"); ok {
		if rng, db, ok := strings.Cut(rest, "/"); ok {
			return [2]string{db, rng}
		}
	}
	return [2]string{name, ""}
}

// number is a task field as a float (0 when absent or not a number).
func number(v any) float64 {
	f, _ := numeric(v)
	return f
}

func numeric(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// storageCollector reports the store's sizes at scrape time; either
// source may be nil.
type storageCollector struct {
	s Sizer
	d Allocator
}

var (
	descLSM = prometheus.NewDesc("settee_badger_lsm_size_bytes",
		"Size of badger's LSM tree files (keys and small values), as badger last measured it (at open, then each minute).", nil, nil)
	descVlog = prometheus.NewDesc("settee_badger_vlog_size_bytes",
		"Size of badger's value log files (large values), as badger last measured it (at open, then each minute).", nil, nil)
	descAllocated = prometheus.NewDesc("settee_disk_allocated_bytes",
		"Bytes the data directory holds on disk (allocated blocks), measured at most once a second.", nil, nil)
)

// Reclaimer reports what the node's space reclamations did to the value
// log (an Allocator may implement it; storage.Disk does).
type Reclaimer interface {
	ValueLogFiles() (dropped, droppedBytes, rewritten int64)
}

// Copier reports what the node's compactions copied (storage.Disk does).
type Copier interface {
	CopiedBytes() int64
}

var descCopied = prometheus.NewDesc("settee_compaction_copied_bytes_total",
	"Bytes compactions copied: doc records their walks rewrote and value-log files badger's GC rewrote.", nil, nil)

var (
	descDropped = prometheus.NewDesc("settee_vlog_files_dropped_total",
		"Value-log files that space reclamation deleted without reading them (no key pointed into them).", nil, nil)
	descDroppedBytes = prometheus.NewDesc("settee_vlog_dropped_bytes_total",
		"Bytes of the value-log files deleted without reading them.", nil, nil)
	descRewritten = prometheus.NewDesc("settee_vlog_files_rewritten_total",
		"Value-log files that badger's GC read and rewrote (partly live).", nil, nil)
)

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLSM
	ch <- descVlog
	ch <- descAllocated
	if _, ok := c.d.(Reclaimer); ok {
		ch <- descDropped
		ch <- descDroppedBytes
		ch <- descRewritten
	}
	if _, ok := c.d.(Copier); ok {
		ch <- descCopied
	}
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s != nil {
		lsm, vlog := c.s.Size()
		ch <- prometheus.MustNewConstMetric(descLSM, prometheus.GaugeValue, float64(lsm))
		ch <- prometheus.MustNewConstMetric(descVlog, prometheus.GaugeValue, float64(vlog))
	}
	if c.d != nil {
		ch <- prometheus.MustNewConstMetric(descAllocated, prometheus.GaugeValue, float64(c.d.Allocated()))
	}
	if r, ok := c.d.(Reclaimer); ok {
		dropped, bytes, rewritten := r.ValueLogFiles()
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(dropped))
		ch <- prometheus.MustNewConstMetric(descDroppedBytes, prometheus.CounterValue, float64(bytes))
		ch <- prometheus.MustNewConstMetric(descRewritten, prometheus.CounterValue, float64(rewritten))
	}
	if cp, ok := c.d.(Copier); ok {
		ch <- prometheus.MustNewConstMetric(descCopied, prometheus.CounterValue, float64(cp.CopiedBytes()))
	}
}
