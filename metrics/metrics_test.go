package metrics_test

import (
	"bytes"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/settee/settee/metrics"
	"github.com/settee/settee/tasks"
)

type fakeSizer struct{ lsm, vlog int64 }

func (f fakeSizer) Size() (int64, int64) { return f.lsm, f.vlog }

type fakeDisk int64

func (f fakeDisk) Allocated() int64 { return int64(f) }

func (f fakeDisk) ValueLogFiles() (int64, int64, int64) { return 7, 7 << 20, 2 }

func parse(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	b, err := m.Text()
	if err != nil {
		t.Fatalf("Text: %v", err)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return mfs
}

// value is the value of the one metric of a family whose labels are want.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	for _, m := range mfs[name].GetMetric() {
		labels := m.GetLabel()
		if len(labels)*2 != len(want) {
			continue
		}
		ok := true
		for i, l := range labels { // the text format sorts labels by name
			ok = ok && l.GetName() == want[2*i] && l.GetValue() == want[2*i+1]
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			return m.GetUntyped().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, want)
	return 0
}

func TestInstruments(t *testing.T) {
	m := metrics.New(metrics.Config{Storage: fakeSizer{lsm: 1 << 20, vlog: 3 << 20}, Disk: fakeDisk(5 << 20)})
	m.ObserveRequest("doc", "PUT", 201, 3*time.Millisecond)
	m.ObserveRequest("doc", "PUT", 201, time.Millisecond)
	m.ObserveRequest("doc", "PUT", 409, time.Millisecond)
	m.ObserveRequest("_up", "GET", 0, time.Millisecond) // nothing written: net/http's 200
	m.Committed(3, 2, 2*time.Millisecond)
	m.Committed(0, 0, time.Millisecond) // a flush: a commit, no batch
	m.DocsRead(4)

	mfs := parse(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"settee_http_requests_total", []string{"code", "201", "method", "PUT", "route", "doc"}, 2},
		{"settee_http_requests_total", []string{"code", "409", "method", "PUT", "route", "doc"}, 1},
		{"settee_http_requests_total", []string{"code", "200", "method", "GET", "route", "_up"}, 1},
		{"settee_http_request_duration_seconds", []string{"method", "PUT", "route", "doc"}, 3},
		{"settee_docs_written_total", nil, 2},
		{"settee_docs_read_total", nil, 4},
		{"settee_shard_commit_docs", nil, 1},
		{"settee_shard_commit_duration_seconds", nil, 2},
		{"settee_badger_lsm_size_bytes", nil, 1 << 20},
		{"settee_badger_vlog_size_bytes", nil, 3 << 20},
		{"settee_disk_allocated_bytes", nil, 5 << 20},
		{"settee_vlog_files_dropped_total", nil, 7},
		{"settee_vlog_dropped_bytes_total", nil, 7 << 20},
		{"settee_vlog_files_rewritten_total", nil, 2},
	} {
		if got := value(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes"} {
		if mfs[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}

func TestTasksReadAtScrape(t *testing.T) {
	reg := tasks.New("n1")
	m := metrics.New(metrics.Config{Tasks: reg})
	rep := reg.Start("replication", map[string]any{"replication_id": "abc+continuous",
		"docs_read": 0, "docs_written": 0, "doc_write_failures": 0, "changes_pending": nil})
	comp := reg.Start("database_compaction", map[string]any{"database": "shards/00000000-7fffffff/albums/2024", "progress": 0})

	mfs := parse(t, m)
	if mfs["settee_replication_changes_pending"] != nil {
		t.Errorf("changes_pending reported before it is known: %v", mfs["settee_replication_changes_pending"])
	}
	rep.Update(map[string]any{"docs_read": uint64(12), "docs_written": uint64(10), "doc_write_failures": uint64(1), "changes_pending": uint64(7)})
	comp.Update(map[string]any{"progress": 40})

	mfs = parse(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"settee_replication_docs_read_total", []string{"replication_id", "abc+continuous"}, 12},
		{"settee_replication_docs_written_total", []string{"replication_id", "abc+continuous"}, 10},
		{"settee_replication_doc_write_failures_total", []string{"replication_id", "abc+continuous"}, 1},
		{"settee_replication_changes_pending", []string{"replication_id", "abc+continuous"}, 7},
		{"settee_compaction_progress_percent", []string{"database", "albums/2024", "range", "00000000-7fffffff"}, 40},
		{"settee_active_tasks", []string{"type", "replication"}, 1},
		{"settee_active_tasks", []string{"type", "database_compaction"}, 1},
	} {
		if got := value(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	rep.Done()
	comp.Done()
	mfs = parse(t, m)
	for _, name := range []string{"settee_replication_docs_written_total", "settee_compaction_progress_percent", "settee_active_tasks"} {
		if mfs[name] != nil {
			t.Errorf("%s still reported after its task ended: %v", name, mfs[name])
		}
	}
}

// Each node has its own registry: two in one process neither clash nor
// share counts.
func TestRegistriesAreSeparate(t *testing.T) {
	a, b := metrics.New(metrics.Config{}), metrics.New(metrics.Config{})
	a.DocsRead(5)
	if got := value(t, parse(t, b), "settee_docs_read_total"); got != 0 {
		t.Errorf("b counted a's reads: %v", got)
	}
	if got := value(t, parse(t, a), "settee_docs_read_total"); got != 5 {
		t.Errorf("a: %v", got)
	}
}
