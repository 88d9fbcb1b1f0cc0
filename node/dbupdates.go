package node

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/coordinator"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
	"github.com/settee/settee/storage"
)

// /_db_updates: the node's feed of database events, "created", "updated"
// and "deleted", each at a node-local sequence.
//
// CouchDB 3 serves the feed from the _changes of the _global_changes
// database, one doc per (type, database), so an event of a type already
// recorded for a database moves that doc to the newest seq: the feed holds
// at most one row per (type, database), the latest. settee answers the same
// without the database: every node keeps the events in its own node keys
// (handle 0, kind 'E': E + seq (uint64 BE) -> type, generation, name), one
// per (type, database), the older one deleted in the transaction that
// writes the newer. The history is bounded by maxDBUpdates entries; past
// it the oldest go. The seq counter survives restarts (it is the largest
// stored seq).
//
// Where events come from, on every node alike, so that any node's feed
// shows the whole cluster: "created" and "deleted" when the catalog
// installs a new incarnation or a tombstone (every node installs every
// record, also from anti-entropy after being down); "updated" when a shard
// copy of this node commits writes, and when another member says one of
// its copies did (DbUpdated, sent by each node for its own copies' writes,
// coalesced to at most one note per dbUpdatesEvery). Events are written in
// batches at most every dbUpdatesEvery, in the order they were noted.
//
// As in CouchDB, events are kept only while _global_changes exists (none
// about _global_changes itself), deleting _global_changes drops the
// history, and /_db_updates answers 404 without it. A node misses the
// "updated" events of writes made while it was down or cut off (creates
// and deletes reach it by anti-entropy).

const (
	globalChangesName = "_global_changes"
	maxDBUpdates      = 100000
	dbUpdatesEvery    = 250 * time.Millisecond
	dbUpdatesPage     = 500
)

// DB update event types.
const (
	DBCreated = "created"
	DBUpdated = "updated"
	DBDeleted = "deleted"
)

// ErrBadSeq re-exports the coordinator's sentinel: a since that is not a
// sequence of this feed.
var ErrBadSeq = coordinator.ErrBadSeq

var dbUpdatesPrefix = []byte{0, 0, 0, 0, 'E'}

func keyDBUpdate(seq uint64) []byte { return binary.BigEndian.AppendUint64(dbUpdatesPrefix[:5:5], seq) }

type evKey struct {
	typ  byte // 'c', 'u', 'd'
	name string
}

type evPos struct {
	seq uint64
	gen uint64
}

func typeByte(t string) byte { return t[0] }

func typeName(b byte) string {
	switch b {
	case 'c':
		return DBCreated
	case 'd':
		return DBDeleted
	}
	return DBUpdated
}

// DBUpdate is one row of /_db_updates.
type DBUpdate struct {
	DB, Type, Seq string
	// Rev is the revision CouchDB's _global_changes doc of the row would
	// have (its eventsource feed shows the doc's change row).
	Rev string
}

