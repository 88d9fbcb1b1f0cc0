package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// Coordinator runs requests against a node's view of the cluster.
type Coordinator struct {
	root    *actor.RootContext
	pl      Placement
	reads   PointReads // nil: reads go to the copies' actors
	onWrite atomic.Pointer[func()]
}

// OnWrite registers a function called after every write (internal
// replication's kick; it must not block).
func (c *Coordinator) OnWrite(f func()) { c.onWrite.Store(&f) }

// New returns a coordinator sending through root.
func New(root *actor.RootContext, pl Placement) *Coordinator {
	c := &Coordinator{root: root, pl: pl}
	c.reads, _ = pl.(PointReads)
	return c
}

// readPID addresses the process that answers ref's point reads.
func (c *Coordinator) readPID(ref *pb.ShardRef) *actor.PID {
	if c.reads != nil {
		return c.reads.ReadPID(ref)
	}
	return c.pl.PID(ref)
}

// localReader is ref's reader when this node holds the copy, else nil.
func (c *Coordinator) localReader(ref *pb.ShardRef) LocalReader {
	if c.reads == nil || ref.Node != c.pl.Self() {
		return nil
	}
	return c.reads.LocalReader(ref)
}

// readDoc reads m from one copy: on this goroutine when the copy is here.
func (c *Coordinator) readDoc(ctx context.Context, ref *pb.ShardRef, m *pb.GetDoc) (*pb.DocReply, error) {
	var reply *pb.DocReply
	if lr := c.localReader(ref); lr != nil {
		reply = lr.ReadDoc(m)
	} else {
		var err error
		if reply, err = actors.Ask[*pb.DocReply](ctx, c.root, c.readPID(ref), m); err != nil {
			return nil, err
		}
	}
	if reply.Error != nil {
		return nil, reply.Error
	}
	return reply, nil
}

