package bench

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

func TestCountRowsScanner(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		key     string
		want    int64
		wantErr bool
	}{
		{"all_docs", `{"total_rows":2,"offset":0,"rows":[{"id":"a","key":"a","value":{"rev":"1-x"}},{"id":"b","key":"b","value":{"rev":"1-y"}}]}`, "rows", 2, false},
		{"changes", "{\"results\":[\n{\"seq\":\"1\",\"id\":\"a\",\"changes\":[{\"rev\":\"1-x\"}]}\n],\n\"last_seq\":\"1\",\"pending\":0}", "results", 1, false},
		{"tricky strings", `{"rows":[{"id":"a\"]}","doc":{"_id":"a","s":"{\"rows\":[1,2]}","id":"x"}}],"x":"]"}`, "rows", 1, false},
		{"key after", `{"a":[1,2],"rows":[{"id":"z"}]}`, "rows", 1, false},
		{"empty", `{"rows":[]}`, "rows", 0, false},
		{"row without id", `{"rows":[{"key":"a"}]}`, "rows", 0, true},
		{"id only nested", `{"rows":[{"doc":{"id":"a"}}]}`, "rows", 0, true},
		{"missing array", `{"other":[]}`, "rows", 0, true},
		{"truncated", `{"rows":[{"id":"a"}`, "rows", 1, true},
		{"not an object", `[1]`, "rows", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var done atomic.Int64
			// one byte per read: every state must survive a chunk boundary
			n, _, err := countRows(iotest.OneByteReader(strings.NewReader(tc.body)), tc.key, time.Now(), &done)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (n != tc.want || done.Load() != tc.want) {
				t.Fatalf("rows = %d (done %d), want %d", n, done.Load(), tc.want)
			}
		})
	}
}
