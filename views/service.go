package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/couchjs"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/storage"
	"github.com/settee/settee/tasks"
)

// ProcessName is the views service's process on every node: other nodes'
// coordinators send it ViewQuery for the copies this node holds.
const ProcessName = "views"

// Copies finds this node's shard copies: the handle of a copy and where
// its by-seq index is read (false: not here).
type Copies interface {
	LocalCopy(ref *pb.ShardRef) (handle uint32, changes Changes, ok bool)
}

// Config wires a Service.
type Config struct {
	DB     *badger.DB
	JS     *couchjs.Pool
	Copies Copies
	Logger *slog.Logger
	// Go runs a read for another node (the node's read pool); nil: a
	// goroutine of its own.
	Go func(func())
	// SinceWrite is how long ago the node last began committing a user
	// write (storage.Disk.SinceWrite): builds yield to writes.
	SinceWrite func() time.Duration
	// Tasks lists the builds running (indexer tasks in _active_tasks).
	Tasks *tasks.Registry
	// BackgroundRefresh reports whether indexes queried lately are kept
	// current after writes (settee/view_background_refresh); nil: they are.
	BackgroundRefresh func() bool
	// Reclaim makes the store give back what deleted keys hold
	// (storage.Disk.Reclaim): an index's compaction. nil: nothing to do.
	Reclaim func() error
}

// Service holds this node's indexes: an indexer per design-doc signature
// per copy, started by the first query and kept until the copy stops.
type Service struct {
	cfg Config
	sys *actor.ActorSystem

	mu       sync.Mutex
	indexers map[idxKey]*indexer
	designs  DesignCache // parsed design docs of the queries
	// compacting counts the compactions running per index (_info's
	// compact_running)
	compacting map[idxKey]int
	closed     bool
	wg         sync.WaitGroup // every indexer's and compaction's goroutine
}

type idxKey struct {
	handle uint32
	sig    [16]byte
}

// New starts a Service (Close stops it).
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, indexers: map[idxKey]*indexer{}, compacting: map[idxKey]int{}}
}

// Register adds the service's process to sys, for queries from other nodes.
func (s *Service) Register(sys *actor.ActorSystem) error {
	s.sys = sys
	if _, ok := sys.ProcessRegistry.Add(&process{s: s}, ProcessName); !ok {
		return errors.New("views: process already registered")
	}
	return nil
}

// Close stops every indexer and waits for their commits.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	all := make([]*indexer, 0, len(s.indexers))
	for _, ix := range s.indexers {
		all = append(all, ix)
	}
	s.indexers = map[idxKey]*indexer{}
	s.mu.Unlock()
	for _, ix := range all {
		ix.stop()
	}
	s.wg.Wait()
}

// StopCopy stops the indexers of a copy and waits until none writes: the
// node calls it before it drops the copy's keys, so no index record
// outlives its copy.
func (s *Service) StopCopy(handle uint32) {
	s.mu.Lock()
	var stop []*indexer
	for k, ix := range s.indexers {
		if k.handle == handle {
			stop = append(stop, ix)
			delete(s.indexers, k)
		}
	}
	s.mu.Unlock()
	for _, ix := range stop {
		ix.stop()
		<-ix.done
	}
}

// Cleanup drops the indexes of a copy whose signatures are not in keep
// (POST /db/_view_cleanup).
func (s *Service) Cleanup(ref *pb.ShardRef, keep map[[16]byte]bool) error {
	handle, _, ok := s.cfg.Copies.LocalCopy(ref)
	if !ok {
		return nil
	}
	sigs, err := s.signatures(handle)
	if err != nil {
		return err
	}
	for _, sig := range sigs {
		if keep[sig] {
			continue
		}
		s.mu.Lock()
		ix := s.indexers[idxKey{handle, sig}]
		delete(s.indexers, idxKey{handle, sig})
		s.mu.Unlock()
		if ix != nil {
			ix.stop()
			<-ix.done
		}
		if err := storage.DropPrefix(s.cfg.DB, indexPrefix(handle, sig)); err != nil {
			return fmt.Errorf("views: cleanup: %w", err)
		}
	}
	return nil
}

