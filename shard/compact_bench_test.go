package shard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/storage"
)

// openNodeDB opens badger in dir with the node's options (node/storage.go
// at --memory-mb 256): 64 MB value-log files, 32 MB memtables.
func openNodeDB(tb testing.TB, dir string) *badger.DB {
	tb.Helper()
	opts := badger.DefaultOptions(dir).WithSyncWrites(true).WithDetectConflicts(false).
		WithValueThreshold(1024).WithMemTableSize(32 << 20).WithNumMemtables(3).
		WithBlockCacheSize(64 << 20).WithIndexCacheSize(32 << 20).WithNumCompactors(2).
		WithValueLogFileSize(64 << 20).WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// compactBench is one shard on its own badger, loaded with docs edited
// many times (seed 002's workload), as the node runs it.
type compactBench struct {
	tb   testing.TB
	dir  string
	db   *badger.DB
	disk *storage.Disk
	sys  *actor.ActorSystem
	pid  *actor.PID
}

func newCompactBench(tb testing.TB) *compactBench {
	dir := tb.TempDir()
	db := openNodeDB(tb, dir)
	disk := storage.NewDisk(db, dir, nil)
	sys := quietSystem()
	cfg := Config{DB: db, Handle: 3, Name: "bench", Disk: disk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cb := &compactBench{tb: tb, dir: dir, db: db, disk: disk, sys: sys, pid: sys.Root.Spawn(Props(cfg))}
	tb.Cleanup(func() {
		sys.Shutdown()
		disk.Close()
		db.Close()
	})
	return cb
}

// load writes docs docs of bodySize bytes and updates each edits times,
// 1000 docs per batch.
func (cb *compactBench) load(docs, edits, bodySize int) {
	ctx := context.Background()
	revs := make([]string, docs)
	pad := strings.Repeat("x", max(bodySize-40, 1))
	for round := 0; round <= edits; round++ {
		for lo := 0; lo < docs; lo += 1000 {
			m := &pb.UpdateDocs{NewEdits: true, Reply: true}
			for i := lo; i < min(lo+1000, docs); i++ {
				body := fmt.Sprintf(`{"round":%d,"i":%d,"pad":%q}`, round, i, pad)
				m.Docs = append(m.Docs, &pb.DocUpdate{Tag: uint32(i - lo), Id: fmt.Sprintf("doc%08d", i), Rev: revs[i], Body: []byte(body)})
			}
			res, err := actors.Ask[*pb.UpdateResult](ctx, cb.sys.Root, cb.pid, m)
			if err != nil {
				cb.tb.Fatal(err)
			}
			for _, r := range res.Results {
				if r.Error != nil {
					cb.tb.Fatalf("load: %s: %v", r.Id, r.Error)
				}
				revs[lo+int(r.Tag)] = r.Rev
			}
		}
	}
}

func (cb *compactBench) info() *pb.DiskInfo {
	r, err := actors.Ask[*pb.DiskInfo](context.Background(), cb.sys.Root, cb.pid, &pb.GetDiskInfo{})
	if err != nil {
		cb.tb.Fatal(err)
	}
	return r
}

// write creates single docs one at a time while more says so and returns
// their latencies.
func (cb *compactBench) write(prefix string, more func(n int) bool) []time.Duration {
	ctx := context.Background()
	var lat []time.Duration
	for n := 0; more(n); n++ {
		t0 := time.Now()
		m := &pb.UpdateDocs{NewEdits: true, Reply: true, Docs: []*pb.DocUpdate{{Id: fmt.Sprintf("%s%08d", prefix, n), Body: []byte(`{"probe":true}`)}}}
		if _, err := actors.Ask[*pb.UpdateResult](ctx, cb.sys.Root, cb.pid, m); err != nil {
			cb.tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// compact runs one compaction to its end (reclaim included), with a
// writer doing single-doc creates one at a time meanwhile; it returns the
// wall time and the writer's latencies.
func (cb *compactBench) compact() (time.Duration, []time.Duration) {
	start := time.Now()
	if _, err := actors.Ask[*pb.CompactStarted](context.Background(), cb.sys.Root, cb.pid, &pb.CompactShard{}); err != nil {
		cb.tb.Fatal(err)
	}
	lat := cb.write("during", func(n int) bool { return n%8 != 0 || cb.info().CompactRunning })
	return time.Since(start), lat
}

func p99ms(lat []time.Duration) float64 {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return float64(lat[len(lat)*99/100].Microseconds()) / 1000
}

// BenchmarkCompact loads a shard with docs edited many times, then times
// one compaction (the by-seq walk, its commits and badger's reclamation)
// with a concurrent single-doc writer. It reports the live data compacted
// per second (sizes.active after / wall time), the data directory before
// and after, and the writer's p99. Each run loads its own data; run it
// with -benchtime=1x.
func BenchmarkCompact(b *testing.B) {
	for _, c := range []struct {
		name                  string
		docs, edits, bodySize int
	}{
		{"small/docs=1000/edits=50", 1000, 50, 320},
		{"small/docs=1000/edits=100", 1000, 100, 320},
		{"medium/docs=500/edits=20", 500, 20, 14500},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				cb := newCompactBench(b)
				cb.load(c.docs, c.edits, c.bodySize)
				before := storage.AllocatedBytes(cb.dir)
				t0 := time.Now()
				alone := cb.write("before", func(int) bool { return time.Since(t0) < 2*time.Second })
				b.StartTimer()
				took, lat := cb.compact()
				b.StopTimer()
				info := cb.info()
				after := storage.AllocatedBytes(cb.dir)
				b.ReportMetric(float64(info.ActiveSize)/(1<<20)/took.Seconds(), "live-MB/s")
				b.ReportMetric(float64(before)/(1<<20), "dir-MB-before")
				b.ReportMetric(float64(after)/(1<<20), "dir-MB-after")
				b.ReportMetric(float64(info.ExternalSize)/(1<<20), "external-MB")
				b.ReportMetric(p99ms(alone), "writer-p99-ms-before")
				b.ReportMetric(p99ms(lat), "writer-p99-ms-during")
				b.StartTimer()
			}
		})
	}
}

// BenchmarkValueLogGC measures badger's value-log GC alone, the floor of
// a compaction's reclaim phase: 256 MB of values in 64 MB files, every key
// then overwritten (so the first files are garbage), memtables flushed and
// the tree flattened untimed; timed is RunValueLogGC until nothing is left
// to rewrite, without the pauses Reclaim leaves for writers. It reports the
// MB of value-log files processed per second: reclaiming G MB of garbage
// takes at least G divided by this.
func BenchmarkValueLogGC(b *testing.B) {
	for _, size := range []int{2400, 14500} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				db := openNodeDB(b, dir)
				disk := storage.NewDisk(db, dir, nil)
				val := make([]byte, size)
				keys := (256 << 20) / size
				for round := range 2 {
					for lo := 0; lo < keys; lo += 200 {
						err := db.Update(func(txn *badger.Txn) error {
							for i := lo; i < min(lo+200, keys); i++ {
								val[0] = byte(round)
								if err := txn.Set(fmt.Appendf(nil, "k%08d", i), val); err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := db.FlushMemtable(); err != nil {
					b.Fatal(err)
				}
				if err := db.FlattenAll(2); err != nil {
					b.Fatal(err)
				}
				before := storage.AllocatedBytes(dir)
				b.StartTimer()
				t0 := time.Now()
				files := 0
				for {
					err := db.RunValueLogGC(disk.DiscardRatio)
					if err != nil {
						break
					}
					files++
				}
				took := time.Since(t0)
				b.StopTimer()
				b.ReportMetric(float64(files*64)/took.Seconds(), "vlog-MB/s")
				b.ReportMetric(float64(files), "files")
				b.ReportMetric(float64(before-storage.AllocatedBytes(dir))/(1<<20), "MB-freed")
				disk.Close()
				db.Close()
				b.StartTimer()
			}
		})
	}
}
