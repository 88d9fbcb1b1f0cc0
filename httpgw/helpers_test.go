package httpgw_test

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// call sends a request as admin and decodes a JSON answer into out (if not nil).
func call(t *testing.T, s *testserver.Server, method, path string, body any, out any) int {
	t.Helper()
	resp := s.Do(t, method, path, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

func mustCall(t *testing.T, s *testserver.Server, want int, method, path string, body any, out any) {
	t.Helper()
	var raw json.RawMessage
	got := call(t, s, method, path, body, &raw)
	if got != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, got, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
}

type bulkResult struct {
	OK     bool   `json:"ok"`
	ID     string `json:"id"`
	Rev    string `json:"rev"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

func bulkDocs(t *testing.T, s *testserver.Server, db string, docs []map[string]any) []bulkResult {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"docs": docs})
	var out []bulkResult
	mustCall(t, s, 201, "POST", "/"+db+"/_bulk_docs", b, &out)
	return out
}

func nDocs(n int, idf string) []map[string]any {
	docs := make([]map[string]any, n)
	for i := range docs {
		docs[i] = map[string]any{"_id": fmt.Sprintf(idf, i), "n": i}
	}
	return docs
}

type allDocs struct {
	TotalRows *int `json:"total_rows"`
	Offset    *int `json:"offset"`
	Rows      []struct {
		ID    string          `json:"id"`
		Key   string          `json:"key"`
		Value map[string]any  `json:"value"`
		Doc   json.RawMessage `json:"doc"`
		Error string          `json:"error"`
	} `json:"rows"`
}

type changes struct {
	Results []struct {
		Seq     string              `json:"seq"`
		ID      string              `json:"id"`
		Changes []map[string]string `json:"changes"`
		Deleted bool                `json:"deleted"`
		Doc     json.RawMessage     `json:"doc"`
	} `json:"results"`
	LastSeq string `json:"last_seq"`
	Pending int    `json:"pending"`
}
