package node

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/storage"
)

// membershipName is the registered name of every node's membership actor.
const membershipName = "membership"

// How often members ping each other, and after how long without an answer
// a member counts as down, unless Config says otherwise
// (--heartbeat-interval, --node-down-after).
const (
	DefaultHeartbeatInterval = time.Second
	DefaultNodeDownAfter     = 4 * time.Second
)

func keyMember(name string) []byte { return append([]byte{0, 0, 0, 0, 'N'}, name...) }

type tick struct{}

// membership is the actor that owns this node's view of the cluster: the
// members (persisted, the _nodes database of CouchDB) and who answered a
// heartbeat lately. Changes spread by sending the whole list to every
// member: clusters are small and lists are idempotent to merge.
type membership struct {
	self    *pb.Member
	db      *badger.DB
	log     *slog.Logger
	members map[string]*pb.Member
	// every is the heartbeat interval; a member not heard from for
	// downAfter is down
	every, downAfter time.Duration
	seen             map[string]time.Time
	up               map[string]bool // last logged state
	stop             chan struct{}
	wg               *sync.WaitGroup // the cluster's: stopCluster waits for the ticker
	snap             *atomic.Pointer[memberSnapshot]
	// isolated peers are treated as unreachable (a partition simulated at
	// the membership level, for tests; Node.Isolate)
	isolated map[string]bool
	sub      *eventstream.Subscription
}

// endpointDown: the transport lost its connection to a node address.
type endpointDown struct{ addr string }

func newMembership(self *pb.Member, db *badger.DB, log *slog.Logger, snap *atomic.Pointer[memberSnapshot], wg *sync.WaitGroup, every, downAfter time.Duration) (*membership, error) {
	m := &membership{self: self, db: db, log: log, snap: snap, wg: wg, every: every, downAfter: downAfter,
		members: map[string]*pb.Member{}, seen: map[string]time.Time{}, up: map[string]bool{}, stop: make(chan struct{})}
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{0, 0, 0, 0, 'N'}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			mem := &pb.Member{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, mem) }); err != nil {
				return err
			}
			m.members[mem.Name] = mem
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// this node's own record always reflects its current addresses
	if old, ok := m.members[self.Name]; ok {
		if old.JoinedUs != 0 {
			self.JoinedUs = old.JoinedUs
		}
		self.SetupFinishedUs = old.SetupFinishedUs
	}
	if err := m.store(self); err != nil {
		return nil, err
	}
	m.publish(time.Now())
	return m, nil
}