func (c *Coordinator) lookup(ctx context.Context, db string) (*pb.DbRecord, []Range, error) {
	rec, err := c.pl.Lookup(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return rec, Ranges(rec), nil
}

// copies returns the copies of a range on live nodes, this node's first.
// When none is alive it returns them all: a request then fails on its own
// rather than claiming the data is gone.
func (c *Coordinator) copies(r Range) []*pb.ShardRef {
	self := c.pl.Self()
	out := make([]*pb.ShardRef, 0, len(r.Copies))
	for _, cp := range r.Copies {
		if cp.Node == self {
			out = append(out, cp)
		}
	}
	for _, cp := range r.Copies {
		if cp.Node != self && c.pl.Alive(cp.Node) {
			out = append(out, cp)
		}
	}
	if len(out) == 0 {
		return r.Copies
	}
	return out
}

// readCopy picks the copy of a range that serves a read: the local one if
// there is one, else a live one.
func (c *Coordinator) readCopy(r Range) *actor.PID { return c.pl.PID(c.readRef(r)) }

func (c *Coordinator) readRef(r Range) *pb.ShardRef { return c.copies(r)[0] }

// Outcome is the coordinator's answer for one doc of a write.
type Outcome struct {
	Rev string
	Err *pb.Error
	// Accepted is set when fewer than w copies acknowledged (HTTP 202).
	Accepted bool
}

// hashRevs computes each new revision's hash once, for its copies to use:
// hashing the body was 10% of a copy's CPU in a three-node _bulk_docs. A
// doc with attachments is left to the copies (their digests may come from
// the parent), as is a doc whose _rev does not parse.
func hashRevs(docs []*pb.DocUpdate) {
	for _, d := range docs {
		if d.HasAtts || len(d.Atts) > 0 {
			continue
		}
		var parent *revtree.Rev
		if d.Rev != "" {
			p, err := revtree.ParseRev(d.Rev)
			if err != nil {
				continue
			}
			parent = &p
		}
		d.RevHash = revtree.NewRevHash(d.Deleted, parent, d.Body, nil)
	}
}

// ErrNoCopies is a doc's error when no copy of its shard could be reached.
var ErrNoCopies = &pb.Error{Code: "internal_server_error", Reason: "No shard copy of this document could be reached"}

// UpdateDocs writes docs (tagged 0..n-1 by the caller) to every live copy
// of their shards: one UpdateDocs message per copy, all sent before waiting
// on any. It returns as soon as every doc has w acknowledgements (the other
// copies still apply the write), or when all copies answered or timed out.
// Results come back by tag; with new_edits=false every merged doc is
// acknowledged too. A doc acknowledged by fewer than w copies but at least
// one is Accepted (HTTP 202); by none, it carries the copies' error.
func (c *Coordinator) UpdateDocs(ctx context.Context, db string, docs []*pb.DocUpdate, newEdits bool, w int) ([]Outcome, error) {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	if w < 1 {
		w = int(rec.N)/2 + 1
	}
	per := make([][]*pb.DocUpdate, len(ranges))
	for _, d := range docs {
		i := RangeOf(ranges, d.Id)
		per[i] = append(per[i], d)
	}
	// replies arrive on one channel; a copy whose node is seen down while
	// the write waits on it counts as failed at once, not at the timeout
	// (a node that hangs without closing its connections never answers)
	var refs []*pb.ShardRef // by gather tag
	var batches []*pb.UpdateDocs
	for i, ds := range per {
		if len(ds) == 0 {
			continue
		}
		m := &pb.UpdateDocs{Docs: ds, NewEdits: newEdits, Reply: true}
		cps := c.copies(ranges[i])
		if newEdits && len(cps) > 1 {
			hashRevs(ds)
		}
		for _, cp := range cps {
			refs = append(refs, cp)
			batches = append(batches, m)
		}
	}
	g := actors.NewGather(c.root, len(refs))
	defer g.Close()
	for i, cp := range refs {
		g.Request(i, c.pl.PID(cp), batches[i])
	}
	waiting := make([]bool, len(refs))
	for i := range waiting {
		waiting[i] = true
	}
	deadline := time.NewTimer(actors.Timeout(ctx))
	defer deadline.Stop()
	live := time.NewTicker(liveCheck)
	defer live.Stop()
	out := make([]Outcome, len(docs))
	acks := make([]int, len(docs))
	done := 0
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
wait:
	for left := len(refs); left > 0 && done < len(docs); {
		var res *pb.UpdateResult
		select {
		case ans := <-g.C():
			waiting[ans.Tag] = false
			left--
			r, ok := ans.Msg.(*pb.UpdateResult)
			switch {
			case ans.Err != nil:
				fail(ans.Err)
				continue
			case !ok:
				fail(fmt.Errorf("coordinator: unexpected reply %T", ans.Msg))
				continue
			}
			res = r
		case <-live.C:
			for i, w := range waiting {
				if w && c.seenDown(refs[i]) {
					waiting[i] = false
					left--
					fail(errDown(refs[i]))
				}
			}
			continue
		case <-deadline.C:
			fail(context.DeadlineExceeded)
			break wait
		case <-ctx.Done():
			fail(ctx.Err())
			break wait
		}
		for _, r := range res.Results {
			if int(r.Tag) >= len(out) {
				continue
			}
			if r.Error != nil {
				if acks[r.Tag] == 0 {
					out[r.Tag].Err = r.Error
				}
				continue
			}
			acks[r.Tag]++
			out[r.Tag].Rev, out[r.Tag].Err = r.Rev, nil
			if acks[r.Tag] == w {
				done++
			}
		}
	}
	answered := false
	for i := range out {
		switch {
		case acks[i] > 0 && acks[i] < w:
			out[i].Accepted = true
		case acks[i] == 0 && out[i].Err == nil:
			out[i].Err = ErrNoCopies
		}
		answered = answered || acks[i] > 0 || out[i].Err != ErrNoCopies
	}
	if !answered && firstErr != nil {
		return nil, fmt.Errorf("coordinator: update: %w", firstErr)
	}
	if f := c.onWrite.Load(); f != nil {
		(*f)()
	}
	return out, nil
}

func (c *Coordinator) docShard(ctx context.Context, db, id string) (*actor.PID, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	return c.readCopy(ranges[RangeOf(ranges, id)]), nil
}

// GetDoc reads one doc. It asks every live copy of its shard and answers
// from the first r replies (r from ReadQuorum, default 1 on one copy, else
// n/2+1): the reply with the greatest winner is the answer, and copies that
// answered with less are repaired in the background with the winner's
// revision (new_edits=false), as CouchDB's read repair does.
func (c *Coordinator) GetDoc(ctx context.Context, db string, m *pb.GetDoc) (*pb.DocReply, error) {
	return c.GetDocR(ctx, db, m, 0)
}

// GetDocR is GetDoc with an explicit read quorum (0: default).
func (c *Coordinator) GetDocR(ctx context.Context, db string, m *pb.GetDoc, r int) (*pb.DocReply, error) {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	cps := c.copies(ranges[RangeOf(ranges, m.Id)])
	if len(cps) == 1 {
		reply, err := c.readDoc(ctx, cps[0], m)
		if err != nil {
			if pe, ok := err.(*pb.Error); ok {
				return nil, pe
			}
			return nil, fmt.Errorf("coordinator: get %q: %w", m.Id, err)
		}
		return reply, nil
	}
	if r < 1 {
		r = int(rec.N)/2 + 1
	}
	r = min(r, len(cps))
	// ask r copies (this node's first); each one that fails brings in the
	// next: a read costs r copies' work, not n. For the winner, only the
	// first copy sends the body; the others send the doc's rev tree, which
	// is all the comparison needs (a body crosses nodes only when another
	// copy is newer)
	plain := len(m.Revs) == 0 && !m.OpenRevsAll
	// replies arrive on one channel: no future, timer or goroutine per copy
	g := actors.NewGather(c.root, len(cps))
	defer g.Close()
	infoOnly := make([]bool, len(cps))
	outstanding := make([]bool, len(cps))
	ask := func(i int) {
		outstanding[i] = true
		infoOnly[i] = plain && i > 0
		if lr := c.localReader(cps[i]); lr != nil {
			// this node's copy: read here while the others' answers travel
			if infoOnly[i] {
				g.Put(i, lr.ReadDocInfos([]string{m.Id}))
			} else {
				g.Put(i, lr.ReadDoc(m))
			}
			return
		}
		if infoOnly[i] {
			g.Request(i, c.readPID(cps[i]), &pb.GetDocInfos{Ids: []string{m.Id}})
			return
		}
		g.Request(i, c.readPID(cps[i]), m)
	}
	// the other nodes' copies first: their round trip is the longer wait
	for i := r - 1; i >= 0; i-- {
		ask(i)
	}
	next, waiting := r, r
	var got []docAnswer
	var firstErr error
	// a copy on a node that died but is not yet seen down never answers:
	// past a short wait the remaining copies are asked too
	hedge := time.NewTimer(hedgeAfter)
	defer hedge.Stop()
	deadline := time.NewTimer(actors.Timeout(ctx))
	defer deadline.Stop()
	// a copy whose node is seen down while the read waits on it has
	// failed (a node that hangs with its connections open never answers)
	live := time.NewTicker(liveCheck)
	defer live.Stop()
wait:
	for waiting > 0 && len(got) < r {
		var a docAnswer
		select {
		case ans := <-g.C():
			outstanding[ans.Tag] = false
			a = docAnswerOf(cps[ans.Tag], infoOnly[ans.Tag], ans)
		case <-live.C:
			down := -1
			for i, o := range outstanding {
				if o && c.seenDown(cps[i]) {
					down = i
					break
				}
			}
			if down < 0 {
				continue
			}
			outstanding[down] = false
			a = docAnswer{ref: cps[down], err: errDown(cps[down])}
		case <-hedge.C:
			for ; next < len(cps); next++ {
				ask(next)
				waiting++
			}
			continue
		case <-deadline.C:
			if firstErr == nil {
				firstErr = context.DeadlineExceeded
			}
			break wait
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = ctx.Err()
			}
			break wait
		}
		waiting--
		if a.err != nil {
			if firstErr == nil {
				firstErr = a.err
			}
			if next < len(cps) {
				ask(next)
				next++
				waiting++
			}
			continue
		}
		got = append(got, a)
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("coordinator: get %q: %w", m.Id, firstErr)
	}
	bi := 0
	for i, a := range got[1:] {
		if newerInfo(a.reply.Info, got[bi].reply.Info) || (got[bi].infoOnly && !a.infoOnly && !newerInfo(got[bi].reply.Info, a.reply.Info)) {
			bi = i + 1
		}
	}
	best := got[bi].reply
	if got[bi].infoOnly && best.Info != nil {
		// the newest copy sent its tree only: its body now
		full, err := c.readDoc(ctx, got[bi].ref, m)
		if err != nil {
			return nil, fmt.Errorf("coordinator: get %q: %w", m.Id, err)
		}
		best = full
		got[bi].reply = full
	}
	// explicit revs: any copy that has a rev may answer for it
	if len(m.Revs) > 0 || m.OpenRevsAll {
		best = mergeBodies(best, got)
	}
	for _, a := range got {
		if a.reply != best && newerInfo(best.Info, a.reply.Info) {
			c.repair(db, a.ref, best)
		}
	}
	return best, nil
}

