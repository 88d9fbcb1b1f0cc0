package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/intrepl"
	pb "github.com/settee/settee/proto"
)

// ClusterConfig makes a node reachable by other nodes.
type ClusterConfig struct {
	// NodeAddr is the node-to-node (gRPC) listen address; empty: single
	// node, no remote.
	NodeAddr string
	// AdvertiseAddr is the address other nodes dial, when it differs from
	// NodeAddr (Docker, NAT).
	AdvertiseAddr string
	// Secret authenticates node-to-node traffic; required with NodeAddr.
	Secret string
	// Join lists HTTP addresses (host:port) of nodes to join at start-up,
	// with this node's admin credentials; retried until it works, and
	// harmless when already joined.
	Join []string
}

// Validate checks the cluster settings.
func (c ClusterConfig) Validate() error {
	if c.NodeAddr == "" {
		if len(c.Join) > 0 {
			return errors.New("--join needs --node-addr")
		}
		return nil
	}
	if c.Secret == "" {
		return errors.New("--node-addr needs --cluster-secret")
	}
	if _, _, err := net.SplitHostPort(c.NodeAddr); err != nil {
		return fmt.Errorf("--node-addr: %w", err)
	}
	return nil
}

// syncEvery is the internal replication sweep period; writes also kick it.
const syncEvery = time.Second

// joinTimeout bounds the node-to-node part of a join.
const joinTimeout = 5 * time.Second

// ErrNotClustered is returned by cluster operations on a node started
// without --node-addr.
var ErrNotClustered = errors.New("node: this node was started without --node-addr and cannot join a cluster")

// cluster is the node's clustering state, nil when single-node.
type cluster struct {
	remote     *remote.Remote
	addr       string // advertised node address
	membership *actor.PID
	dbs        *actor.PID
	snap       atomic.Pointer[memberSnapshot]
	sync       *intrepl.Syncer
	// sched answers other nodes' /_scheduler questions (replicator.go)
	sched *actor.PID
	// ctx ends with stopCluster; wg counts every goroutine the cluster's
	// actors and the join loop started, which stopCluster waits for
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startCluster starts the remote transport and the membership actor.
func (n *Node) startCluster(ctx context.Context, cc ClusterConfig, httpAddr string) error {
	if cc.NodeAddr == "" {
		return nil
	}
	r, addr, err := startRemote(n.sys, cc.NodeAddr, cc.AdvertiseAddr, cc.Secret)
	if err != nil {
		return err
	}
	self := &pb.Member{Name: n.cfg.Name, NodeAddr: addr, HttpAddr: httpAddr, JoinedUs: time.Now().UnixMicro()}
	cl := &cluster{remote: r, addr: addr}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	hb, down := n.heartbeats()
	m, err := newMembership(self, n.db, n.log, &cl.snap, &cl.wg, hb, down)
	if err != nil {
		cl.cancel()
		r.Shutdown(false)
		return err
	}
	pid, err := n.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return m }), membershipName)
	if err != nil {
		cl.cancel()
		r.Shutdown(false)
		return fmt.Errorf("node: spawn membership: %w", err)
	}
	cl.membership = pid
	n.cl = cl
	n.cat.peers = n.cl.snap.Load
	d := &dbsActor{n: n, stop: make(chan struct{}), wg: &cl.wg}
	if cl.dbs, err = n.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return d }), dbsName); err != nil {
		_ = n.sys.Root.PoisonFuture(pid).Wait()
		cl.cancel()
		cl.wg.Wait()
		r.Shutdown(false)
		return fmt.Errorf("node: spawn dbs: %w", err)
	}
	cl.sync = intrepl.New(n.sys.Root, n.syncPairs, n.log.With("src", "intrepl"), syncEvery)
	cl.sync.Start()
	n.coord.OnWrite(cl.sync.Kick)
	if len(cc.Join) > 0 {
		cl.wg.Go(func() { n.joinLoop(cl.ctx, cc.Join) })
	}
	n.log.Info("cluster transport started", "node_addr", addr, "node", n.cfg.Name)
	return nil
}