// storedPeers lists the other members this node's store records (not
// removed): a node that has joined a cluster has some.
func storedPeers(db *badger.DB, self string) ([]string, error) {
	var out []string
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = keyMember("")
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			mem := &pb.Member{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, mem) }); err != nil {
				return err
			}
			if mem.Name != self && !mem.Removed {
				out = append(out, mem.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("node: read members: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// heard records a sign of life from a member; the published view follows
// at once when it makes the member alive, so that what /_membership says
// and what the coordinator uses agree.
func (m *membership) heard(name string) {
	m.seen[name] = time.Now()
	if !m.snap.Load().alive[name] {
		m.publish(time.Now())
	}
}

// publish makes the current view readable without a round trip.
func (m *membership) publish(now time.Time) {
	s := &memberSnapshot{self: m.self.Name, addr: map[string]string{}, alive: map[string]bool{m.self.Name: true}, removed: map[string]bool{}}
	for _, mem := range m.members {
		if mem.Removed {
			s.removed[mem.Name] = true
			continue
		}
		s.addr[mem.Name] = mem.NodeAddr
		s.members = append(s.members, mem.Name)
		if mem.Name != m.self.Name && !m.isolated[mem.Name] && now.Sub(m.seen[mem.Name]) < m.downAfter {
			s.alive[mem.Name] = true
		}
	}
	sort.Strings(s.members)
	m.snap.Store(s)
}

func (m *membership) store(mem *pb.Member) error {
	b, err := proto.Marshal(mem)
	if err != nil {
		return err
	}
	if err := storage.Update(m.db, func(txn *badger.Txn) error { return txn.Set(keyMember(mem.Name), b) }); err != nil {
		return err
	}
	m.members[mem.Name] = mem
	return nil
}

func (m *membership) list() []*pb.Member {
	out := make([]*pb.Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, mem)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// merge takes in another node's list; it reports whether anything changed.
// A tombstone wins over a live record that joined before it was removed.
func (m *membership) merge(list []*pb.Member) bool {
	changed := false
	for _, in := range list {
		if in.Name == m.self.Name {
			continue
		}
		cur, ok := m.members[in.Name]
		if ok && in.SetupFinishedUs < cur.SetupFinishedUs {
			// a finished setup stays finished, whatever order the
			// lists arrive in
			in = proto.Clone(in).(*pb.Member)
			in.SetupFinishedUs = cur.SetupFinishedUs
		}
		switch {
		case !ok:
		case cur.Removed == in.Removed && cur.NodeAddr == in.NodeAddr && cur.HttpAddr == in.HttpAddr &&
			cur.SetupFinishedUs == in.SetupFinishedUs:
			continue
		case cur.Removed && !in.Removed && in.JoinedUs <= cur.JoinedUs:
			continue
		}
		if err := m.store(proto.Clone(in).(*pb.Member)); err != nil {
			m.log.Error("membership: store", "member", in.Name, "err", err)
			continue
		}
		changed = true
		defer m.publish(time.Now())
		m.log.Info("membership changed", "member", in.Name, "removed", in.Removed, "node_addr", in.NodeAddr)
	}
	return changed
}

func (m *membership) pid(mem *pb.Member) *actor.PID {
	return actor.NewPID(mem.NodeAddr, membershipName)
}

// spread sends the whole list to every other live member.
func (m *membership) spread(ctx actor.Context) {
	msg := &pb.MemberList{Members: m.list(), From: m.self.Name}
	for _, mem := range m.members {
		if mem.Name != m.self.Name && !mem.Removed {
			ctx.Send(m.pid(mem), msg)
		}
	}
}

// Receive is the membership state machine.
func (m *membership) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		self := ctx.Self()
		root := ctx.ActorSystem().Root
		// the transport's own word that a peer's connection is gone:
		// the peer is down now, not after its missed heartbeats (its
		// next pong brings it back)
		m.sub = ctx.ActorSystem().EventStream.Subscribe(func(ev any) {
			if e, ok := ev.(*remote.EndpointTerminatedEvent); ok {
				root.Send(self, endpointDown{addr: e.Address})
			}
		})
		m.wg.Go(func() {
			t := time.NewTicker(m.every)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					root.Send(self, tick{})
				case <-m.stop:
					return
				}
			}
		})
	case *actor.Stopping:
		ctx.ActorSystem().EventStream.Unsubscribe(m.sub)
		close(m.stop)
	case endpointDown:
		for _, mem := range m.members {
			if mem.NodeAddr == msg.addr && mem.Name != m.self.Name {
				if _, ok := m.seen[mem.Name]; ok {
					delete(m.seen, mem.Name)
					m.log.Info("node connection lost", "node", mem.Name, "node_addr", msg.addr)
				}
			}
		}
		m.publish(time.Now())
	case isolate:
		m.isolated = map[string]bool{}
		for _, name := range msg.names {
			m.isolated[name] = true
			delete(m.seen, name)
		}
		m.publish(time.Now())
		ctx.Respond(removeResult{})
	case tick:
		for _, mem := range m.members {
			if mem.Name != m.self.Name && !mem.Removed && !m.isolated[mem.Name] {
				ctx.Request(m.pid(mem), &pb.Ping{From: m.self.Name})
			}
		}
		m.logTransitions(time.Now())
		m.publish(time.Now())
	case *pb.Ping:
		if m.isolated[msg.From] {
			return
		}
		m.heard(msg.From)
		ctx.Respond(&pb.Pong{From: m.self.Name})
	case *pb.Pong:
		if m.isolated[msg.From] {
			return
		}
		m.heard(msg.From)
	case *pb.JoinRequest:
		if msg.Member == nil || msg.Member.Name == "" || msg.Member.NodeAddr == "" {
			ctx.Respond(&pb.MemberList{From: m.self.Name})
			return
		}
		in := proto.Clone(msg.Member).(*pb.Member)
		in.Removed = false
		if in.JoinedUs == 0 {
			in.JoinedUs = time.Now().UnixMicro()
		}
		changed := m.merge([]*pb.Member{in})
		m.heard(in.Name)
		ctx.Respond(&pb.MemberList{Members: m.list(), From: m.self.Name})
		if changed {
			m.spread(ctx)
		}
	case *pb.MemberList:
		if m.isolated[msg.From] {
			return
		}
		if msg.From != "" {
			m.heard(msg.From)
		}
		if m.merge(msg.Members) {
			m.spread(ctx)
		}
		if ctx.Sender() != nil {
			ctx.Respond(&pb.MemberList{Members: m.list(), From: m.self.Name})
		}
	case *removeMember:
		cur, ok := m.members[msg.name]
		if !ok || msg.name == m.self.Name {
			ctx.Respond(removeResult{err: ErrNoSuchMember})
			return
		}
		tomb := proto.Clone(cur).(*pb.Member)
		tomb.Removed = true
		tomb.JoinedUs = time.Now().UnixMicro()
		if err := m.store(tomb); err != nil {
			ctx.Respond(removeResult{err: err})
			return
		}
		// tell the others, the removed node included
		msgList := &pb.MemberList{Members: m.list(), From: m.self.Name}
		for _, mem := range m.members {
			if mem.Name != m.self.Name {
				ctx.Send(m.pid(mem), msgList)
			}
		}
		ctx.Respond(removeResult{})
	case *pb.GetMembers:
		ctx.Respond(m.reply(time.Now()))
	case finishSetup:
		if setupFinished(m.list()) {
			ctx.Respond(finishResult{already: true})
			return
		}
		self := proto.Clone(m.self).(*pb.Member)
		self.SetupFinishedUs = time.Now().UnixMicro()
		if err := m.store(self); err != nil {
			ctx.Respond(finishResult{err: err})
			return
		}
		m.self = self
		m.log.Info("cluster setup finished")
		m.spread(ctx)
		ctx.Respond(finishResult{})
	}
}

