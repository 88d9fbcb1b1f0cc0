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
	"github.com/settee/settee/tasks"
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
	// disk and tasks are handed to every shard (compaction, sizes.file)
	disk  *shard.Disk
	tasks *tasks.Registry

	mu   sync.RWMutex // guards dbs and pids; never held across a request
	dbs  map[string]*pb.DbRecord
	pids map[uint32]*actor.PID
	// createMu serialises creates and deletes (handle allocation, names).
	createMu sync.Mutex
}

func newCatalog(db *badger.DB, sys *actor.ActorSystem, nodeName string, log *slog.Logger, disk *shard.Disk, reg *tasks.Registry) (*catalog, error) {
	c := &catalog{db: db, sys: sys, node: nodeName, log: log, disk: disk, tasks: reg,
		dbs: map[string]*pb.DbRecord{}, pids: map[uint32]*actor.PID{}}
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
		for _, s := range rec.Shards {
			if err := c.spawn(s); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func shardName(s *pb.ShardRef) string {
	return fmt.Sprintf("shards/%08x-%08x/%s", s.RangeBegin, s.RangeEnd, s.Db)
}

func (c *catalog) spawn(s *pb.ShardRef) error {
	props := shard.Props(shard.Config{DB: c.db, Handle: s.Handle, Name: shardName(s), Logger: c.log,
		Disk: c.disk, Tasks: c.tasks})
	pid, err := c.sys.Root.SpawnNamed(props, fmt.Sprintf("%s#%d", shardName(s), s.Handle))
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
	if !ok {
		return nil, ErrDBNotFound
	}
	return rec, nil
}

// PID implements coordinator.Placement.
func (c *catalog) PID(ref *pb.ShardRef) *actor.PID {
	c.mu.RLock()
	pid := c.pids[ref.Handle]
	c.mu.RUnlock()
	if pid == nil {
		// a shard that is gone: requests to it end as dead letters
		return actor.NewPID(c.sys.Address(), fmt.Sprintf("gone#%d", ref.Handle))
	}
	return pid
}

// List returns database names, sorted.
func (c *catalog) List() []string {
	c.mu.RLock()
	out := make([]string, 0, len(c.dbs))
	for n := range c.dbs {
		out = append(out, n)
	}
	c.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Create makes a database with q shards, writing its record and every
// shard's initial header in one synced transaction, so that a crash leaves
// either the whole database or none of it.
func (c *catalog) Create(_ context.Context, name string, q int, security []byte) (*pb.DbRecord, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if _, err := c.Lookup(context.Background(), name); err == nil {
		return nil, ErrDBExists
	}
	if security == nil {
		security = DefaultSecurity
	}
	rec := &pb.DbRecord{Name: name, Q: uint32(q), N: 1, CreatedUs: time.Now().UnixMicro(), Uuid: newUUID()}
	err := c.db.Update(func(txn *badger.Txn) error {
		next := uint32(1)
		if it, err := txn.Get(keyNextHandle); err == nil {
			if err := it.Value(func(v []byte) error { next = binary.BigEndian.Uint32(v); return nil }); err != nil {
				return err
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		for _, r := range coordinator.SplitRanges(q) {
			ref := &pb.ShardRef{Db: name, RangeBegin: r[0], RangeEnd: r[1], Node: c.node, Handle: next}
			next++
			rec.Shards = append(rec.Shards, ref)
			mb, err := proto.Marshal(&pb.ShardMeta{RevsLimit: shard.DefaultRevsLimit, Security: security})
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
		rb, err := proto.Marshal(rec)
		if err != nil {
			return err
		}
		return txn.Set(keyDB(name), rb)
	})
	if err != nil {
		return nil, fmt.Errorf("node: create %s: %w", name, err)
	}
	for _, s := range rec.Shards {
		if err := c.spawn(s); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.dbs[name] = rec
	c.mu.Unlock()
	return rec, nil
}

// Delete removes a database: its record and drop marks go in one synced
// transaction, then its shard actors stop and their key prefixes are
// dropped (redone at start-up if a crash interrupts it).
func (c *catalog) Delete(_ context.Context, name string) error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	rec, err := c.Lookup(context.Background(), name)
	if err != nil {
		return err
	}
	err = c.db.Update(func(txn *badger.Txn) error {
		for _, s := range rec.Shards {
			if err := txn.Set(keyDropping(s.Handle), nil); err != nil {
				return err
			}
		}
		return txn.Delete(keyDB(name))
	})
	if err != nil {
		return fmt.Errorf("node: delete %s: %w", name, err)
	}
	c.mu.Lock()
	delete(c.dbs, name)
	var pids []*actor.PID
	for _, s := range rec.Shards {
		if p := c.pids[s.Handle]; p != nil {
			pids = append(pids, p)
		}
		delete(c.pids, s.Handle)
	}
	c.mu.Unlock()
	c.stop(pids)
	for _, s := range rec.Shards {
		if err := c.dropHandle(s.Handle); err != nil {
			return err
		}
	}
	return nil
}

func (c *catalog) dropHandle(h uint32) error {
	if err := shard.DropPrefix(c.db, shard.Prefix(h)); err != nil {
		return fmt.Errorf("node: drop shard %d: %w", h, err)
	}
	if err := c.db.Update(func(txn *badger.Txn) error { return txn.Delete(keyDropping(h)) }); err != nil {
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
