package coordinator

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// GetDoc reads one doc with the default read quorum: one copy when its
// range has one, else n/2+1 (see GetDocR).
func (c *Coordinator) GetDoc(ctx context.Context, db string, m *pb.GetDoc) (*pb.DocReply, error) {
	return c.GetDocR(ctx, db, m, 0)
}

// GetDocR reads one doc from r copies of its shard (0: n/2+1; at most the
// live copies). The reply with the greatest winner is the answer, and
// copies that answered with less are repaired in the background with the
// winner's revision (new_edits=false), as CouchDB's read repair does.
// When the deadline passes with fewer than r answers, it answers from
// those it has.
func (c *Coordinator) GetDocR(ctx context.Context, db string, m *pb.GetDoc, r int) (*pb.DocReply, error) {
	reply, _, err := c.GetDocInto(ctx, db, m, r, nil)
	return reply, err
}

// GetDocInto is GetDocR with a buffer for the answer: a doc asked
// rendered (m.Render) that is read from this node's only copy of its
// range is appended to buf, with room after it (DocReply.Rendered is
// that part of it), and the grown buf is returned, the caller's to reuse
// once it is done with the reply. A doc read from another node or from
// several copies comes in a reply of its own, and buf comes back as it
// went in. A gateway answering many GETs keeps a few such buffers
// instead of allocating and zeroing a doc-sized one per GET.
func (c *Coordinator) GetDocInto(ctx context.Context, db string, m *pb.GetDoc, r int, buf []byte) (*pb.DocReply, []byte, error) {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, buf, err
	}
	cps := c.copies(ranges[RangeOf(ranges, m.Id)])
	if len(cps) == 1 {
		reply, grown, err := c.readDocInto(ctx, cps[0], m, buf)
		if err != nil {
			return nil, buf, fmt.Errorf("coordinator: get %q: %w", m.Id, err)
		}
		return reply, grown, nil
	}
	reply, err := c.getDocQuorum(ctx, db, rec, cps, m, r)
	return reply, buf, err
}

// getDocQuorum reads m from r of cps, the copies of its range (GetDocR).
func (c *Coordinator) getDocQuorum(ctx context.Context, db string, rec *pb.DbRecord, cps []*pb.ShardRef, m *pb.GetDoc, r int) (*pb.DocReply, error) {
	var err error
	if r < 1 {
		r = int(rec.N)/2 + 1
	}
	// r copies are asked (this node's first), each one that fails brings
	// in the next, and the rest come in after hedgeAfter: a read costs r
	// copies' work, not n. Only the first copy sends the body; the others
	// send the doc's rev tree, which is all the comparison needs (a body
	// crosses nodes only when another copy is newer)
	plain := len(m.Revs) == 0 && !m.OpenRevsAll
	infoOnly := make([]bool, len(cps))
	var got []docAnswer
	q := &quorum{c: c, wants: []want{{copies: cps, need: r}}, hedge: true}
	q.ask = func(q *quorum, g, i int) {
		infoOnly[i] = plain && i > 0
		if lr := c.localReader(cps[i]); lr != nil {
			// this node's copy: read here while the others' answers travel
			if infoOnly[i] {
				q.put(g, i, lr.ReadDocInfos([]string{m.Id}))
			} else {
				d, _ := lr.ReadDoc(m, nil)
				q.put(g, i, d)
			}
			return
		}
		if infoOnly[i] {
			q.request(g, i, c.readPID(cps[i]), &pb.GetDocInfos{Ids: []string{m.Id}})
			return
		}
		q.request(g, i, c.readPID(cps[i]), m)
	}
	err = q.wait(ctx, func(a answer) error {
		d := docAnswerOf(a.ref, infoOnly[a.copy], a.msg)
		if d.err == nil {
			got = append(got, d)
		}
		return d.err
	})
	if len(got) == 0 {
		if f := q.failure(); f != nil {
			err = f
		}
		return nil, fmt.Errorf("coordinator: get %q: %w", m.Id, err)
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
	var with *pb.DocReply // what stale copies are repaired with
	for _, a := range got {
		if a.reply == best || !newerInfo(best.Info, a.reply.Info) {
			continue
		}
		if with == nil {
			with = best
			if m.Render {
				// a rendered answer has no body JSON to repair with:
				// the winner's body is read as stored (copies differ
				// rarely, so this read is rare too)
				plain := &pb.GetDoc{Id: m.Id}
				if with, err = c.readDoc(ctx, got[bi].ref, plain); err != nil {
					break
				}
			}
		}
		c.repair(db, a.ref, with)
	}
	return best, nil
}

// readDoc reads m from one copy: on this goroutine when the copy is here.
func (c *Coordinator) readDoc(ctx context.Context, ref *pb.ShardRef, m *pb.GetDoc) (*pb.DocReply, error) {
	reply, _, err := c.readDocInto(ctx, ref, m, nil)
	return reply, err
}

// readDocInto is readDoc rendering into buf when the copy is here
// (LocalReader.ReadDoc); it returns the grown buf, or buf as it was.
func (c *Coordinator) readDocInto(ctx context.Context, ref *pb.ShardRef, m *pb.GetDoc, buf []byte) (*pb.DocReply, []byte, error) {
	var reply *pb.DocReply
	if lr := c.localReader(ref); lr != nil {
		reply, buf = lr.ReadDoc(m, buf)
	} else {
		var err error
		if reply, err = actors.Ask[*pb.DocReply](ctx, c.root, c.readPID(ref), m); err != nil {
			return nil, buf, err
		}
	}
	if reply.Error != nil {
		return nil, buf, reply.Error
	}
	return reply, buf, nil
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

type docAnswer struct {
	ref   *pb.ShardRef
	reply *pb.DocReply
	err   error
	// infoOnly: the copy sent the doc's rev tree, not its body
	infoOnly bool
}

// docAnswerOf turns a copy's reply into a docAnswer: a rev tree alone
// when the copy was asked for its tree (infoOnly), else the doc.
func docAnswerOf(ref *pb.ShardRef, infoOnly bool, msg any) docAnswer {
	a := docAnswer{ref: ref, infoOnly: infoOnly}
	if !infoOnly {
		reply, ok := msg.(*pb.DocReply)
		switch {
		case !ok:
			a.err = fmt.Errorf("coordinator: unexpected reply %T", msg)
		case reply.Error != nil:
			a.err = reply.Error
		default:
			a.reply = reply
		}
		return a
	}
	reply, ok := msg.(*pb.DocInfosReply)
	switch {
	case !ok:
		a.err = fmt.Errorf("coordinator: unexpected reply %T", msg)
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
	if body.Json == nil && best.Rendered != nil {
		// a rendered read's answer: its body is not there to send
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

// GetAtt reads the data of attachment a (a record of a revision of doc
// id) from a copy of the shard holding the doc: by the SHA-256 of its
// bytes the record names, or by its digest for a record an older settee
// wrote (see shard's attKey).
func (c *Coordinator) GetAtt(ctx context.Context, db, id string, a *pb.AttMeta) ([]byte, error) {
	pid, err := c.docShard(ctx, db, id)
	if err != nil {
		return nil, err
	}
	r, err := actors.Ask[*pb.AttReply](ctx, c.root, pid, &pb.GetAtt{Digest: a.Digest, Sha256: a.Sha256})
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