// finishSetup is a local request: record that the cluster's setup is
// finished (POST /_cluster_setup finish_cluster), unless it already is.
type finishSetup struct{}

type finishResult struct {
	already bool
	err     error
}

// setupFinished reports whether finish_cluster ran on any member, removed
// ones included (finished stays finished).
func setupFinished(members []*pb.Member) bool {
	for _, mem := range members {
		if mem.SetupFinishedUs != 0 {
			return true
		}
	}
	return false
}

var ErrNoSuchMember = errors.New("node: no such member")

// removeMember is a local request (never crosses a node).
type removeMember struct{ name string }

type removeResult struct{ err error }

// isolate is a local request: treat these peers as unreachable.
type isolate struct{ names []string }

func (m *membership) reply(now time.Time) *pb.MembersReply {
	r := &pb.MembersReply{Members: m.list(), Alive: []string{m.self.Name}}
	for _, mem := range r.Members {
		if mem.Name != m.self.Name && !mem.Removed && now.Sub(m.seen[mem.Name]) < m.downAfter {
			r.Alive = append(r.Alive, mem.Name)
		}
	}
	sort.Strings(r.Alive)
	return r
}

// logTransitions logs members going up or down, once per change.
func (m *membership) logTransitions(now time.Time) {
	for _, mem := range m.members {
		if mem.Name == m.self.Name || mem.Removed {
			continue
		}
		up := now.Sub(m.seen[mem.Name]) < m.downAfter
		if was, known := m.up[mem.Name]; known && was == up {
			continue
		} else if !known && !up {
			m.up[mem.Name] = false
			continue
		}
		m.up[mem.Name] = up
		if up {
			m.log.Info("member up", "member", mem.Name)
		} else {
			m.log.Warn("member down", "member", mem.Name)
		}
	}
}
