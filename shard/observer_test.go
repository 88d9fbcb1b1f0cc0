package shard

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// recorder is an Observer that remembers what it heard.
type recorder struct {
	mu      sync.Mutex
	commits [][2]int // docs, written
	took    time.Duration
	read    int
}

func (r *recorder) Committed(docs, written int, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commits = append(r.commits, [2]int{docs, written})
	r.took += took
}

func (r *recorder) DocsRead(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read += n
}

func (r *recorder) snapshot() ([][2]int, time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]int(nil), r.commits...), r.took, r.read
}

func TestObserverHearsCommitsAndReads(t *testing.T) {
	rec := &recorder{}
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	cfg := Config{DB: openTestDB(t), Handle: 9, Name: "obs", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Observer: rec}
	f := &fixture{t: t, sys: sys, pid: sys.Root.Spawn(Props(cfg)), cfg: cfg}

	f.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"v":1}`)}, &pb.DocUpdate{Id: "b", Body: []byte(`{"v":1}`)},
		&pb.DocUpdate{Id: "c", Body: []byte(`{"v":1}`)})
	if r := f.update(true, &pb.DocUpdate{Id: "a", Body: []byte(`{"v":2}`)}); code(r[0]) != "conflict" {
		t.Fatalf("update without rev: %v", r[0])
	}
	// the observer is told before the writer is answered
	commits, took, _ := rec.snapshot()
	if len(commits) != 2 || commits[0] != [2]int{3, 3} || commits[1] != [2]int{1, 0} || took <= 0 {
		t.Fatalf("commits heard: %v (took %v), want [[3 3] [1 0]]", commits, took)
	}

	f.get("a")
	f.get("missing")
	if _, _, read := rec.snapshot(); read != 1 {
		t.Fatalf("docs read after a hit and a miss: %d, want 1", read)
	}
	r, err := actors.Ask[*pb.RangeReply](context.Background(), sys.Root, f.pid, &pb.ReadRange{IncludeDocs: true, Limit: 10})
	if err != nil || len(r.Rows) != 3 {
		t.Fatalf("all docs: %v %v", r, err)
	}
	if _, _, read := rec.snapshot(); read != 4 {
		t.Fatalf("docs read after include_docs of 3: %d, want 4", read)
	}
}
