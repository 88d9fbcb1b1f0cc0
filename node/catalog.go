package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/coordinator"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
	"github.com/settee/settee/storage"
	"github.com/settee/settee/tasks"
	"github.com/settee/settee/views"
)

// Node-level keys live under handle 0, which no shard gets.
var (
	keyNextHandle = []byte{0, 0, 0, 0, 'n'}
	keyNodeUUID   = []byte{0, 0, 0, 0, 'u'}
	keyAdmin      = []byte{0, 0, 0, 0, 'A'}
	keySecret     = []byte{0, 0, 0, 0, 'S'}
)

func keyDB(name string) []byte    { return append([]byte{0, 0, 0, 0, 'c'}, name...) }
func keyDropping(h uint32) []byte { return binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0, 'd'}, h) }

var (
	// ErrDBExists is returned when creating a database that exists.
	ErrDBExists = errors.New("node: database already exists")
	// ErrDBNotFound re-exports the coordinator's sentinel.
	ErrDBNotFound = coordinator.ErrDBNotFound
)

// DefaultSecurity is what a new database gets: admin only, as CouchDB 3.
var DefaultSecurity = []byte(`{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}`)

// catalog is the node's database list and shard map, persisted in badger
// and cached in memory; it owns the shard actors.
type catalog struct {
	db   *badger.DB
	sys  *actor.ActorSystem
	node string
	log  *slog.Logger
	// beforeDrop runs before a copy's keys are dropped (its view indexers stop)
	beforeDrop func(handle uint32)
	// disk, tasks and obs are handed to every shard (compaction,
	// sizes.file, metrics)
	disk  *storage.Disk
	tasks *tasks.Registry
	obs   shard.Observer
	reads *shard.ReadPool
	// maxPartition is couchdb/max_partition_size, for the copies of
	// partitioned databases (nil: no limit)
	maxPartition func() int64

	mu sync.RWMutex // guards dbs and pids; never held across a request
	// dbs holds every record this node knows, tombstones included: a
	// deleted database must never come back through a late peer.
	dbs  map[string]*pb.DbRecord
	pids map[uint32]*actor.PID
	// peers resolves other nodes' names for shard copies they hold; nil on
	// a single node.
	peers func() *memberSnapshot
	// createMu serialises creates and deletes (handle allocation, names).
	createMu sync.Mutex
	// updates records the /_db_updates events (dbupdates.go); nil in
	// tests of the catalog alone
	updates *dbUpdates
}