// CleanupMsg answers a ViewCleanup.
func (s *Service) CleanupMsg(m *pb.ViewCleanup) *pb.ViewCleanupReply {
	keep := map[[16]byte]bool{}
	for _, k := range m.Keep {
		var sig [16]byte
		copy(sig[:], k)
		keep[sig] = true
	}
	if err := s.Cleanup(m.Shard, keep); err != nil {
		return &pb.ViewCleanupReply{Error: &pb.Error{Code: "internal_error", Reason: err.Error()}}
	}
	return &pb.ViewCleanupReply{}
}

// Compact starts a compaction of one index of a copy and returns: what an
// index leaves behind as docs change is deleted rows and back-index
// entries, which the store's own compaction drops; compacting an index is
// having the store do it now (Config.Reclaim: flush, merge the LSM into
// one level, give back value-log files), which one run does for every
// index and database of the node at once. A view_compaction task shows it
// in _active_tasks, and _info says compact_running meanwhile.
func (s *Service) Compact(ref *pb.ShardRef, sig [16]byte, ddocID string) error {
	handle, _, ok := s.cfg.Copies.LocalCopy(ref)
	if !ok {
		return nil
	}
	k := idxKey{handle, sig}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("views: service closed")
	}
	if s.compacting[k] > 0 {
		return nil // the one running serves this request too
	}
	s.compacting[k]++
	var task *tasks.Task
	if s.cfg.Tasks != nil {
		task = s.cfg.Tasks.Start("view_compaction", map[string]any{
			"database": shardName(ref), "design_document": ddocID, "phase": "view",
			"changes_done": 0, "total_changes": 1, "progress": 0,
		})
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if s.cfg.Reclaim != nil {
			err = s.cfg.Reclaim()
		}
		if err != nil {
			s.cfg.Logger.Warn("view compaction failed", "ddoc", ddocID, "err", err)
		}
		if task != nil {
			task.Update(map[string]any{"changes_done": 1, "progress": 100})
			task.Done()
		}
		s.mu.Lock()
		s.compacting[k]--
		if s.compacting[k] == 0 {
			delete(s.compacting, k)
		}
		s.mu.Unlock()
	}()
	return nil
}

// CompactMsg answers a ViewCompact once the compaction has started.
func (s *Service) CompactMsg(m *pb.ViewCompact) *pb.ViewCleanupReply {
	var sig [16]byte
	copy(sig[:], m.Sig)
	if err := s.Compact(m.Shard, sig, m.DdocId); err != nil {
		return &pb.ViewCleanupReply{Error: &pb.Error{Code: "internal_error", Reason: err.Error()}}
	}
	return &pb.ViewCleanupReply{}
}

// compactRunning reports a compaction of the index running.
func (s *Service) compactRunning(handle uint32, sig [16]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compacting[idxKey{handle, sig}] > 0
}

func shardName(ref *pb.ShardRef) string {
	return fmt.Sprintf("shards/%08x-%08x/%s", ref.RangeBegin, ref.RangeEnd, ref.Db)
}

// IndexBytes is the bytes of the rows of every index a copy has on disk,
// as their checkpoints count them: what db info adds to the database's
// sizes. It reads one checkpoint per index.
func IndexBytes(db *badger.DB, handle uint32) int64 {
	var n int64
	_ = db.View(func(txn *badger.Txn) error {
		for _, sig := range indexSignatures(txn, handle) {
			it, err := txn.Get(keyspace{indexPrefix(handle, sig)}.checkpoint())
			if err != nil {
				continue
			}
			var cp checkpoint
			if it.Value(func(v []byte) error { return json.Unmarshal(v, &cp) }) == nil {
				n += int64(cp.Active)
			}
		}
		return nil
	})
	return n
}