// newerInfo reports whether a's winner beats b's (CouchDB's winner order:
// live over deleted, then longer, then greater hash); nil loses.
func newerInfo(a, b *pb.FullDocInfo) bool {
	switch {
	case a == nil || len(a.Nodes) == 0:
		return false
	case b == nil || len(b.Nodes) == 0:
		return true
	case a.Winner == b.Winner:
		return len(a.Nodes) > len(b.Nodes)
	case a.Deleted != b.Deleted:
		return !a.Deleted
	}
	ra, _ := revtree.ParseRev(a.Winner)
	rb, _ := revtree.ParseRev(b.Winner)
	if ra.Pos != rb.Pos {
		return ra.Pos > rb.Pos
	}
	return ra.Hash > rb.Hash
}

// hedgeAfter is how long a read waits on the copies it asked before it
// asks the others as well.
const hedgeAfter = 250 * time.Millisecond

// docAnswerOf turns a copy's reply into a docAnswer: a rev tree alone
// when the copy was asked for its tree (infoOnly), else the doc.
func docAnswerOf(ref *pb.ShardRef, infoOnly bool, ans actors.Answer) docAnswer {
	a := docAnswer{ref: ref, infoOnly: infoOnly, err: ans.Err}
	if a.err != nil {
		return a
	}
	if !infoOnly {
		reply, ok := ans.Msg.(*pb.DocReply)
		switch {
		case !ok:
			a.err = fmt.Errorf("coordinator: unexpected reply %T", ans.Msg)
		case reply.Error != nil:
			a.err = reply.Error
		default:
			a.reply = reply
		}
		return a
	}
	reply, ok := ans.Msg.(*pb.DocInfosReply)
	switch {
	case !ok:
		a.err = fmt.Errorf("coordinator: unexpected reply %T", ans.Msg)
	case reply.Error != nil:
		a.err = reply.Error
	default:
		a.reply = &pb.DocReply{}
		if len(reply.Infos) == 1 && reply.Infos[0] != nil && len(reply.Infos[0].Nodes) > 0 {
			a.reply.Info = reply.Infos[0]
		}
	}
	return a
}

