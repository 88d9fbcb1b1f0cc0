package intrepl

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// passTimeout bounds one pair's pass.
const passTimeout = 5 * time.Second

// Pair is one direction of sync: a local copy and a copy of the same range
// on another node.
type Pair struct {
	Key      string // stable name of the pair, for state and logs
	Local    *actor.PID
	Peer     *actor.PID
	PeerNode string
	// Alive reports whether the peer is still reachable (nil: assume so).
	// A sweep takes a while; a peer that went down or was cut off since
	// it began is skipped rather than pushed to.
	Alive func() bool
}

// Source lists the pairs to keep in sync now (live databases with n > 1,
// peers on live nodes); node implements it.
type Source func() []Pair

// Syncer runs sync passes. It owns one goroutine, stopped by Stop.
type Syncer struct {
	root   *actor.RootContext
	src    Source
	log    *slog.Logger
	every  time.Duration
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	synced map[string]pushed // pair key -> the local copy's state last pushed
}

// New returns a syncer sweeping every d.
func New(root *actor.RootContext, src Source, log *slog.Logger, d time.Duration) *Syncer {
	return &Syncer{root: root, src: src, log: log, every: d, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), synced: map[string]pushed{}}
}

// Start starts the loop.
func (s *Syncer) Start() { go s.loop() }

// Stop ends the loop and waits for the pass in progress.
func (s *Syncer) Stop() {
	close(s.stop)
	<-s.done
}

// Kick asks for a pass soon; many kicks coalesce into one pass.
func (s *Syncer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Syncer) loop() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
		s.sweep()
	}
}

// sweep pushes every pair whose local copy changed since its last push.
func (s *Syncer) sweep() {
	pairs := s.src()
	// a pair that is gone (its peer removed, its database deleted) is
	// forgotten: if it comes back, its peer copy is a new one
	live := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		live[p.Key] = true
	}
	s.mu.Lock()
	for k := range s.synced {
		if !live[k] {
			delete(s.synced, k)
		}
	}
	s.mu.Unlock()
	for _, p := range pairs {
		select {
		case <-s.stop:
			return
		default:
		}
		if p.Alive != nil && !p.Alive() {
			continue
		}
		// short: a peer that just died must not hold the sweep (or Stop)
		// for long; liveness drops it from the pairs within seconds
		ctx, cancel := context.WithTimeout(context.Background(), passTimeout)
		info, err := actors.Ask[*pb.ShardInfo](ctx, s.root, p.Local, &pb.GetShardInfo{})
		if err != nil || info.Meta == nil {
			cancel()
			continue
		}
		now := pushedOf(info.Meta)
		s.mu.Lock()
		done, ok := s.synced[p.Key]
		s.mu.Unlock()
		// a pair never pushed is pushed once, even with nothing in it: the
		// peer copy may lack the settings (a new copy)
		if ok && done == now {
			cancel()
			continue
		}
		n, err := Push(ctx, s.root, p)
		cancel()
		if err != nil {
			s.log.Warn("internal replication", "pair", p.Key, "err", err)
			continue
		}
		if n > 0 {
			s.log.Debug("internal replication pushed", "pair", p.Key, "revs", n)
		}
		s.mu.Lock()
		s.synced[p.Key] = now
		s.mu.Unlock()
	}
}

// pushed is what a pair's last push sent: the local copy's update_seq
// and settings stamps.
type pushed struct {
	seq                 uint64
	security, revsLimit int64
}

func pushedOf(m *pb.ShardMeta) pushed {
	return pushed{seq: m.UpdateSeq, security: m.SecurityStamp, revsLimit: m.RevsLimitStamp}
}

// checkpoint is the _local doc a local copy keeps per peer: how far the
// peer copy named Copy has everything.
type checkpoint struct {
	Seq  uint64 `json:"seq"`
	Copy string `json:"copy,omitempty"`
}

func checkpointID(peer string) string { return "_local/shard-sync-" + peer }

