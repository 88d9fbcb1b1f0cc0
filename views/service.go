package views

import (
	"context"
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
}

// Service holds this node's indexes: an indexer per design-doc signature
// per copy, started by the first query and kept until the copy stops.
type Service struct {
	cfg Config
	sys *actor.ActorSystem

	mu       sync.Mutex
	indexers map[idxKey]*indexer
	designs  DesignCache // parsed design docs of the queries
	closed   bool
	wg       sync.WaitGroup // every indexer's goroutine
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
	return &Service{cfg: cfg, indexers: map[idxKey]*indexer{}}
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

// signatures lists the indexes a copy has on disk (by their checkpoints).
func (s *Service) signatures(handle uint32) ([][16]byte, error) {
	var out [][16]byte
	prefix := ViewsPrefix(handle)
	err := s.cfg.DB.View(func(txn *badger.Txn) error {
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
		return nil
	})
	return out, err
}

// indexerFor is the running indexer of def on a copy, started if needed.
func (s *Service) indexerFor(ref *pb.ShardRef, handle uint32, changes Changes, def *Def) (*indexer, error) {
	k := idxKey{handle, def.Sig}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("views: service closed")
	}
	if ix := s.indexers[k]; ix != nil {
		return ix, nil
	}
	fns := make([]string, len(def.Views))
	for i, v := range def.Views {
		fns[i] = v.Map
	}
	maps, err := s.cfg.JS.NewMapSet(fns, def.Lib)
	if err != nil {
		return nil, err
	}
	x := &index{db: s.cfg.DB, ks: keyspace{indexPrefix(handle, def.Sig)}, def: def, maps: maps, changes: changes,
		log: s.cfg.Logger.With("ddoc", def.ID, "sig", def.SigHex()), sinceWrite: s.cfg.SinceWrite,
		tasks: s.cfg.Tasks, shardName: fmt.Sprintf("shards/%08x-%08x/%s", ref.RangeBegin, ref.RangeEnd, ref.Db)}
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