type dbUpdates struct {
	db     *badger.DB
	log    *slog.Logger
	limit  int    // rows kept (maxDBUpdates)
	suffix string // the seqs' opaque part: this node's uuid
	// exists reports whether _global_changes exists
	exists func() bool
	// spread tells the other members of this node's copies' writes
	spread func([]string)

	mu      sync.Mutex
	seq     uint64
	latest  map[evKey]evPos
	pending []evKey
	queued  map[evKey]bool
	local   map[string]bool // updated here, to spread
	clear   bool            // _global_changes was deleted: drop the history
	changed chan struct{}   // closed when seq moves

	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func newDBUpdates(db *badger.DB, log *slog.Logger, nodeUUID string) (*dbUpdates, error) {
	raw, err := hex.DecodeString(strings.ReplaceAll(nodeUUID, "-", ""))
	if err != nil || len(raw) == 0 {
		raw = []byte(nodeUUID)
	}
	u := &dbUpdates{db: db, log: log, limit: maxDBUpdates, suffix: base64.RawURLEncoding.EncodeToString(raw),
		latest: map[evKey]evPos{}, queued: map[evKey]bool{}, local: map[string]bool{},
		changed: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{})}
	var stale [][]byte
	err = db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = dbUpdatesPrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			seq := binary.BigEndian.Uint64(it.Item().Key()[5:])
			var k evKey
			var gen uint64
			if err := it.Item().Value(func(v []byte) error { k, gen = decodeEvent(v); return nil }); err != nil {
				return err
			}
			if old, ok := u.latest[k]; ok {
				stale = append(stale, keyDBUpdate(old.seq))
			}
			u.latest[k] = evPos{seq, gen}
			u.seq = max(u.seq, seq)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("node: load db updates: %w", err)
	}
	if len(stale) > 0 {
		if err := storage.Update(db, func(txn *badger.Txn) error {
			for _, k := range stale {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("node: load db updates: %w", err)
		}
	}
	return u, nil
}

func encodeEvent(k evKey, gen uint64) []byte {
	b := binary.AppendUvarint([]byte{k.typ}, gen)
	return append(b, k.name...)
}

func decodeEvent(v []byte) (evKey, uint64) {
	if len(v) == 0 {
		return evKey{typ: 'u'}, 0
	}
	gen, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return evKey{typ: v[0]}, 0
	}
	return evKey{typ: v[0], name: string(v[1+n:])}, gen
}

func (u *dbUpdates) start() {
	u.wg.Go(u.loop)
}

// close writes what is noted and stops the writer; notes made after it
// are dropped.
func (u *dbUpdates) close() {
	u.once.Do(func() {
		close(u.stop)
		u.wg.Wait()
	})
}

func (u *dbUpdates) loop() {
	for {
		select {
		case <-u.kick:
		case <-u.stop:
			u.flush(false)
			return
		}
		u.flush(true)
		// at most one batch per interval: notes meanwhile wait for the next
		select {
		case <-time.After(dbUpdatesEvery):
		case <-u.stop:
			u.flush(false)
			return
		}
	}
}

// note queues an event (created, deleted, or updated from a peer).
func (u *dbUpdates) note(typ, name string) {
	if name == globalChangesName {
		if typ == DBDeleted {
			u.mu.Lock()
			u.clear, u.pending = true, nil
			clear(u.queued)
			clear(u.local)
			u.mu.Unlock()
			u.poke()
		}
		return
	}
	if !u.exists() {
		return
	}
	u.mu.Lock()
	u.queue(evKey{typeByte(typ), name})
	u.mu.Unlock()
	u.poke()
}

// noteWrite queues an "updated" event for a write to a copy of this node
// (told to the other members too). It never blocks: shard actors call it.
func (u *dbUpdates) noteWrite(name string) {
	if name == globalChangesName || !u.exists() {
		return
	}
	u.mu.Lock()
	fresh := u.queue(evKey{'u', name})
	u.local[name] = true
	u.mu.Unlock()
	if fresh {
		u.poke()
	}
}

// queue adds k once until the next batch; callers hold mu.
func (u *dbUpdates) queue(k evKey) bool {
	if u.queued[k] {
		return false
	}
	u.queued[k] = true
	u.pending = append(u.pending, k)
	return true
}

func (u *dbUpdates) poke() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// flush writes the queued events in one transaction: each (type, db) at a
// new seq, its previous row deleted, the oldest past the bound dropped.
func (u *dbUpdates) flush(spread bool) {
	u.mu.Lock()
	pending, wipe := u.pending, u.clear
	u.pending, u.clear = nil, false
	clear(u.queued)
	var names []string
	for n := range u.local {
		names = append(names, n)
	}
	clear(u.local)
	u.mu.Unlock()
	if wipe {
		if err := u.wipe(); err != nil {
			u.log.Error("db updates: dropping the history", "err", err)
		}
	}
	if len(pending) > 0 {
		if err := u.write(pending); err != nil {
			u.log.Error("db updates: writing events", "err", err)
		}
	}
	if spread && len(names) > 0 && u.spread != nil {
		u.spread(names)
	}
}

