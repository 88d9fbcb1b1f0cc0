package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/intrepl"
	pb "github.com/settee/settee/proto"
)

// The _dbs database of CouchDB: each database's shard map, on every node.
// A create or delete is installed here and sent to every member; a member
// that was down gets it from the periodic anti-entropy push, so creates
// and deletes made meanwhile converge, and a tombstone keeps a deleted
// database from coming back.

const (
	dbsName          = "dbs"
	antiEntropyEvery = 5 * time.Second
)

// memberSnapshot is the membership actor's published view, read by the
// catalog and the coordinator without a round trip.
type memberSnapshot struct {
	self    string
	addr    map[string]string // node name -> node address
	alive   map[string]bool
	members []string // not removed, sorted
	removed map[string]bool
}

func (s *memberSnapshot) isAlive(name string) bool {
	return s == nil || name == s.self || s.alive[name]
}

// remotePID addresses a copy held by another node.
func (c *catalog) remotePID(ref *pb.ShardRef) *actor.PID {
	rec := c.record(ref.Db)
	var snap *memberSnapshot
	if c.peers != nil {
		snap = c.peers()
	}
	if rec == nil || snap == nil || snap.addr[ref.Node] == "" {
		return actor.NewPID("nonhost", "unknown-node/"+ref.Node)
	}
	return actor.NewPID(snap.addr[ref.Node], actorName(rec, ref))
}

// Alive implements coordinator.Liveness: copies on nodes that missed their
// heartbeats are skipped instead of costing a timeout.
func (c *catalog) Alive(node string) bool {
	if node == c.node || c.peers == nil {
		return true
	}
	return c.peers().isAlive(node)
}

// dbsActor receives shard maps from other nodes and pushes this node's to
// them now and then.
type dbsActor struct {
	n    *Node
	stop chan struct{}
	wg   *sync.WaitGroup // the cluster's: stopCluster waits for what it starts
}

type pushTick struct{}

func (d *dbsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		self, root := ctx.Self(), ctx.ActorSystem().Root
		d.wg.Go(func() {
			t := time.NewTicker(antiEntropyEvery)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					root.Send(self, pushTick{})
				case <-d.stop:
					return
				}
			}
		})
	case *actor.Stopping:
		close(d.stop)
	case *pb.DbRecords:
		// installing may create or drop shards: off the mailbox
		n, sender, reply := d.n, ctx.Sender(), m.Reply
		root := ctx.ActorSystem().Root
		d.wg.Go(func() {
			var firstErr error
			for _, rec := range m.Records {
				if _, err := n.cat.Apply(rec); err != nil && firstErr == nil {
					firstErr = err
					n.log.Error("dbs: apply", "db", rec.Name, "err", err)
				}
			}
			if reply && sender != nil {
				ack := &pb.DbRecordsAck{From: n.cfg.Name}
				if firstErr != nil {
					ack.Error = &pb.Error{Code: "internal_error", Reason: firstErr.Error()}
				}
				root.Send(sender, ack)
			}
		})
	case *pb.DbUpdated:
		// another member's copies had writes (dbupdates.go)
		for _, name := range m.Dbs {
			d.n.upd.note(DBUpdated, name)
		}
	case pushTick:
		d.n.placeSystemDBs()
		recs := d.n.cat.Records()
		snap := d.n.snapshot()
		for _, name := range snap.members {
			if name != snap.self && snap.alive[name] {
				ctx.Send(actor.NewPID(snap.addr[name], dbsName), &pb.DbRecords{Records: recs, From: snap.self})
			}
		}
	}
}

func (n *Node) snapshot() *memberSnapshot {
	if n.cl == nil {
		return &memberSnapshot{self: n.cfg.Name, addr: map[string]string{}, alive: map[string]bool{n.cfg.Name: true}, members: []string{n.cfg.Name}}
	}
	return n.cl.snap.Load()
}

// ErrQuorum is returned when a shard map cannot be met (n > nodes).
var ErrQuorum = errors.New("node: not enough nodes")