func (n *Node) stopCluster() {
	if n.cl == nil {
		return
	}
	n.cl.cancel()
	n.cl.sync.Stop()
	// no actor of the cluster's may start a goroutine once Wait begins
	if n.cl.sched != nil {
		_ = n.sys.Root.PoisonFuture(n.cl.sched).Wait()
	}
	_ = n.sys.Root.PoisonFuture(n.cl.dbs).Wait()
	_ = n.sys.Root.PoisonFuture(n.cl.membership).Wait()
	n.cl.wg.Wait()
	n.cl.remote.Shutdown(false)
}

// joinLoop joins the given nodes, retrying with backoff until each answers
// (they may still be starting, as in a compose cluster's first start).
func (n *Node) joinLoop(stop context.Context, targets []string) {
	user, pw, _ := strings.Cut(n.cfg.Admin, ":")
	pending := append([]string(nil), targets...)
	backoff := 500 * time.Millisecond
	for len(pending) > 0 {
		var left []string
		for _, t := range pending {
			host, portStr, err := net.SplitHostPort(t)
			port, perr := strconv.Atoi(portStr)
			if err != nil || perr != nil {
				n.log.Error("join: bad address", "target", t)
				continue
			}
			ctx, cancel := context.WithTimeout(stop, 10*time.Second)
			err = n.AddNode(ctx, host, port, user, pw)
			cancel()
			if err != nil {
				n.log.Warn("join: retrying", "target", t, "err", err)
				left = append(left, t)
			} else {
				n.log.Info("joined", "target", t)
			}
		}
		pending = left
		if len(pending) == 0 {
			return
		}
		select {
		case <-stop.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 15*time.Second)
	}
}

// NodeInfo is what GET /_node/_local tells another node.
type NodeInfo struct {
	Name     string `json:"name"`
	NodeAddr string `json:"node_addr,omitempty"`
	UUID     string `json:"uuid,omitempty"`
}

// LocalInfo describes this node.
func (n *Node) LocalInfo() NodeInfo {
	info := NodeInfo{Name: n.cfg.Name, UUID: n.uuid}
	if n.cl != nil {
		info.NodeAddr = n.cl.addr
	}
	return info
}

// AddNode makes the node whose HTTP API is at host:port a member, as
// CouchDB's /_cluster_setup add_node: its admin credentials prove the
// operator may, and the cluster secret (checked by the transport) proves
// it belongs. Both sides then spread the news to every member.
func (n *Node) AddNode(ctx context.Context, host string, port int, user, password string) error {
	if n.cl == nil {
		return ErrNotClustered
	}
	u := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/_node/_local"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, password)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("node: add node %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%w: %s refused the credentials", ErrBadCredentials, u)
	}
	var info NodeInfo
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return fmt.Errorf("node: add node %s: unexpected answer %d", u, resp.StatusCode)
	}
	if info.NodeAddr == "" {
		return fmt.Errorf("node: %s (%s) runs without --node-addr", info.Name, u)
	}
	if info.Name == n.cfg.Name {
		if info.NodeAddr == n.cl.addr {
			return nil // joining oneself: nothing to do
		}
		return fmt.Errorf("node: %s has the same node name %q as this node", u, info.Name)
	}
	self, err := actors.Ask[*pb.MembersReply](ctx, n.sys.Root, n.cl.membership, &pb.GetMembers{})
	if err != nil {
		return err
	}
	var me *pb.Member
	for _, m := range self.Members {
		if m.Name == n.cfg.Name {
			me = m
		}
	}
	// a peer with another secret never answers (its transport refuses
	// ours): do not wait a whole request timeout for that
	jctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	list, err := actors.Ask[*pb.MemberList](jctx, n.sys.Root, actor.NewPID(info.NodeAddr, membershipName), &pb.JoinRequest{Member: me})
	if err != nil {
		return fmt.Errorf("%w: %s at %s did not answer on its node port (%v)", ErrClusterUnreachable, info.Name, info.NodeAddr, err)
	}
	// merge what it knows here, which spreads it to our members
	n.sys.Root.Send(n.cl.membership, list)
	return nil
}