type docAnswer struct {
	ref   *pb.ShardRef
	reply *pb.DocReply
	err   error
	// infoOnly: the copy sent the doc's rev tree, not its body
	infoOnly bool
}

// mergeBodies answers each asked rev from any copy that has it.
func mergeBodies(best *pb.DocReply, got []docAnswer) *pb.DocReply {
	out := &pb.DocReply{Info: best.Info}
	for _, b := range best.Bodies {
		if b.Missing {
			for _, a := range got {
				for _, ob := range a.reply.Bodies {
					if ob.Rev == b.Rev && !ob.Missing {
						b = ob
					}
				}
			}
		}
		out.Bodies = append(out.Bodies, b)
	}
	return out
}

// repair sends the winning revision of a doc to a copy that lacks it.
// Attachment-carrying revisions are left to internal replication, which
// has the data at hand.
func (c *Coordinator) repair(db string, ref *pb.ShardRef, best *pb.DocReply) {
	info := best.Info
	if info == nil || len(best.Bodies) == 0 {
		return
	}
	body := best.Bodies[0]
	if body.Missing || body.Rev != info.Winner || len(body.Atts) > 0 {
		return
	}
	w, err := revtree.ParseRev(info.Winner)
	if err != nil {
		return
	}
	path := revtree.Path(info, revtree.Find(info, w))
	ids := make([]string, len(path))
	for i, p := range path {
		ids[i] = p.Hash
	}
	upd := &pb.DocUpdate{Id: info.Id, Body: body.Json, Deleted: body.Deleted,
		Revisions: &pb.Revisions{Start: w.Pos, Ids: ids}}
	c.root.Send(c.pl.PID(ref), &pb.UpdateDocs{Docs: []*pb.DocUpdate{upd}, NewEdits: false})
}