func (u *dbUpdates) write(pending []evKey) error {
	// only this writer (the flush goroutine) changes latest and seq: it
	// reads them under mu and commits without it, so that a shard
	// noting a write never waits for this commit
	u.mu.Lock()
	base := u.seq
	seq := base
	type change struct {
		k   evKey
		old evPos
		had bool
		pos evPos
	}
	changes := make([]change, 0, len(pending))
	fresh := map[evKey]bool{}
	for _, k := range pending {
		old, had := u.latest[k]
		seq++
		changes = append(changes, change{k, old, had, evPos{seq, old.gen + 1}})
		if !had {
			fresh[k] = true
		}
	}
	over := len(u.latest) + len(fresh) - u.limit
	u.mu.Unlock()
	var evict []uint64
	err := storage.Update(u.db, func(txn *badger.Txn) error {
		evict = evict[:0]
		for _, c := range changes {
			if c.had {
				if err := txn.Delete(keyDBUpdate(c.old.seq)); err != nil {
					return err
				}
			}
			if err := txn.Set(keyDBUpdate(c.pos.seq), encodeEvent(c.k, c.pos.gen)); err != nil {
				return err
			}
		}
		if over <= 0 {
			return nil
		}
		// the oldest rows go, the ones just written (and their deleted
		// predecessors) aside
		opts := badger.DefaultIteratorOptions
		opts.Prefix, opts.PrefetchValues = dbUpdatesPrefix, false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid() && len(evict) < over; it.Next() {
			s := binary.BigEndian.Uint64(it.Item().Key()[5:])
			if s > base {
				break
			}
			evict = append(evict, s)
		}
		for _, s := range evict {
			if err := txn.Delete(keyDBUpdate(s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range changes {
		u.latest[c.k] = c.pos
	}
	if len(evict) > 0 {
		gone := map[uint64]bool{}
		for _, s := range evict {
			gone[s] = true
		}
		for k, p := range u.latest {
			if gone[p.seq] {
				delete(u.latest, k)
			}
		}
	}
	u.seq = seq
	close(u.changed)
	u.changed = make(chan struct{})
	return nil
}

// wipe drops every stored event (the seq counter goes on).
func (u *dbUpdates) wipe() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var keys [][]byte
	for _, p := range u.latest {
		keys = append(keys, keyDBUpdate(p.seq))
	}
	for len(keys) > 0 {
		n := min(len(keys), 10000)
		batch := keys[:n]
		if err := storage.Update(u.db, func(txn *badger.Txn) error {
			for _, k := range batch {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		keys = keys[n:]
	}
	clear(u.latest)
	return nil
}

func (u *dbUpdates) format(seq uint64) string {
	return strconv.FormatUint(seq, 10) + "-" + u.suffix
}

// parseSince reads a since: "" and "0" are the start, "now" the current
// seq, N-<opaque> a seq of a feed; one of another node's feed starts over
// (the counters are the node's: never skip an event).
func (u *dbUpdates) parseSince(s string) (uint64, error) {
	switch s {
	case "", "0":
		return 0, nil
	case "now":
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.seq, nil
	}
	num, rest, ok := strings.Cut(s, "-")
	if !ok {
		return 0, ErrBadSeq
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, ErrBadSeq
	}
	if _, err := base64.RawURLEncoding.DecodeString(rest); err != nil || rest == "" {
		return 0, ErrBadSeq
	}
	if rest != u.suffix {
		return 0, nil
	}
	return n, nil
}

func (u *dbUpdates) rev(k evKey, gen uint64) string {
	sum := md5.Sum([]byte(typeName(k.typ) + ":" + k.name + ":" + strconv.FormatUint(gen, 10)))
	return strconv.FormatUint(gen, 10) + "-" + hex.EncodeToString(sum[:])
}

// read calls fn for the events after since (all of them, newest first,
// when descending), at most limit (<0: no limit); it returns the seq of
// the last one, or since's when there was none.
func (u *dbUpdates) read(since uint64, descending bool, limit int, fn func(DBUpdate) error) (uint64, error) {
	last, sent := since, 0
	from := since + 1
	if descending {
		from = ^uint64(0)
	}
	for limit < 0 || sent < limit {
		type row struct {
			k        evKey
			seq, gen uint64
		}
		var page []row
		err := u.db.View(func(txn *badger.Txn) error {
			opts := badger.DefaultIteratorOptions
			opts.Prefix, opts.Reverse = dbUpdatesPrefix, descending
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Seek(keyDBUpdate(from)); it.Valid() && len(page) < dbUpdatesPage; it.Next() {
				seq := binary.BigEndian.Uint64(it.Item().Key()[5:])
				var r row
				if err := it.Item().Value(func(v []byte) error { r.k, r.gen = decodeEvent(v); return nil }); err != nil {
					return err
				}
				r.seq = seq
				page = append(page, r)
			}
			return nil
		})
		if err != nil {
			return last, err
		}
		for _, r := range page {
			if limit >= 0 && sent >= limit {
				return last, nil
			}
			if err := fn(DBUpdate{DB: r.k.name, Type: typeName(r.k.typ), Seq: u.format(r.seq), Rev: u.rev(r.k, r.gen)}); err != nil {
				return last, err
			}
			last = r.seq
			sent++
		}
		if len(page) < dbUpdatesPage {
			break
		}
		if descending {
			if last == 0 {
				break
			}
			from = last - 1
		} else {
			from = last + 1
		}
	}
	return last, nil
}

// wait waits up to d for an event after since.
func (u *dbUpdates) wait(ctx context.Context, since uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		u.mu.Lock()
		seq, ch := u.seq, u.changed
		u.mu.Unlock()
		if seq > since {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// noteWrites reports a shard copy's commits to the node's observer and
// its database's "updated" event.
type noteWrites struct {
	base shard.Observer
	db   string
	u    *dbUpdates
}

func (o noteWrites) Committed(docs, written int, took time.Duration) {
	if o.base != nil {
		o.base.Committed(docs, written, took)
	}
	if written > 0 {
		o.u.noteWrite(o.db)
	}
}

func (o noteWrites) DocsRead(n int) {
	if o.base != nil {
		o.base.DocsRead(n)
	}
}

// spreadUpdates sends this node's copies' writes to every other live
// member (no answer: a lost note is one "updated" event fewer there).
func (n *Node) spreadUpdates(names []string) {
	if n.cl == nil {
		return
	}
	snap := n.snapshot()
	msg := &pb.DbUpdated{Dbs: names, From: n.cfg.Name}
	for _, m := range snap.members {
		if m != snap.self && snap.alive[m] {
			n.sys.Root.Send(actor.NewPID(snap.addr[m], dbsName), msg)
		}
	}
}

// DBUpdatesQuery is what /_db_updates asks for.
type DBUpdatesQuery struct {
	Since      string // "", "0", "now" or a seq of the feed
	Descending bool   // newest first, since ignored
	Limit      int    // <0: no limit
}

// ParseDBUpdatesSince checks a since (ErrBadSeq) and that the feed exists
// (ErrDBNotFound without _global_changes), and resolves "now".
func (n *Node) ParseDBUpdatesSince(since string) (string, error) {
	if _, err := n.cat.Lookup(context.Background(), globalChangesName); err != nil {
		return "", err
	}
	s, err := n.upd.parseSince(since)
	if err != nil {
		return "", err
	}
	return n.upd.format(s), nil
}

// DBUpdates calls fn for each event of the feed after q.Since and returns
// the last seq sent (q.Since's when none was).
func (n *Node) DBUpdates(_ context.Context, q DBUpdatesQuery, fn func(DBUpdate) error) (string, error) {
	if _, err := n.cat.Lookup(context.Background(), globalChangesName); err != nil {
		return "", err
	}
	since, err := n.upd.parseSince(q.Since)
	if err != nil {
		return "", err
	}
	if q.Descending {
		since = 0
	}
	last, err := n.upd.read(since, q.Descending, q.Limit, fn)
	return n.upd.format(last), err
}

// WaitDBUpdates waits up to d for an event after since; false on timeout,
// a bad since or ctx's end.
func (n *Node) WaitDBUpdates(ctx context.Context, since string, d time.Duration) bool {
	s, err := n.upd.parseSince(since)
	if err != nil {
		return false
	}
	return n.upd.wait(ctx, s, d)
}
