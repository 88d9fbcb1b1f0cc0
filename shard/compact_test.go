package shard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/storage"
)

// compact runs one compaction of the fixture's shard to its end.
func (f *fixture) compact() {
	f.t.Helper()
	ctx := context.Background()
	r, err := actors.Ask[*pb.CompactStarted](ctx, f.sys.Root, f.pid, &pb.CompactShard{})
	if err != nil || r.Error != nil || r.AlreadyRunning {
		f.t.Fatalf("compact: %v %v", r, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		di, err := actors.Ask[*pb.DiskInfo](ctx, f.sys.Root, f.pid, &pb.GetDiskInfo{})
		if err != nil {
			f.t.Fatal(err)
		}
		if !di.CompactRunning {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatal("compaction still running after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) changes(since uint64) []*pb.Row {
	f.t.Helper()
	r, err := actors.Ask[*pb.ChangesReply](context.Background(), f.sys.Root, f.pid, &pb.ReadChanges{Since: since})
	if err != nil || r.Error != nil {
		f.t.Fatalf("changes: %v %v", r, err)
	}
	return r.Rows
}

// measuredActive is sizes.active counted from the records: every doc's
// leaf bodies, its by-id record and its by-seq record.
func measuredActive(t *testing.T, db *badger.DB, k keys) int64 {
	t.Helper()
	var n int64
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = k.idPrefix()
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			info := &pb.FullDocInfo{}
			if err := it.Item().Value(func(v []byte) error {
				n += int64(len(v))
				return decodeInfo(v, info)
			}); err != nil {
				return err
			}
			n += leafBytes(info)
			item, err := txn.Get(k.seq(info.Seq))
			if err != nil {
				return fmt.Errorf("%s: by-seq record %d: %w", info.Id, info.Seq, err)
			}
			n += int64(item.ValueSize())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBySeqRecordHoldsLeaves checks that the by-seq index keeps a doc's
// leaves only, that _changes reads winner, deletion and conflicts from it,
// and that sizes.active counts what is stored, through edits, conflicts,
// a purge and a compaction.
func TestBySeqRecordHoldsLeaves(t *testing.T) {
	f := newFixture(t)
	var rev string
	for i := range 10 {
		r := f.update(true, &pb.DocUpdate{Id: "a", Rev: rev, Body: fmt.Appendf(nil, `{"i":%d}`, i)})
		rev = r[0].Rev
	}
	// a conflict branch and a deleted branch on b
	f.update(false,
		&pb.DocUpdate{Id: "b", Body: []byte(`{"v":1}`), Revisions: &pb.Revisions{Start: 2, Ids: []string{"bbbb", "aaaa"}}},
		&pb.DocUpdate{Id: "b", Body: []byte(`{"v":2}`), Revisions: &pb.Revisions{Start: 3, Ids: []string{"cccc", "dddd", "aaaa"}}},
		&pb.DocUpdate{Id: "b", Deleted: true, Revisions: &pb.Revisions{Start: 4, Ids: []string{"eeee", "ffff", "gggg", "aaaa"}}},
	)
	f.update(true, &pb.DocUpdate{Id: "c", Body: []byte(`{}`)}, &pb.DocUpdate{Id: "p", Body: []byte(`{}`)})
	if _, err := actors.Ask[*pb.PurgeReply](context.Background(), f.sys.Root, f.pid,
		&pb.PurgeDocs{Docs: []*pb.PurgeRequest{{Id: "p", Revs: []string{f.get("p").Info.Winner}}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.meta().ActiveSize, measuredActive(t, f.cfg.DB, newKeys(f.cfg.Handle)); got != want {
		t.Errorf("sizes.active %d, records hold %d", got, want)
	}

	check := func(label string) {
		t.Helper()
		rows := f.changes(0)
		if len(rows) != 3 {
			t.Fatalf("%s: %d changes, want 3", label, len(rows))
		}
		byID := map[string]*pb.FullDocInfo{}
		for _, r := range rows {
			byID[r.Info.Id] = r.Info
			if !shortRecord(r.Info) {
				t.Errorf("%s: by-seq record of %s holds inner nodes: %v", label, r.Info.Id, r.Info.Nodes)
			}
			full := f.get(r.Info.Id).Info
			if r.Info.Winner != full.Winner || r.Info.Deleted != full.Deleted || r.Info.Seq != full.Seq {
				t.Errorf("%s: %s by-seq winner %s deleted %v seq %d, doc %s %v %d", label, r.Info.Id,
					r.Info.Winner, r.Info.Deleted, r.Info.Seq, full.Winner, full.Deleted, full.Seq)
			}
			if got, want := revtree.Leaves(r.Info), revtree.Leaves(full); len(got) != len(want) {
				t.Errorf("%s: %s leaves %v, want %v", label, r.Info.Id, got, want)
			} else {
				for i := range got {
					if got[i].Rev != want[i].Rev || got[i].Deleted != want[i].Deleted {
						t.Errorf("%s: %s leaf %d %v, want %v", label, r.Info.Id, i, got[i], want[i])
					}
				}
			}
		}
		if a := byID["a"]; a == nil || len(a.Nodes) != 1 || a.Winner != rev {
			t.Errorf("%s: a's by-seq record %v, want the leaf %s", label, a, rev)
		}
		if b := byID["b"]; b == nil || b.Winner != "3-cccc" || len(revtree.Conflicts(b)) != 1 || len(revtree.DeletedConflicts(b)) != 1 {
			t.Errorf("%s: b's by-seq record %v", label, b)
		}
	}
	check("after writes")
	f.compact()
	check("after compaction")
	if got, want := f.meta().ActiveSize, measuredActive(t, f.cfg.DB, newKeys(f.cfg.Handle)); got != want {
		t.Errorf("after compaction: sizes.active %d, records hold %d", got, want)
	}
	if g := f.get("a"); len(g.Info.Nodes) != 10 || !g.Info.Nodes[9].HasBody || g.Info.Nodes[8].HasBody {
		t.Errorf("a after compaction: %v", g.Info.Nodes)
	}
}

// TestCompactionRewritesOldRecords: records as stored before the compact
// form (a protobuf doc info under by-id, a protobuf copy of it under
// by-seq) are read, and compaction rewrites them in the compact form, the
// by-seq one short, with sizes.active following.
func TestCompactionRewritesOldRecords(t *testing.T) {
	f := newFixture(t)
	var rev string
	for i := range 5 {
		r := f.update(true, &pb.DocUpdate{Id: "old", Rev: rev, Body: fmt.Appendf(nil, `{"i":%d}`, i)})
		rev = r[0].Rev
	}
	k := newKeys(f.cfg.Handle)
	info := f.get("old").Info
	full, err := proto.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	long := encodeInfo(nil, info)
	short := encodeInfo(nil, seqRecord(info))
	// the shard stopped while the old layout's records are put in place,
	// its meta counting them
	if err := f.sys.Root.PoisonFuture(f.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	meta, err := loadMeta(f.cfg.DB, k)
	if err != nil {
		t.Fatal(err)
	}
	meta.ActiveSize += int64(2*len(full) - len(long) - len(short))
	mb, _ := proto.Marshal(meta)
	if err := f.cfg.DB.Update(func(txn *badger.Txn) error {
		if err := txn.Set(k.seq(info.Seq), full); err != nil {
			return err
		}
		if err := txn.Set(k.id(info.Id), full); err != nil {
			return err
		}
		return txn.Set(k.meta(), mb)
	}); err != nil {
		t.Fatal(err)
	}
	f.pid = f.sys.Root.Spawn(Props(f.cfg))
	if rows := f.changes(0); len(rows) != 1 || shortRecord(rows[0].Info) || rows[0].Info.Winner != rev {
		t.Fatalf("old layout's by-seq record not read back: %v", rows)
	}
	if g := f.get("old"); !proto.Equal(g.Info, info) {
		t.Fatalf("old layout's doc info read back as %v, want %v", g.Info, info)
	}
	f.compact()
	rows := f.changes(0)
	if len(rows) != 1 || !shortRecord(rows[0].Info) || rows[0].Info.Winner != rev {
		t.Fatalf("after compaction: %v", rows)
	}
	if got, want := f.meta().ActiveSize, measuredActive(t, f.cfg.DB, k); got != want {
		t.Errorf("sizes.active %d, records hold %d", got, want)
	}
	if err := f.cfg.DB.View(func(txn *badger.Txn) error {
		for _, key := range [][]byte{k.id("old"), k.seq(info.Seq)} {
			item, err := txn.Get(key)
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				if v[0] != infoCodecV1 {
					return fmt.Errorf("record %q not rewritten: starts with %#x", key, v[0])
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if g := f.get("old"); g.Info.Winner != rev || len(g.Info.Nodes) != 5 || !g.Info.Nodes[4].HasBody || g.Info.Nodes[3].HasBody {
		t.Errorf("after compaction: %v", g.Info)
	}
	// compacting again changes nothing
	before := f.meta()
	f.compact()
	if after := f.meta(); after.ActiveSize != before.ActiveSize || after.UpdateSeq != before.UpdateSeq {
		t.Errorf("second compaction: %+v -> %+v", before, after)
	}
}

// aloneCommits records when the shard's group commits that carried no doc
// update finished: with no purge or meta change about, a compaction
// batch's own.
type aloneCommits struct {
	mu sync.Mutex
	at []time.Time
}

func (c *aloneCommits) Committed(docs, _ int, _ time.Duration) {
	if docs == 0 {
		c.mu.Lock()
		c.at = append(c.at, time.Now())
		c.mu.Unlock()
	}
}
func (c *aloneCommits) DocsRead(int) {}

func (c *aloneCommits) since(i int) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at[i:])
}

func (c *aloneCommits) count() int { return len(c.since(0)) }

// spawnShard starts a shard copy of cfg, quiet, in a system of its own.
func spawnShard(t *testing.T, cfg Config) *fixture {
	t.Helper()
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return &fixture{t: t, sys: sys, pid: sys.Root.Spawn(Props(cfg)), cfg: cfg}
}

// editAll writes docs d0000… rounds times over and returns their revs.
func (f *fixture) editAll(docs, rounds int) map[string]string {
	f.t.Helper()
	revs := map[string]string{}
	for range rounds {
		for b := 0; b < docs; b += 250 {
			var batch []*pb.DocUpdate
			for i := b; i < min(b+250, docs); i++ {
				id := fmt.Sprintf("d%04d", i)
				batch = append(batch, &pb.DocUpdate{Id: id, Rev: revs[id], Body: []byte(`{"v":"some body to drop"}`)})
			}
			for i, r := range f.update(true, batch...) {
				revs[batch[i].Id] = r.Rev
			}
		}
	}
	return revs
}

// writeOneAtATime PUTs new docs into f one at a time until stop is called,
// which returns how many it PUT.
func (f *fixture) writeOneAtATime() (stop func() int) {
	quit, done := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-quit:
				done <- n
				return
			default:
			}
			_, err := actors.Ask[*pb.UpdateResult](context.Background(), f.sys.Root, f.pid, &pb.UpdateDocs{
				Docs: []*pb.DocUpdate{{Id: fmt.Sprintf("w%06d", n), Body: []byte(`{}`)}}, NewEdits: true, Reply: true})
			if err != nil {
				f.t.Error(err)
			}
			n++
		}
	}()
	return func() int {
		close(quit)
		return <-done
	}
}

// compacted fails the test unless doc id is at rev with its parent's
// body gone.
func (f *fixture) compacted(id, rev string) {
	f.t.Helper()
	if g := f.get(id); g.Info.Winner != rev || g.Info.Nodes[len(g.Info.Nodes)-2].HasBody {
		f.t.Fatalf("not compacted: %v", g.Info)
	}
}

// TestCompactionRidesUserWrites compacts two identical shards, one idle and
// one under a writer that PUTs one doc at a time. Idle, each compaction
// batch commits on its own; under the writer, batches join the writer's
// group commits, so that its writes do not wait behind compaction's own
// synced commits.
func TestCompactionRidesUserWrites(t *testing.T) {
	alone := func(writer bool) int {
		obs := &aloneCommits{}
		f := spawnShard(t, Config{DB: openTestDB(t), Handle: 7, Name: "test", Observer: obs})
		revs := f.editAll(2000, 3)
		var stop func() int
		if writer {
			stop = f.writeOneAtATime()
		}
		before := obs.count()
		f.compact()
		n := obs.count() - before
		if writer {
			t.Logf("writer PUT %d docs during compaction", stop())
		}
		f.compacted("d0000", revs["d0000"])
		return n
	}
	idle := alone(false)
	busy := alone(true)
	t.Logf("compaction commits of their own: %d idle, %d under a writer", idle, busy)
	if idle < 20 {
		t.Fatalf("only %d compaction commits: too few to tell", idle)
	}
	if busy*3 > idle {
		t.Errorf("under a steady writer %d of ~%d compaction batches committed on their own", busy, idle)
	}
}

// TestCompactionYieldsToOtherShardsWrites compacts a shard that gets no
// writes while another shard of the same node (same badger, whose commits
// all shards share) is written one doc at a time. The compacting shard has
// no user writes to join, so its batches commit alone, but only once per
// compactMaxWait, not back to back in front of the other shard's writes.
func TestCompactionYieldsToOtherShardsWrites(t *testing.T) {
	db := openTestDB(t)
	disk := storage.NewDisk(db, db.Opts().Dir, nil)
	times := &aloneCommits{}
	a := spawnShard(t, Config{DB: db, Disk: disk, Handle: 7, Name: "a", Observer: times})
	b := spawnShard(t, Config{DB: db, Disk: disk, Handle: 8, Name: "b"})
	revs := a.editAll(400, 3)
	stop := b.writeOneAtATime()
	time.Sleep(50 * time.Millisecond)
	before := times.count()
	start := time.Now()
	a.compact()
	took := time.Since(start)
	t.Logf("the other shard's writer PUT %d docs during the compaction", stop())
	at := append([]time.Time{start}, times.since(before)...)
	if len(at) < 6 {
		t.Fatalf("only %d compaction commits: too few to tell", len(at)-1)
	}
	gaps := make([]time.Duration, 0, len(at)-1)
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	slices.Sort(gaps)
	median := gaps[len(gaps)/2]
	t.Logf("%d batches alone in %v, median gap %v", len(gaps), took.Round(time.Millisecond), median.Round(time.Millisecond))
	// a loaded machine can stall the writer past compactIdle now and then,
	// which lets a batch go sooner; back to back, the gap is a few ms
	if median < compactMaxWait/4 {
		t.Errorf("compaction batches committed alone every %v (median) while another shard was written; want about every %v", median, compactMaxWait)
	}
	a.compacted("d0000", revs["d0000"])
}

// A batch the actor never answers — protoactor drops what is still in a
// stopped actor's mailbox — must not hold the compactor (and the node's
// shutdown, which waits for it) until some timeout: it ends when the
// actor stops.
func TestCompactorStopsWaitingWhenTheActorStops(t *testing.T) {
	stopped := make(chan struct{})
	c := &compactor{stopped: stopped}
	answered := newCompactBatch(nil, nil, false)
	answered.answer(nil)
	if err := c.result(answered); err != nil {
		t.Fatalf("an answered batch: %v", err)
	}
	lost := newCompactBatch(nil, nil, false)
	close(stopped)
	if err := c.result(lost); err != errStopping {
		t.Fatalf("a lost batch after the stop: %v, want errStopping", err)
	}
	late := newCompactBatch(nil, nil, true)
	late.answer(fmt.Errorf("refused"))
	if err := c.result(late); err == nil || err.Error() != "refused" {
		t.Fatalf("a batch answered while stopping: %v, want its answer", err)
	}
}
