package bench

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// TestRunCompaction runs the compaction workload against a real server,
// with the writer in the compacted database and in one of its own, and
// checks what it reports against what the server holds.
func TestRunCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and compacts a real database")
	}
	s := testserver.Start(t)
	u := adminURL(t, s.URL)
	for _, writer := range []string{WriterSame, WriterOther, WriterNone} {
		t.Run(writer, func(t *testing.T) {
			cfg := Config{URL: u.String(), Docs: 200, Edits: 10, DocSize: DocSmall, Workload: "compaction",
				DataDir: s.DataDir, WriterDB: writer}
			var out strings.Builder
			res, err := RunCompaction(context.Background(), cfg, &out, io.Discard)
			if err != nil {
				t.Fatalf("RunCompaction: %v\n%s", err, out.String())
			}
			t.Logf("\n%s", out.String())
			if res.WriterDB != writer || !strings.Contains(out.String(), "writer database:        "+writer) {
				t.Errorf("writer database reported as %q", res.WriterDB)
			}
			if (res.WritesBefore == 0) != (writer == WriterNone) || res.CompactSec <= 0 || res.ActiveAfter <= 0 || res.External <= 0 {
				t.Errorf("implausible result: %+v", res)
			}
			if writer == WriterNone && (res.WritesDuring != 0 || strings.Contains(out.String(), "writer before")) {
				t.Errorf("writer none still wrote: %d PUTs during\n%s", res.WritesDuring, out.String())
			}
			if res.FileAfter >= res.FileBefore {
				t.Errorf("sizes.file %d before, %d after compaction", res.FileBefore, res.FileAfter)
			}
			// the probes' docs went where they were meant to: each PUT
			// is a doc, and the compacted database held only its 200
			// docs before and, with the writer elsewhere, after
			probes := res.WritesBefore + res.WritesDuring
			wantAfter := 200
			if writer == WriterSame {
				wantAfter += probes
			}
			if res.DocsAfter != int64(wantAfter) {
				t.Errorf("compacted database holds %d docs after, want %d (%d probe PUTs, writer %s)", res.DocsAfter, wantAfter, probes, writer)
			}
			// both databases are gone
			resp := s.Do(t, "GET", "/_all_dbs", nil)
			defer resp.Body.Close()
			var dbs []string
			if err := json.NewDecoder(resp.Body).Decode(&dbs); err != nil {
				t.Fatal(err)
			}
			for _, db := range dbs {
				if strings.HasPrefix(db, DBPrefix) {
					t.Errorf("database %s left behind", db)
				}
			}
			// auto-compaction, off while the workload ran, is on again
			cresp := s.Do(t, "GET", "/_node/_local/_config/smoosh/enabled", nil)
			defer cresp.Body.Close()
			var enabled string
			if err := json.NewDecoder(cresp.Body).Decode(&enabled); err != nil || enabled != "true" {
				t.Errorf("smoosh enabled after the workload: %q (%v), want \"true\"", enabled, err)
			}
		})
	}
}