// Push sends a peer everything the local copy has that it lacks, from the
// checkpoint on, and advances the checkpoint after each page the peer has
// committed. It returns how many revisions it wrote.
func Push(ctx context.Context, root *actor.RootContext, p Pair) (int, error) {
	var cp checkpoint
	if r, err := actors.Ask[*pb.LocalReply](ctx, root, p.Local, &pb.GetLocal{Id: checkpointID(p.PeerNode)}); err == nil && r.Doc != nil {
		_ = json.Unmarshal(r.Doc.Json, &cp)
	}
	// a checkpoint towards another copy of the peer's (one dropped and
	// made again) says nothing of this one: start over
	info, err := actors.Ask[*pb.ShardInfo](ctx, root, p.Peer, &pb.GetShardInfo{})
	if err != nil {
		return 0, fmt.Errorf("peer info: %w", err)
	}
	if peerCopy := info.GetMeta().GetCopyId(); cp.Copy != peerCopy {
		cp = checkpoint{Copy: peerCopy}
	}
	if err := pushSettings(ctx, root, p, info.GetMeta()); err != nil {
		return 0, err
	}
	written := 0
	for {
		page, err := actors.Ask[*pb.ChangesReply](ctx, root, p.Local, &pb.ReadChanges{Since: cp.Seq, Limit: 500})
		if err != nil {
			return written, fmt.Errorf("read changes: %w", err)
		}
		if page.Error != nil {
			return written, page.Error
		}
		if len(page.Rows) == 0 {
			return written, nil
		}
		n, err := pushPage(ctx, root, p, page.Rows)
		written += n
		if err != nil {
			return written, err
		}
		cp.Seq = page.Rows[len(page.Rows)-1].Info.Seq
		b, _ := json.Marshal(cp)
		if r, err := actors.Ask[*pb.LocalReply](ctx, root, p.Local, &pb.PutLocal{Id: checkpointID(p.PeerNode), Json: b}); err != nil {
			return written, fmt.Errorf("checkpoint: %w", err)
		} else if r.Error != nil {
			return written, r.Error
		}
		if !page.More {
			return written, nil
		}
	}
}

