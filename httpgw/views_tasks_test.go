package httpgw_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// A build of more than a batch shows in _active_tasks as CouchDB's
// indexer tasks do, with its progress, and is gone when it ends.
func TestViewIndexerTask(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/tk?q=1", "", nil)
	var docs []string
	for i := range 1500 {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%04d","v":%d}`, i, i))
	}
	if resp, b := c.do("POST", "/tk/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("bulk: %d %s", resp.StatusCode, b)
	}
	// about a millisecond a doc: the build takes over a second
	c.do("PUT", "/tk/_design/slow", `{"views":{"v":{"map":"function (doc) { var t = Date.now(); while (Date.now() - t < 1) {} emit(doc.v, null); }"}}}`, nil)
	done := make(chan string, 1)
	go func() {
		_, b := c.do("GET", "/tk/_design/slow/_view/v?limit=1", "", nil)
		done <- b
	}()
	var seen map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for seen == nil && time.Now().Before(deadline) {
		_, b := c.do("GET", "/_active_tasks", "", nil)
		var ts []map[string]any
		_ = json.Unmarshal([]byte(b), &ts)
		for _, tk := range ts {
			if tk["type"] == "indexer" && tk["design_document"] == "_design/slow" {
				seen = tk
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := <-done
	if !strings.Contains(b, `"total_rows":1500`) {
		t.Fatalf("view: %s", b)
	}
	if seen == nil {
		t.Fatal("no indexer task in _active_tasks during a build of 1500 slow docs")
	}
	for _, k := range []string{"database", "changes_done", "total_changes", "progress", "node", "pid", "started_on", "updated_on"} {
		if _, ok := seen[k]; !ok {
			t.Errorf("indexer task %v: no %s", seen, k)
		}
	}
	if db, _ := seen["database"].(string); !strings.HasPrefix(db, "shards/") || !strings.HasSuffix(db, "/tk") {
		t.Errorf("indexer task database %q", db)
	}
	var info struct {
		ViewIndex struct {
			Sizes     struct{ Active, External, File int }
			UpdateSeq int `json:"update_seq"`
		} `json:"view_index"`
	}
	_, ib := c.do("GET", "/tk/_design/slow/_info", "", nil)
	_ = json.Unmarshal([]byte(ib), &info)
	// 1500 rows of some 30 bytes each, at least
	if info.ViewIndex.Sizes.Active < 1500*20 || info.ViewIndex.UpdateSeq < 1500 {
		t.Errorf("_info after the build: %s", ib)
	}
	_, after := c.do("GET", "/_active_tasks", "", nil)
	if strings.Contains(after, `"indexer"`) {
		t.Errorf("an indexer task after the build: %s", after)
	}
}

// A query waits for its index's build however long it takes: the node's
// request timeout does not end it (CouchDB 3.5.2 answers 500 timeout
// after 60 s and goes on building).
func TestViewBuildOutlastsRequestTimeout(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/lt?q=1", "", nil)
	var docs []string
	for i := range 600 {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%04d","v":%d}`, i, i))
	}
	c.do("POST", "/lt/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
	c.do("PUT", "/lt/_design/slow", `{"views":{"v":{"map":"function (doc) { var t = Date.now(); while (Date.now() - t < 1) {} emit(doc.v, null); }"}}}`, nil)
	c.setConfig("settee", "request_timeout", "100ms")
	start := time.Now()
	resp, b := c.do("GET", "/lt/_design/slow/_view/v?limit=1", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(b, `"total_rows":600`) {
		t.Fatalf("a build of %v under a 100 ms request timeout: %d %s", time.Since(start), resp.StatusCode, b)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatalf("the build took %v: too short to outlast the timeout, the test proves nothing", time.Since(start))
	}
}