// signatures lists the indexes a copy has on disk (by their checkpoints).
func (s *Service) signatures(handle uint32) ([][16]byte, error) {
	var out [][16]byte
	err := s.cfg.DB.View(func(txn *badger.Txn) error {
		out = indexSignatures(txn, handle)
		return nil
	})
	return out, err
}

// indexSignatures lists the signatures with keys under a copy's handle,
// one seek per index.
func indexSignatures(txn *badger.Txn, handle uint32) [][16]byte {
	var out [][16]byte
	prefix := ViewsPrefix(handle)
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(prefix); it.Valid(); {
		k := it.Item().Key()
		if len(k) < indexPrefixLen {
			it.Next()
			continue
		}
		var sig [16]byte
		copy(sig[:], k[len(prefix):indexPrefixLen])
		out = append(out, sig)
		// the next signature: past every key of this one
		next := append(append([]byte{}, k[:indexPrefixLen]...), 0xff, 0xff)
		it.Seek(next)
	}
	return out
}

// indexerFor is the running indexer of def on a copy, started if needed.
func (s *Service) indexerFor(ref *pb.ShardRef, handle uint32, changes Changes, def *Def, partitioned bool) (*indexer, error) {
	k := idxKey{handle, def.Sig}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("views: service closed")
	}
	if ix := s.indexers[k]; ix != nil {
		return ix, nil
	}
	var maps mapper
	sandbox := JSSandbox(s.cfg.JS, ref.Db, def)
	if def.Language == "query" {
		qm, err := newQueryMaps(def)
		if err != nil {
			return nil, err
		}
		maps = qm
	} else {
		fns := make([]string, len(def.Views))
		for i, v := range def.Views {
			fns[i] = v.Map
		}
		js, err := sandbox.NewMapSet(fns, def.Lib)
		if err != nil {
			return nil, err
		}
		maps = js
	}
	x := &index{db: s.cfg.DB, ks: keyspace{indexPrefix(handle, def.Sig)}, def: def, maps: maps, js: sandbox, changes: changes, refresh: s.cfg.BackgroundRefresh,
		log: s.cfg.Logger.With("ddoc", def.ID, "sig", def.SigHex()), sinceWrite: s.cfg.SinceWrite,
		tasks: s.cfg.Tasks, shardName: shardName(ref), partitioned: partitioned}
	ix, err := startIndexer(x, &s.wg)
	if err != nil {
		return nil, err
	}
	s.indexers[k] = ix
	return ix, nil
}

// process answers ViewQuery from other nodes.
type process struct{ s *Service }

func (p *process) SendUserMessage(pid *actor.PID, message any) {
	_, msg, sender := actor.UnwrapEnvelope(message)
	if sender == nil {
		return
	}
	var run func()
	switch q := msg.(type) {
	case *pb.ViewQuery:
		// the asking node bounds the wait with its own timeout
		run = func() { p.s.sys.Root.Send(sender, p.s.Query(context.Background(), q)) }
	case *pb.ViewCleanup:
		run = func() { p.s.sys.Root.Send(sender, p.s.CleanupMsg(q)) }
	case *pb.ViewCompact:
		run = func() { p.s.sys.Root.Send(sender, p.s.CompactMsg(q)) }
	default:
		p.s.sys.Root.Send(sender, &actor.DeadLetterResponse{Target: pid})
		return
	}
	if p.s.cfg.Go != nil {
		p.s.cfg.Go(run)
		return
	}
	p.s.wg.Add(1)
	go func() {
		defer p.s.wg.Done()
		run()
	}()
}

func (p *process) SendSystemMessage(*actor.PID, any) {}
func (p *process) Stop(pid *actor.PID)               { p.s.sys.ProcessRegistry.Remove(pid) }
