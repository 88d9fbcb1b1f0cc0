package httpgw_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/settee/settee/internal/testserver"
)

// scrape fetches /_node/<node>/_prometheus as admin and parses it.
func scrape(t *testing.T, s *testserver.Server, node string) map[string]*dto.MetricFamily {
	t.Helper()
	resp := s.Do(t, "GET", "/_node/"+node+"/_prometheus", nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("_prometheus: %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4" {
		t.Fatalf("_prometheus content type %q", ct)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse _prometheus: %v\n%s", err, b)
	}
	return mfs
}

// sample finds the metric of a family whose labels include want.
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return m
		}
	}
	return nil
}

func TestPrometheusScrape(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/prom", nil, nil)
	mustCall(t, s, 201, "PUT", "/prom/a", `{"v":1}`, nil)
	mustCall(t, s, 201, "PUT", "/prom/b", `{"v":1}`, nil)
	bulkDocs(t, s, "prom", nDocs(5, "bulk%d"))
	mustCall(t, s, 200, "GET", "/prom/a", nil, nil)
	mustCall(t, s, 404, "GET", "/prom/nope", nil, nil)

	mfs := scrape(t, s, "_local")
	for _, c := range []struct {
		route, method, code string
		wmin                float64
	}{
		{"doc", "PUT", "201", 2},
		{"_bulk_docs", "POST", "201", 1},
		{"doc", "GET", "200", 1},
		{"doc", "GET", "404", 1},
		{"db", "PUT", "201", 1},
	} {
		m := sample(mfs, "settee_http_requests_total", map[string]string{"route": c.route, "method": c.method, "code": c.code})
		if m == nil || m.GetCounter().GetValue() < c.wmin {
			t.Errorf("settee_http_requests_total{route=%q,method=%q,code=%q} = %v, want >= %v", c.route, c.method, c.code, m, c.wmin)
		}
	}
	if m := sample(mfs, "settee_http_request_duration_seconds", map[string]string{"route": "doc", "method": "PUT"}); m == nil || m.GetHistogram().GetSampleCount() < 2 {
		t.Errorf("request latency of doc PUTs: %v", m)
	}
	for name, wmin := range map[string]float64{"settee_docs_written_total": 7, "settee_docs_read_total": 1} {
		if m := sample(mfs, name, nil); m == nil || m.GetCounter().GetValue() < wmin {
			t.Errorf("%s = %v, want >= %v", name, m, wmin)
		}
	}
	for _, name := range []string{"settee_shard_commit_docs", "settee_shard_commit_duration_seconds"} {
		if m := sample(mfs, name, nil); m == nil || m.GetHistogram().GetSampleCount() == 0 {
			t.Errorf("%s: %v, want a histogram with samples", name, m)
		}
	}
	if m := sample(mfs, "go_goroutines", nil); m == nil || m.GetGauge().GetValue() < 1 {
		t.Errorf("go_goroutines: %v", m)
	}
	for _, name := range []string{"settee_badger_lsm_size_bytes", "settee_badger_vlog_size_bytes"} {
		if sample(mfs, name, nil) == nil {
			t.Errorf("%s missing", name)
		}
	}
	// no database or document name becomes a label value
	for _, m := range mfs["settee_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if v := l.GetValue(); v == "prom" || v == "a" || v == "nope" {
				t.Errorf("raw name as a label: %v", m)
			}
		}
	}

	// the node's own name is _local too; HEAD answers without a body
	scrape(t, s, "settee@127.0.0.1")
	resp := s.Do(t, "HEAD", "/_node/_local/_prometheus", nil)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD _prometheus: %d", resp.StatusCode)
	}
}

func TestPrometheusAdminOnly(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	resp, err := http.DefaultClient.Do(s.NewRequest(t, "GET", "/_node/_local/_prometheus", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("anonymous _prometheus: %d, want 401", resp.StatusCode)
	}
	mustCall(t, s, 201, "PUT", "/_users/org.couchdb.user:bob", `{"name":"bob","password":"pw","roles":[],"type":"user"}`, nil)
	req := s.NewRequest(t, "GET", "/_node/_local/_prometheus", nil)
	req.SetBasicAuth("bob", "pw")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("non-admin _prometheus: %d, want 401", resp.StatusCode)
	}
	var e struct{ Error, Reason string }
	mustCall(t, s, 404, "GET", "/_node/nobody@nowhere/_prometheus", nil, &e)
	if e.Error != "not_found" || e.Reason != "no such node: nobody@nowhere" {
		t.Errorf("unknown node: %+v", e)
	}
}