// createDB creates a database across the cluster: n copies of each of q
// ranges spread over the members, installed here and sent to every live
// member. It reports whether every member answered (201) or not (202).
func (n *Node) createDB(ctx context.Context, name string, o DBOptions) (bool, error) {
	q, copies := o.Q, o.N
	snap := n.snapshot()
	members := snap.members
	if n.cl == nil {
		members = []string{n.cfg.Name}
	}
	if copies <= 0 {
		copies = min(n.defaultCopies(), len(members))
		if copies <= 0 {
			copies = 1
		}
	}
	if copies > len(members) {
		return false, fmt.Errorf("%w: n=%d copies but %d nodes in the cluster", ErrQuorum, copies, len(members))
	}
	// rotate the start so that databases do not all put range 0 on the
	// same node
	start := int(crc(name)) % len(members)
	order := append(slices.Clone(members[start:]), members[:start]...)
	rec, err := n.cat.Create(ctx, name, q, order, copies, nil, o.Partitioned)
	if err != nil {
		return false, err
	}
	if n.cl == nil {
		return true, nil
	}
	return n.broadcast(ctx, rec), nil
}

// deleteDB deletes a database everywhere (a tombstone, spread like a create).
func (n *Node) deleteDB(ctx context.Context, name string) (bool, error) {
	tomb, err := n.cat.Delete(ctx, name)
	if err != nil {
		return false, err
	}
	if n.cl == nil {
		return true, nil
	}
	return n.broadcast(ctx, tomb), nil
}

// broadcast sends a record to every other member and waits (bounded) for
// their acks; it reports whether all members acknowledged. A send that
// fails fast (a connection being set up or torn down while the cluster
// forms) is retried a few times; a member still missing gets the record
// from anti-entropy.
func (n *Node) broadcast(ctx context.Context, rec *pb.DbRecord) bool {
	snap := n.snapshot()
	msg := &pb.DbRecords{Records: []*pb.DbRecord{rec}, From: n.cfg.Name, Reply: true}
	all := true
	var targets []string
	for _, name := range snap.members {
		if name == n.cfg.Name {
			continue
		}
		if !snap.alive[name] {
			all = false // it gets the record from anti-entropy when back
			continue
		}
		targets = append(targets, name)
	}
	acks := make(chan bool, len(targets))
	for _, name := range targets {
		pid := actor.NewPID(snap.addr[name], dbsName)
		go func() {
			for attempt := range 3 {
				if attempt > 0 {
					time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
				}
				// installing is idempotent, so a lost answer is simply
				// asked again
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				ack, err := actors.Ask[*pb.DbRecordsAck](actx, n.sys.Root, pid, msg)
				cancel()
				if err == nil && ack.Error == nil {
					acks <- true
					return
				}
				if ctx.Err() != nil {
					break
				}
			}
			acks <- false
		}()
	}
	for range targets {
		if !<-acks {
			all = false
		}
	}
	return all
}

func crc(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Self implements coordinator.Placement.
func (c *catalog) Self() string { return c.node }

// syncPairs lists the internal replication pairs of this node: each local
// copy of a database with n > 1, towards each copy of its range on another
// live node.
func (n *Node) syncPairs() []intrepl.Pair {
	var out []intrepl.Pair
	for _, rec := range n.cat.Records() {
		if rec.Deleted || rec.N < 2 {
			continue
		}
		for _, local := range rec.Shards {
			if local.Node != n.cfg.Name {
				continue
			}
			lpid := n.cat.PID(local)
			for _, peer := range rec.Shards {
				if peer.Node == n.cfg.Name || peer.RangeBegin != local.RangeBegin || !n.cat.Alive(peer.Node) {
					continue
				}
				out = append(out, intrepl.Pair{
					Key:      rec.Uuid + "/" + shardName(local) + "->" + peer.Node,
					Local:    lpid,
					Peer:     n.cat.PID(peer),
					PeerNode: peer.Node,
					Alive:    func() bool { return n.cat.Alive(peer.Node) },
				})
			}
		}
	}
	return out
}

// SyncShards (POST /db/_sync_shards): internal replication runs now
// (it covers every database; one sweep is cheap when nothing changed).
func (n *Node) SyncShards(context.Context, string) error {
	if n.cl != nil {
		n.cl.sync.Kick()
	}
	return nil
}