var (
	// ErrClusterMember: a node whose store records other members was
	// started without --node-addr. The cluster secret is required once a
	// node has joined.
	ErrClusterMember = errors.New("node: this data dir belongs to a member of a cluster: start the node with --node-addr and --cluster-secret")
	// ErrBadCredentials: the other node refused the admin credentials.
	ErrBadCredentials = errors.New("node: wrong credentials for the other node")
	// ErrClusterUnreachable: the other node's transport did not answer,
	// most often a different cluster secret.
	ErrClusterUnreachable = errors.New("node: other node unreachable on its node port or cluster secret differs")
)

// Members returns this node's view: every member and those alive now.
func (n *Node) Members(ctx context.Context) (*pb.MembersReply, error) {
	if n.cl == nil {
		self := &pb.Member{Name: n.cfg.Name, HttpAddr: n.Addr()}
		return &pb.MembersReply{Members: []*pb.Member{self}, Alive: []string{n.cfg.Name}}, nil
	}
	return actors.Ask[*pb.MembersReply](ctx, n.sys.Root, n.cl.membership, &pb.GetMembers{})
}

// RemoveNode removes a member (it stays known as a tombstone).
func (n *Node) RemoveNode(ctx context.Context, name string) error {
	if n.cl == nil {
		return ErrNotClustered
	}
	res, err := actors.Ask[removeResult](ctx, n.sys.Root, n.cl.membership, &removeMember{name: name})
	if err != nil {
		return err
	}
	return res.err
}

// PutNode records a member directly (PUT /_node/_local/_nodes/<name>); the
// news spreads to every member.
func (n *Node) PutNode(ctx context.Context, m *pb.Member) error {
	if n.cl == nil {
		return ErrNotClustered
	}
	if m.JoinedUs == 0 {
		m.JoinedUs = time.Now().UnixMicro()
	}
	_, err := actors.Ask[*pb.MemberList](ctx, n.sys.Root, n.cl.membership, &pb.MemberList{Members: []*pb.Member{m}})
	return err
}

// Clustered reports whether the node runs the cluster transport.
func (n *Node) Clustered() bool { return n.cl != nil }

// FinishCluster records that the cluster's
// setup is finished (CouchDB's finish_cluster) on this member's record,
// which spreads to the others; it reports false when a member had already
// recorded it.
func (n *Node) FinishCluster(ctx context.Context) (bool, error) {
	if n.cl == nil {
		return false, ErrNotClustered
	}
	r, err := actors.Ask[finishResult](ctx, n.sys.Root, n.cl.membership, finishSetup{})
	if err != nil {
		return false, err
	}
	return !r.already, r.err
}

// Isolate makes this node treat the named peers as unreachable until the
// next Isolate (with none: healed). It simulates a network partition at the
// membership level for tests: copies there are skipped, nothing is pushed
// to them, their heartbeats are ignored. Real partitions come from the
// network (see the Docker drills).
func (n *Node) Isolate(ctx context.Context, names ...string) error {
	if n.cl == nil {
		return ErrNotClustered
	}
	_, err := actors.Ask[removeResult](ctx, n.sys.Root, n.cl.membership, isolate{names: names})
	return err
}

// heartbeats are settee/heartbeat_interval and node_down_after: the flags,
// or the values written through _config, which count from the next start
// when they still make sense together (down after more than a beat).
func (n *Node) heartbeats() (time.Duration, time.Duration) {
	hb, err1 := time.ParseDuration(n.conf.value(setteeSection, "heartbeat_interval"))
	down, err2 := time.ParseDuration(n.conf.value(setteeSection, "node_down_after"))
	if err1 != nil || err2 != nil || hb <= 0 || down <= hb {
		n.log.Warn("config: settee/heartbeat_interval and node_down_after do not fit together, using the flags",
			"heartbeat_interval", hb, "node_down_after", down)
		return n.cfg.HeartbeatInterval, n.cfg.NodeDownAfter
	}
	return hb, down
}