// GetAtt reads attachment data by digest from the shard holding doc id.
func (c *Coordinator) GetAtt(ctx context.Context, db, id, digest string) ([]byte, error) {
	pid, err := c.docShard(ctx, db, id)
	if err != nil {
		return nil, err
	}
	r, err := actors.Ask[*pb.AttReply](ctx, c.root, pid, &pb.GetAtt{Digest: digest})
	if err != nil {
		return nil, fmt.Errorf("coordinator: attachment: %w", err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return r.Data, nil
}

// GetDocInfos reads the rev trees of ids, grouped per shard; the result is
// parallel to ids, nil for a missing doc.
func (c *Coordinator) GetDocInfos(ctx context.Context, db string, ids []string) ([]*pb.FullDocInfo, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	per := make([][]int, len(ranges))
	for i, id := range ids {
		r := RangeOf(ranges, id)
		per[r] = append(per[r], i)
	}
	out := make([]*pb.FullDocInfo, len(ids))
	futures := make([]*actor.Future, len(ranges))
	to := actors.Timeout(ctx)
	for r, idx := range per {
		if len(idx) == 0 {
			continue
		}
		m := &pb.GetDocInfos{Ids: make([]string, len(idx))}
		for j, i := range idx {
			m.Ids[j] = ids[i]
		}
		futures[r] = c.root.RequestFuture(c.readCopy(ranges[r]), m, to)
	}
	for r, f := range futures {
		if f == nil {
			continue
		}
		res, err := actors.Await[*pb.DocInfosReply](ctx, f)
		if err != nil {
			return nil, fmt.Errorf("coordinator: doc infos: %w", err)
		}
		if res.Error != nil {
			return nil, res.Error
		}
		for j, i := range per[r] {
			if j < len(res.Infos) && res.Infos[j].GetId() != "" {
				out[i] = res.Infos[j]
			}
		}
	}
	return out, nil
}

// GetLocal reads a _local doc.
func (c *Coordinator) GetLocal(ctx context.Context, db, id string) (*pb.LocalDoc, error) {
	pid, err := c.docShard(ctx, db, id)
	if err != nil {
		return nil, err
	}
	r, err := actors.Ask[*pb.LocalReply](ctx, c.root, pid, &pb.GetLocal{Id: id})
	if err != nil {
		return nil, fmt.Errorf("coordinator: local: %w", err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return r.Doc, nil
}

// PutLocal writes (or deletes) a _local doc on every copy of its shard.
func (c *Coordinator) PutLocal(ctx context.Context, db string, m *pb.PutLocal) (string, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return "", err
	}
	var rev string
	var firstErr error
	for _, cp := range c.copies(ranges[RangeOf(ranges, m.Id)]) {
		r, err := actors.Ask[*pb.LocalReply](ctx, c.root, c.pl.PID(cp), m)
		switch {
		case err != nil:
			firstErr = err
		case r.Error != nil:
			return "", r.Error
		default:
			rev = r.Rev
		}
	}
	if rev == "" && firstErr != nil {
		return "", fmt.Errorf("coordinator: put local: %w", firstErr)
	}
	return rev, nil
}

// Info aggregates the shard headers of a database.
type Info struct {
	Record    *pb.DbRecord
	DocCount  uint64
	DelCount  uint64
	PurgeSeq  uint64
	UpdateSeq string
	External  int64
	Active    int64
	Meta      *pb.ShardMeta // of the first range: security, revs_limit
}

// DBInfo asks every range for its header.
func (c *Coordinator) DBInfo(ctx context.Context, db string) (*Info, error) {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	metas, err := c.quorumMetas(ctx, rec, ranges)
	if err != nil {
		return nil, err
	}
	info := &Info{Record: rec, Meta: metas[0].meta}
	seqs := make([]Pos, len(ranges))
	for i, ma := range metas {
		m := ma.meta
		info.DocCount += m.DocCount
		info.DelCount += m.DelCount
		info.PurgeSeq += m.PurgeSeq
		info.External += m.ExternalSize
		info.Active += m.ActiveSize
		seqs[i] = Pos{Node: ma.ref.Node, Seq: m.UpdateSeq}
	}
	info.UpdateSeq = EncodeSeq(ranges, seqs)
	return info, nil
}

// metaAt is a range's header and the copy it was read from.
type metaAt struct {
	meta *pb.ShardMeta
	ref  *pb.ShardRef
}

// quorumMetas reads each range's header from r of its live copies (n/2+1,
// this node's first; another for each that fails, all of them after
// hedgeAfter) and keeps the most advanced (highest update_seq). Since
// w+r > n, the counts then include every write acknowledged with the
// default quorum, which one copy per range could miss: a _bulk_docs
// answers 201 once two copies committed, and the third may be this
// node's, still committing.
func (c *Coordinator) quorumMetas(ctx context.Context, rec *pb.DbRecord, ranges []Range) ([]metaAt, error) {
	cps := make([][]*pb.ShardRef, len(ranges))
	stride := 1
	for i, r := range ranges {
		cps[i] = c.copies(r)
		stride = max(stride, len(cps[i]))
	}
	need := make([]int, len(ranges))    // answers still wanted
	next := make([]int, len(ranges))    // the next copy to ask
	waiting := make([]int, len(ranges)) // asks not yet answered
	out := make([]metaAt, len(ranges))
	outstanding := make([]bool, len(ranges)*stride) // by tag
	g := actors.NewGather(c.root, len(ranges)*stride)
	defer g.Close()
	ask := func(i int) {
		j := next[i]
		next[i]++
		waiting[i]++
		outstanding[i*stride+j] = true
		g.Request(i*stride+j, c.pl.PID(cps[i][j]), &pb.GetShardInfo{})
	}
	pending := len(ranges) // ranges still short of answers
	for i := range ranges {
		need[i] = min(int(rec.N)/2+1, len(cps[i]))
		for range need[i] {
			ask(i)
		}
	}
	hedge := time.NewTimer(hedgeAfter)
	defer hedge.Stop()
	deadline := time.NewTimer(actors.Timeout(ctx))
	defer deadline.Stop()
	// a copy whose node is seen down while we wait on it has failed (a
	// node that hangs with its connections open never answers)
	live := time.NewTicker(liveCheck)
	defer live.Stop()
	var firstErr error
	for pending > 0 {
		var a actors.Answer
		select {
		case a = <-g.C():
			if !outstanding[a.Tag] {
				continue // counted as failed already
			}
		case <-live.C:
			a.Tag = -1
			for tag, o := range outstanding {
				if ref := cps[tag/stride][tag%stride]; o && c.seenDown(ref) {
					a = actors.Answer{Tag: tag, Err: errDown(ref)}
					break
				}
			}
			if a.Tag < 0 {
				continue
			}
		case <-hedge.C:
			for i := range ranges {
				for need[i] > 0 && next[i] < len(cps[i]) {
					ask(i)
				}
			}
			continue
		case <-deadline.C:
			return nil, fmt.Errorf("coordinator: shard info: %w", context.DeadlineExceeded)
		case <-ctx.Done():
			return nil, fmt.Errorf("coordinator: shard info: %w", ctx.Err())
		}
		outstanding[a.Tag] = false
		i, j := a.Tag/stride, a.Tag%stride
		waiting[i]--
		if need[i] == 0 {
			continue // the range has its answers
		}
		err := a.Err
		si, ok := a.Msg.(*pb.ShardInfo)
		switch {
		case err != nil:
		case !ok:
			err = fmt.Errorf("coordinator: unexpected reply %T", a.Msg)
		case si.Error != nil:
			err = si.Error
		}
		if err == nil && (out[i].meta == nil || si.Meta.UpdateSeq > out[i].meta.UpdateSeq) {
			out[i] = metaAt{meta: si.Meta, ref: cps[i][j]}
		}
		switch {
		case err == nil:
			need[i]--
		case firstErr == nil:
			firstErr = err
		}
		if err != nil && next[i] < len(cps[i]) {
			ask(i) // another copy in its place
		}
		if need[i] == 0 || waiting[i] == 0 {
			if out[i].meta == nil {
				return nil, fmt.Errorf("coordinator: shard info: %w", firstErr)
			}
			need[i] = 0 // done, or fewer than r answered: the best of them
			pending--
		}
	}
	return out, nil
}

// shardMetas reads each range's header from the copy that serves its reads.
func (c *Coordinator) shardMetas(ctx context.Context, ranges []Range) ([]*pb.ShardMeta, error) {
	futures := make([]*actor.Future, len(ranges))
	to := actors.Timeout(ctx)
	for i, r := range ranges {
		futures[i] = c.root.RequestFuture(c.readCopy(r), &pb.GetShardInfo{}, to)
	}
	out := make([]*pb.ShardMeta, len(ranges))
	for i, f := range futures {
		si, err := actors.Await[*pb.ShardInfo](ctx, f)
		if err != nil {
			return nil, fmt.Errorf("coordinator: shard info: %w", err)
		}
		if si.Error != nil {
			return nil, si.Error
		}
		out[i] = si.Meta
	}
	return out, nil
}

// SetMeta writes db-wide settings (security, revs_limit) to every copy.
// The change is stamped with the time, so that a copy that misses it (its
// node is down) gets it later from another copy (intrepl), and an older
// change never undoes a newer one.
func (c *Coordinator) SetMeta(ctx context.Context, db string, m *pb.SetMeta) error {
	if m.Stamp == 0 {
		m = proto.Clone(m).(*pb.SetMeta)
		m.Stamp = time.Now().UnixNano()
	}
	_, err := askAll[*pb.MetaReply](ctx, c, db, m, "set meta")
	return err
}

// Flush waits until every write cast to the database's shards is synced.
func (c *Coordinator) Flush(ctx context.Context, db string) error {
	_, err := askAll[*pb.FlushReply](ctx, c, db, &pb.Flush{}, "flush")
	return err
}

// replyWithError is a shard answer that may carry a shard error.
type replyWithError interface{ GetError() *pb.Error }

// askAll sends msg to every live copy of every range of db, all before
// awaiting any, and returns their answers; the first failure or shard
// error ends it.
func askAll[T replyWithError](ctx context.Context, c *Coordinator, db string, msg any, what string) ([]T, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	var futures []*actor.Future
	to := actors.Timeout(ctx)
	for _, r := range ranges {
		for _, cp := range c.copies(r) {
			futures = append(futures, c.root.RequestFuture(c.pl.PID(cp), msg, to))
		}
	}
	out := make([]T, 0, len(futures))
	for _, f := range futures {
		r, err := actors.Await[T](ctx, f)
		if err != nil {
			return nil, fmt.Errorf("coordinator: %s: %w", what, err)
		}
		if e := r.GetError(); e != nil {
			return nil, e
		}
		out = append(out, r)
	}
	return out, nil
}