func newCatalog(db *badger.DB, sys *actor.ActorSystem, nodeName string, log *slog.Logger, disk *storage.Disk, reg *tasks.Registry, obs shard.Observer, reads *shard.ReadPool, upd *dbUpdates, maxPartition func() int64) (*catalog, error) {
	c := &catalog{db: db, sys: sys, node: nodeName, log: log, disk: disk, tasks: reg, obs: obs, reads: reads, maxPartition: maxPartition,
		dbs: map[string]*pb.DbRecord{}, pids: map[uint32]*actor.PID{}, updates: upd}
	if upd != nil {
		upd.exists = c.hasGlobalChanges
	}
	var dropping []uint32
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{0, 0, 0, 0}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			switch k[4] {
			case 'c':
				rec := &pb.DbRecord{}
				if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, rec) }); err != nil {
					return err
				}
				c.dbs[rec.Name] = rec
			case 'd':
				dropping = append(dropping, binary.BigEndian.Uint32(k[5:]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("node: load catalog: %w", err)
	}
	// finish deletes that a crash interrupted
	for _, h := range dropping {
		if err := c.dropHandle(h); err != nil {
			return nil, err
		}
	}
	for _, rec := range c.dbs {
		if rec.Deleted {
			continue
		}
		for _, s := range rec.Shards {
			if s.Node != c.node {
				continue
			}
			if err := c.spawn(rec, s); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func shardName(s *pb.ShardRef) string {
	return fmt.Sprintf("shards/%08x-%08x/%s", s.RangeBegin, s.RangeEnd, s.Db)
}

// actorName is a shard copy's registered name on its node: the range, the
// database and its incarnation, so that any node holding the shard map can
// address it, and a re-created database never reaches an old copy.
func actorName(rec *pb.DbRecord, s *pb.ShardRef) string {
	inc := rec.Uuid
	if len(inc) > 12 {
		inc = inc[:12]
	}
	return shardName(s) + "#" + inc
}

func (c *catalog) spawn(rec *pb.DbRecord, s *pb.ShardRef) error {
	obs := c.obs
	if c.updates != nil {
		obs = noteWrites{base: c.obs, db: rec.Name, u: c.updates}
	}
	pid, err := shard.Spawn(c.sys.Root, shard.Config{DB: c.db, Handle: s.Handle, Name: shardName(s), Logger: c.log,
		Disk: c.disk, Tasks: c.tasks, Observer: obs, Reads: c.reads,
		IndexBytes:  func() int64 { return views.IndexBytes(c.db, s.Handle) },
		Partitioned: rec.Partitioned, MaxPartitionSize: c.maxPartition}, actorName(rec, s))
	if err != nil {
		return fmt.Errorf("node: spawn shard %s: %w", shardName(s), err)
	}
	c.mu.Lock()
	c.pids[s.Handle] = pid
	c.mu.Unlock()
	return nil
}

// Lookup implements coordinator.Placement.
func (c *catalog) Lookup(_ context.Context, name string) (*pb.DbRecord, error) {
	c.mu.RLock()
	rec, ok := c.dbs[name]
	c.mu.RUnlock()
	if !ok || rec.Deleted {
		return nil, ErrDBNotFound
	}
	return rec, nil
}

// PID implements coordinator.Placement.
func (c *catalog) PID(ref *pb.ShardRef) *actor.PID {
	if ref.Node != c.node {
		return c.remotePID(ref)
	}
	c.mu.RLock()
	pid := c.pids[ref.Handle]
	c.mu.RUnlock()
	if pid == nil {
		// a shard that is gone: requests to it end as dead letters
		return actor.NewPID(c.sys.Address(), fmt.Sprintf("gone#%d", ref.Handle))
	}
	return pid
}

// ReadPID implements coordinator.PointReads: the copy's shard.Reader (a
// copy of this node without one, which a shard spawned by shard.Props
// has until it starts, is asked through its actor, which reads too).
func (c *catalog) ReadPID(ref *pb.ShardRef) *actor.PID {
	pid := c.PID(ref)
	if ref.Node == c.node {
		if _, ok := c.sys.ProcessRegistry.GetLocal(shard.ReaderID(pid.Id)); !ok {
			return pid
		}
	}
	return actor.NewPID(pid.Address, shard.ReaderID(pid.Id))
}

// LocalCopy implements views.Copies: this node's copy and its reader.
func (c *catalog) LocalCopy(ref *pb.ShardRef) (uint32, views.Changes, bool) {
	// a ref from another node carries that node's view of the record, with
	// no handle (handles are each node's own): this node's copy of the
	// range is found in its own record
	if ref.Node == c.node {
		if rec := c.record(ref.Db); rec != nil {
			for _, s := range rec.Shards {
				if s.Node == c.node && s.RangeBegin == ref.RangeBegin && s.RangeEnd == ref.RangeEnd {
					ref = s
				}
			}
		}
	}
	lr := c.LocalReader(ref)
	r, ok := lr.(*shard.Reader)
	if !ok || r == nil {
		return 0, nil, false
	}
	return ref.Handle, r, true
}

// LocalReader implements coordinator.PointReads.
func (c *catalog) LocalReader(ref *pb.ShardRef) coordinator.LocalReader {
	if ref.Node != c.node {
		return nil
	}
	c.mu.RLock()
	pid := c.pids[ref.Handle]
	c.mu.RUnlock()
	if pid == nil {
		return nil
	}
	p, ok := c.sys.ProcessRegistry.GetLocal(shard.ReaderID(pid.Id))
	if !ok {
		return nil
	}
	r, _ := p.(*shard.Reader)
	if r == nil {
		return nil
	}
	return r
}

// hasGlobalChanges reports whether _global_changes exists (the
// /_db_updates feed keeps events only then).
func (c *catalog) hasGlobalChanges() bool {
	c.mu.RLock()
	rec := c.dbs[globalChangesName]
	c.mu.RUnlock()
	return rec != nil && !rec.Deleted
}

// List returns database names, sorted.
func (c *catalog) List() []string {
	c.mu.RLock()
	out := make([]string, 0, len(c.dbs))
	for n, rec := range c.dbs {
		if !rec.Deleted {
			out = append(out, n)
		}
	}
	c.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Create makes a database: q ranges, each with copies on the given nodes
// (placement computed by the caller; a single node passes itself).
func (c *catalog) Create(_ context.Context, name string, q int, nodes []string, n int, security []byte, partitioned bool) (*pb.DbRecord, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if _, err := c.Lookup(context.Background(), name); err == nil {
		return nil, ErrDBExists
	}
	if len(nodes) == 0 {
		nodes = []string{c.node}
	}
	if n < 1 {
		n = 1
	}
	rec := &pb.DbRecord{Name: name, Q: uint32(q), N: uint32(n), CreatedUs: time.Now().UnixMicro(), Uuid: newUUID(), Partitioned: partitioned}
	for i, r := range coordinator.SplitRanges(q) {
		for j := range n {
			rec.Shards = append(rec.Shards, &pb.ShardRef{Db: name, RangeBegin: r[0], RangeEnd: r[1], Node: nodes[(i+j)%len(nodes)]})
		}
	}
	if _, err := c.install(rec, security); err != nil {
		return nil, err
	}
	return c.record(name), nil
}

// Delete removes a database by installing its tombstone.
func (c *catalog) Delete(_ context.Context, name string) (*pb.DbRecord, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	rec, err := c.Lookup(context.Background(), name)
	if err != nil {
		return nil, err
	}
	tomb := proto.Clone(rec).(*pb.DbRecord)
	tomb.Deleted, tomb.DeletedUs = true, max(time.Now().UnixMicro(), rec.CreatedUs+1)
	if _, err := c.install(tomb, nil); err != nil {
		return nil, err
	}
	return tomb, nil
}

// Apply installs a record received from another node (create, delete or
// anti-entropy); it reports whether anything changed here.
func (c *catalog) Apply(rec *pb.DbRecord) (bool, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	return c.install(rec, nil)
}

func stamp(r *pb.DbRecord) int64 {
	if r.Deleted {
		return r.DeletedUs
	}
	return r.CreatedUs
}

func (c *catalog) record(name string) *pb.DbRecord {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dbs[name]
}

// Records returns every record, tombstones included.
func (c *catalog) Records() []*pb.DbRecord {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*pb.DbRecord, 0, len(c.dbs))
	for _, r := range c.dbs {
		out = append(out, r)
	}
	return out
}

// install makes in the current state of its name on this node, if it is
// newer than what is here: local copies of a live record are created (with
// handles of this node) in one synced transaction with the record, so a
// crash leaves all of it or none; a tombstone, or a newer incarnation,
// first drops the local copies of the old one. Callers hold createMu.
func (c *catalog) install(in *pb.DbRecord, security []byte) (bool, error) {
	cur := c.record(in.Name)
	if cur != nil && cur.Uuid == in.Uuid && !cur.Deleted && !in.Deleted && systemIncarnation(in) {
		var removed map[string]bool
		if c.peers != nil {
			removed = c.peers().removed
		}
		rec, changed := mergeCopies(cur, in, removed)
		if !changed {
			return false, nil
		}
		return c.replace(cur, rec)
	}
	if cur != nil {
		switch {
		case cur.Uuid == in.Uuid && cur.Deleted == in.Deleted:
			return false, nil
		case cur.Uuid == in.Uuid && cur.Deleted:
			return false, nil // a tombstone is final
		case cur.Uuid != in.Uuid && stamp(in) <= stamp(cur):
			return false, nil
		}
	}
	rec := proto.Clone(in).(*pb.DbRecord)
	if security == nil {
		security = DefaultSecurity
	}
	var drop []uint32
	var fresh []*pb.ShardRef
	err := storage.Update(c.db, func(txn *badger.Txn) error {
		// Update runs this again when badger blocked writes (a reclaim's
		// DropPrefix): start over, or each copy is listed (and spawned) twice
		drop, fresh = drop[:0], fresh[:0]
		if cur != nil && !cur.Deleted {
			for _, s := range cur.Shards {
				if s.Node == c.node {
					drop = append(drop, s.Handle)
				}
			}
		}
		if !rec.Deleted {
			for _, ref := range rec.Shards {
				ref.Handle = 0
				if ref.Node == c.node {
					fresh = append(fresh, ref)
				}
			}
		}
		return writeRecord(txn, rec, fresh, drop, security)
	})
	if err != nil {
		return false, fmt.Errorf("node: install %s: %w", rec.Name, err)
	}
	if err := c.switchTo(rec, drop, fresh); err != nil {
		return true, err
	}
	if c.updates != nil {
		switch {
		case !rec.Deleted:
			c.updates.note(DBCreated, rec.Name)
		case cur != nil && !cur.Deleted:
			c.updates.note(DBDeleted, rec.Name)
		}
	}
	c.log.Info("database record installed", "db", rec.Name, "deleted", rec.Deleted, "q", rec.Q, "n", rec.N)
	return true, nil
}

// writeRecord stores a record in txn with what its change does to this
// node's copies: fresh ones get handles (the record carries them) and
// their metadata, dropped ones are marked (finished after a crash too).
func writeRecord(txn *badger.Txn, rec *pb.DbRecord, fresh []*pb.ShardRef, drop []uint32, security []byte) error {
	for _, h := range drop {
		if err := txn.Set(keyDropping(h), nil); err != nil {
			return err
		}
	}
	if len(fresh) > 0 {
		next := uint32(1)
		if it, err := txn.Get(keyNextHandle); err == nil {
			if err := it.Value(func(v []byte) error { next = binary.BigEndian.Uint32(v); return nil }); err != nil {
				return err
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		for _, ref := range fresh {
			ref.Handle = next
			next++
			mb, err := proto.Marshal(&pb.ShardMeta{RevsLimit: shard.DefaultRevsLimit, Security: security, CopyId: newUUID()})
			if err != nil {
				return err
			}
			if err := txn.Set(append(shard.Prefix(ref.Handle), 'm'), mb); err != nil {
				return err
			}
		}
		if err := txn.Set(keyNextHandle, binary.BigEndian.AppendUint32(nil, next)); err != nil {
			return err
		}
	}
	rb, err := proto.Marshal(rec)
	if err != nil {
		return err
	}
	return txn.Set(keyDB(rec.Name), rb)
}

// switchTo makes a written record current: the dropped copies' actors
// stop (after their queued commits) and their keys go, the fresh copies'
// actors start.
func (c *catalog) switchTo(rec *pb.DbRecord, drop []uint32, fresh []*pb.ShardRef) error {
	c.mu.Lock()
	c.dbs[rec.Name] = rec
	var pids []*actor.PID
	for _, h := range drop {
		if p := c.pids[h]; p != nil {
			pids = append(pids, p)
		}
		delete(c.pids, h)
	}
	c.mu.Unlock()
	c.stop(pids)
	for _, h := range drop {
		if err := c.dropHandle(h); err != nil {
			return err
		}
	}
	for _, s := range fresh {
		if err := c.spawn(rec, s); err != nil {
			return err
		}
	}
	return nil
}

func (c *catalog) dropHandle(h uint32) error {
	if c.beforeDrop != nil {
		c.beforeDrop(h) // the copy's view indexers stop writing first
	}
	if err := storage.DropPrefix(c.db, shard.Prefix(h)); err != nil {
		return fmt.Errorf("node: drop shard %d: %w", h, err)
	}
	if err := storage.Update(c.db, func(txn *badger.Txn) error { return txn.Delete(keyDropping(h)) }); err != nil {
		return fmt.Errorf("node: drop shard %d: %w", h, err)
	}
	return nil
}

// stopAll stops every shard actor, waiting for in-flight commits.
func (c *catalog) stopAll() {
	c.mu.Lock()
	pids := make([]*actor.PID, 0, len(c.pids))
	for _, p := range c.pids {
		pids = append(pids, p)
	}
	c.mu.Unlock()
	c.stop(pids)
}

// stop lets each shard finish its queued commits (a flush) before it is
// poisoned, so no commit goroutine outlives its actor.
func (c *catalog) stop(pids []*actor.PID) {
	for _, p := range pids {
		_, _ = c.sys.Root.RequestFuture(p, &pb.Flush{}, time.Minute).Result()
		_ = c.sys.Root.PoisonFuture(p).Wait()
	}
}