// pushSettings gives the peer this copy's security object and revs_limit
// where they were set later than the peer's (it missed the change).
func pushSettings(ctx context.Context, root *actor.RootContext, p Pair, peer *pb.ShardMeta) error {
	info, err := actors.Ask[*pb.ShardInfo](ctx, root, p.Local, &pb.GetShardInfo{})
	if err != nil {
		return fmt.Errorf("local info: %w", err)
	}
	local := info.GetMeta()
	var sets []*pb.SetMeta
	if local.GetSecurityStamp() > peer.GetSecurityStamp() && local.GetSecurity() != nil {
		sets = append(sets, &pb.SetMeta{Security: local.Security, Stamp: local.SecurityStamp})
	}
	if local.GetRevsLimitStamp() > peer.GetRevsLimitStamp() && local.GetRevsLimit() > 0 {
		sets = append(sets, &pb.SetMeta{RevsLimit: local.RevsLimit, Stamp: local.RevsLimitStamp})
	}
	for _, m := range sets {
		r, err := actors.Ask[*pb.MetaReply](ctx, root, p.Peer, m)
		if err != nil {
			return fmt.Errorf("peer settings: %w", err)
		}
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

// pushPage sends the missing revisions of one page of changes: one rev
// tree request for the page, all body reads sent before any is awaited,
// one write that the peer answers after its commit.
func pushPage(ctx context.Context, root *actor.RootContext, p Pair, rows []*pb.Row) (int, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Info.Id
	}
	peer, err := actors.Ask[*pb.DocInfosReply](ctx, root, p.Peer, &pb.GetDocInfos{Ids: ids})
	if err != nil {
		return 0, fmt.Errorf("peer rev trees: %w", err)
	}
	if peer.Error != nil {
		return 0, peer.Error
	}
	type fetch struct {
		info *pb.FullDocInfo
		f    *actor.Future
	}
	var fetches []fetch
	to := actors.Timeout(ctx)
	for i, r := range rows {
		var missing []string
		for _, l := range revtree.Leaves(r.Info) {
			if i >= len(peer.Infos) || revtree.Find(peer.Infos[i], l.Rev) < 0 {
				missing = append(missing, l.Rev.String())
			}
		}
		if len(missing) == 0 {
			continue
		}
		f := root.RequestFuture(p.Local, &pb.GetDoc{Id: r.Info.Id, Revs: missing, WithAttsData: true}, to)
		fetches = append(fetches, fetch{r.Info, f})
	}
	var docs []*pb.DocUpdate
	for _, fe := range fetches {
		reply, err := actors.Await[*pb.DocReply](ctx, fe.f)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", fe.info.Id, err)
		}
		if reply.Error != nil {
			return 0, reply.Error
		}
		info := reply.Info
		if info == nil {
			continue
		}
		for _, b := range reply.Bodies {
			if b.Missing {
				continue // compacted or purged meanwhile
			}
			r, err := revtree.ParseRev(b.Rev)
			if err != nil {
				continue
			}
			path := revtree.Path(info, revtree.Find(info, r))
			hashes := make([]string, len(path))
			for k, pr := range path {
				hashes[k] = pr.Hash
			}
			u := &pb.DocUpdate{Tag: uint32(len(docs)), Id: info.Id, Body: b.Json, Deleted: b.Deleted,
				Revisions: &pb.Revisions{Start: r.Pos, Ids: hashes}, HasAtts: len(b.Atts) > 0}
			for k, a := range b.Atts {
				if k >= len(b.AttData) {
					break
				}
				u.Atts = append(u.Atts, &pb.Att{Name: a.Name, ContentType: a.ContentType, Data: b.AttData[k],
					Digest: a.Digest, Length: a.Length, Encoding: a.Encoding, EncodedLength: a.EncodedLength, Revpos: a.Revpos})
			}
			docs = append(docs, u)
		}
	}
	if len(docs) == 0 {
		return 0, nil
	}
	// cast the docs into the peer copy in batches of up to 4 MB (no call
	// per batch), then one flush: the peer answers it once everything
	// cast before it is committed, which holds the next page back while
	// the peer is slow
	var batch []*pb.DocUpdate
	size := 0
	for i, d := range docs {
		batch = append(batch, d)
		size += len(d.Body)
		for _, a := range d.Atts {
			size += len(a.Data)
		}
		if size >= maxCastBytes || i == len(docs)-1 {
			root.Send(p.Peer, &pb.UpdateDocs{Docs: batch, NewEdits: false})
			batch, size = nil, 0
		}
	}
	fl, err := actors.Ask[*pb.FlushReply](ctx, root, p.Peer, &pb.Flush{})
	if err != nil {
		return 0, fmt.Errorf("flush peer: %w", err)
	}
	if fl.Error != nil {
		return 0, fmt.Errorf("flush peer: %w", fl.Error)
	}
	// a cast has no answer: one lost on the way (a connection that
	// dropped and came back) or refused would go unnoticed, so the peer's
	// rev trees are read back before the checkpoint may pass this page
	if err := verify(ctx, root, p, docs); err != nil {
		return 0, err
	}
	return len(docs), nil
}

// maxCastBytes bounds one cast into a peer copy (seed 001's 4 MB batches).
const maxCastBytes = 4 << 20

// verify checks that the peer copy holds every revision pushed.
func verify(ctx context.Context, root *actor.RootContext, p Pair, docs []*pb.DocUpdate) error {
	ids := make([]string, 0, len(docs))
	idx := map[string]int{}
	for _, d := range docs {
		if _, ok := idx[d.Id]; !ok {
			idx[d.Id] = len(ids)
			ids = append(ids, d.Id)
		}
	}
	peer, err := actors.Ask[*pb.DocInfosReply](ctx, root, p.Peer, &pb.GetDocInfos{Ids: ids})
	if err != nil {
		return fmt.Errorf("peer rev trees: %w", err)
	}
	if peer.Error != nil {
		return peer.Error
	}
	for _, d := range docs {
		rev := revtree.Rev{Pos: d.Revisions.Start, Hash: d.Revisions.Ids[0]}
		i := idx[d.Id]
		if i >= len(peer.Infos) || revtree.Find(peer.Infos[i], rev) < 0 {
			return fmt.Errorf("peer lacks %s %s after the flush: a write was lost or refused", d.Id, rev.String())
		}
	}
	return nil
}
