package httpgw_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// historyPage is GET /_node/<node>/_history.
type historyPage struct {
	Node            string  `json:"node"`
	IntervalSeconds float64 `json:"interval_seconds"`
	WindowSeconds   float64 `json:"window_seconds"`
	Samples         []struct {
		T                     int64              `json:"t"`
		RequestsPerSec        map[string]float64 `json:"requests_per_sec"`
		LatencyP50Ms          float64            `json:"latency_p50_ms"`
		LatencyP99Ms          float64            `json:"latency_p99_ms"`
		DocsWrittenPerSec     float64            `json:"docs_written_per_sec"`
		DocsReadPerSec        float64            `json:"docs_read_per_sec"`
		ReplicationDocsPerSec float64            `json:"replication_docs_per_sec"`
		CompactionMBPerSec    float64            `json:"compaction_mb_per_sec"`
		DiskBytes             *int64             `json:"disk_bytes"`
		RSSBytes              *int64             `json:"rss_bytes"`
	} `json:"samples"`
}

// fastHistory samples every 200 ms, so a test sees its writes soon.
func fastHistory(c *node.Config) { c.HistoryInterval = 200 * time.Millisecond }

func TestHistory(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t, fastHistory)
	mustCall(t, s, 201, "PUT", "/hist", nil, nil)
	start := time.Now().UnixMilli()
	for i := range 30 {
		mustCall(t, s, 201, "PUT", fmt.Sprintf("/hist/d%d", i), `{"v":1}`, nil)
	}

	// a later sample has the burst; one after it only the polling, which
	// the history leaves out
	var page historyPage
	burst, quiet := false, false
	for deadline := time.Now().Add(10 * time.Second); !(burst && quiet); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no sample with the burst and a quiet one after it (burst %v, quiet %v): %+v", burst, quiet, page)
		}
		page = historyPage{}
		mustCall(t, s, 200, "GET", "/_node/_local/_history", nil, &page)
		burst, quiet = false, false
		for _, sm := range page.Samples {
			switch {
			case sm.T > start && sm.RequestsPerSec["PUT 2xx"] > 0 && sm.DocsWrittenPerSec > 0:
				if sm.LatencyP50Ms <= 0 || sm.LatencyP99Ms < sm.LatencyP50Ms {
					t.Errorf("latency of the burst: p50 %v p99 %v", sm.LatencyP50Ms, sm.LatencyP99Ms)
				}
				burst = true
			case burst && len(sm.RequestsPerSec) == 0 && sm.RequestsPerSec != nil:
				if sm.LatencyP50Ms != 0 || sm.DocsWrittenPerSec != 0 {
					t.Errorf("a quiet sample: %+v", sm)
				}
				quiet = true
			}
		}
	}
	if page.Node != "settee@127.0.0.1" || page.IntervalSeconds != 0.2 || page.WindowSeconds != 900 {
		t.Errorf("page: node %q interval %v window %v", page.Node, page.IntervalSeconds, page.WindowSeconds)
	}
	for i, sm := range page.Samples {
		if i > 0 && sm.T <= page.Samples[i-1].T {
			t.Errorf("samples out of order: %d then %d", page.Samples[i-1].T, sm.T)
		}
		if sm.DiskBytes == nil || sm.RSSBytes == nil || *sm.RSSBytes <= 0 {
			t.Errorf("sample %d: disk %v rss %v", i, sm.DiskBytes, sm.RSSBytes)
		}
	}

	// since: only what came after
	last := page.Samples[len(page.Samples)-1].T
	var later historyPage
	mustCall(t, s, 200, "GET", fmt.Sprintf("/_node/_local/_history?since=%d", last), nil, &later)
	for _, sm := range later.Samples {
		if sm.T <= last {
			t.Errorf("since=%d answered a sample at %d", last, sm.T)
		}
	}
	var mid historyPage
	mustCall(t, s, 200, "GET", fmt.Sprintf("/_node/_local/_history?since=%d", page.Samples[0].T), nil, &mid)
	if len(mid.Samples) < len(page.Samples)-1 || mid.Samples[0].T != page.Samples[1].T {
		t.Errorf("since the first sample: %d samples from %v, want from %d", len(mid.Samples), mid.Samples, page.Samples[1].T)
	}

	// the node's own name is _local too; the polling stays in _prometheus
	mustCall(t, s, 200, "GET", "/_node/settee@127.0.0.1/_history?since=0", nil, nil)
	m := sample(scrape(t, s, "_local"), "settee_http_requests_total", map[string]string{"route": "_history", "method": "GET", "code": "200"})
	if m == nil || m.GetCounter().GetValue() < 2 {
		t.Errorf(`settee_http_requests_total{route="_history"}: %v`, m)
	}

	mustCall(t, s, 201, "PUT", "/_users/org.couchdb.user:joe", `{"name":"joe","password":"pw","roles":[],"type":"user"}`, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "", []wireStep{
		{method: "HEAD", path: "/_node/_local/_history", status: 200},
		{method: "GET", path: "/_node/_local/_history?since=-1", status: 200, inBody: `"interval_seconds":0.2,"window_seconds":900,"samples":[{"t":`},
		{method: "POST", path: "/_node/_local/_history", body: `{}`, status: 405, err: "method_not_allowed", reason: "Only GET,HEAD allowed"},
		{method: "DELETE", path: "/_node/_local/_history", status: 405, err: "method_not_allowed", reason: "Only GET,HEAD allowed"},
		{method: "PUT", path: "/_node/settee@127.0.0.1/_history", body: `{}`, status: 405, err: "method_not_allowed", reason: "Only GET,HEAD allowed"},
		{method: "GET", path: "/_node/_local/_history?since=yesterday", status: 400, err: "bad_request", reason: `since must be a time in unix milliseconds, got "yesterday"`},
		{method: "GET", path: "/_node/_local/_history?since=", status: 400, err: "bad_request", reason: `since must be a time in unix milliseconds, got ""`},
		{method: "GET", path: "/_node/_local/_history?since=1.5", status: 400, err: "bad_request", reason: `since must be a time in unix milliseconds, got "1.5"`},
		{method: "GET", path: "/_node/_local/_history/x", status: 404, err: "not_found", reason: "missing"},
		{method: "GET", path: "/_node/_local/_history", as: "-", status: 401, err: "unauthorized", reason: "You are not a server admin."},
		{method: "GET", path: "/_node/_local/_history", as: "joe:pw", status: 401, err: "unauthorized", reason: "You are not a server admin."},
		{method: "GET", path: "/_node/nosuch@127.0.0.1/_history", status: 404, err: "not_found", reason: "no such node: nosuch@127.0.0.1"},
	})
}
