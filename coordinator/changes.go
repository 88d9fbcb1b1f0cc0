package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// ChangesQuery selects a _changes read.
type ChangesQuery struct {
	Since       string // opaque; "now" handled by the caller via Now
	Descending  bool
	Limit       int // < 0: none
	IncludeDocs bool
	// Filter, when set, drops rows; dropped rows still advance the sequence.
	Filter func(*pb.FullDocInfo) bool
}

// ChangeRow is one row of a changes feed.
type ChangeRow struct {
	Seq  string
	Info *pb.FullDocInfo
	Json []byte
	Atts []*pb.AttMeta
}

type seqCursor struct {
	pid  *actor.PID
	q    *pb.ReadChanges
	rows []*pb.Row
	done bool
}

func (cu *seqCursor) fill(ctx context.Context, root *actor.RootContext) error {
	for len(cu.rows) == 0 && !cu.done {
		r, err := actors.Ask[*pb.ChangesReply](ctx, root, cu.pid, cu.q)
		if err != nil {
			return fmt.Errorf("coordinator: changes: %w", err)
		}
		if r.Error != nil {
			return r.Error
		}
		cu.rows = r.Rows
		cu.done = !r.More
		if n := len(r.Rows); n > 0 {
			s := r.Rows[n-1].Info.Seq
			if cu.q.Descending {
				cu.q.Before = s
			} else {
				cu.q.Since = s
			}
		}
	}
	return nil
}

// Changes streams the changes of a database after since, merged across
// shards: each row carries the clustered sequence that resumes after it.
// It returns the last sequence (CouchDB's last_seq).
func (c *Coordinator) Changes(ctx context.Context, db string, q ChangesQuery, emit func(*ChangeRow) error) (string, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return "", err
	}
	pos, err := DecodeSeq(ranges, q.Since)
	if err != nil {
		return "", err
	}
	refs, vec := c.resolve(ranges, pos)
	nodes := refNodes(refs)
	if q.Descending {
		metas, err := c.shardMetas(ctx, ranges)
		if err != nil {
			return "", err
		}
		for i, m := range metas {
			vec[i] = m.UpdateSeq
		}
	}
	page := uint32(1000)
	curs := make([]*seqCursor, len(ranges))
	for i := range ranges {
		rq := &pb.ReadChanges{Since: vec[i], Descending: q.Descending, IncludeDocs: q.IncludeDocs, Limit: page}
		if q.Descending {
			rq.Since, rq.Before = 0, vec[i]+1
		}
		curs[i] = &seqCursor{pid: c.pl.PID(refs[i]), q: rq}
	}
	sent := 0
	lastRow := ""
	for q.Limit < 0 || sent < q.Limit {
		best := -1
		for i, cu := range curs {
			if err := cu.fill(ctx, c.root); err != nil {
				return "", err
			}
			if len(cu.rows) == 0 {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			a, b := cu.rows[0].Info.Seq, curs[best].rows[0].Info.Seq
			if (!q.Descending && a < b) || (q.Descending && a > b) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		row := curs[best].rows[0]
		curs[best].rows = curs[best].rows[1:]
		seqVec := vec
		if q.Descending {
			// a descending row's seq is its own position; the vector
			// then stands just below it for that shard
			seqVec = append([]uint64(nil), vec...)
			seqVec[best] = row.Info.Seq
			vec[best] = row.Info.Seq - 1
		} else {
			vec[best] = row.Info.Seq
		}
		if q.Filter != nil && !q.Filter(row.Info) {
			continue
		}
		cr := &ChangeRow{Seq: EncodeSeq(ranges, seqsAt(nodes, seqVec)), Info: row.Info, Json: row.Json, Atts: row.Atts}
		if err := emit(cr); err != nil {
			return "", err
		}
		lastRow = cr.Seq
		sent++
	}
	if q.Descending {
		// CouchDB: a descending feed's last_seq is its oldest row's seq
		if lastRow != "" {
			return lastRow, nil
		}
		return EncodeSeq(ranges, seqsAt(nodes, vec)), nil
	}
	return EncodeSeq(ranges, seqsAt(nodes, vec)), nil
}

// Now returns the current sequence of a database (since=now).
func (c *Coordinator) Now(ctx context.Context, db string) (string, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return "", err
	}
	metas, err := c.shardMetas(ctx, ranges)
	if err != nil {
		return "", err
	}
	seqs := make([]Pos, len(ranges))
	for i, m := range metas {
		seqs[i] = Pos{Node: c.readRef(ranges[i]).Node, Seq: m.UpdateSeq}
	}
	return EncodeSeq(ranges, seqs), nil
}

// Wait blocks until some shard of db has a change after since, ctx ends,
// or timeout passes. It reports whether a change arrived.
func (c *Coordinator) Wait(ctx context.Context, db, since string, timeout time.Duration) (bool, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return false, err
	}
	pos, err := DecodeSeq(ranges, since)
	if err != nil {
		return false, err
	}
	refs, vec := c.resolve(ranges, pos)
	got := make(chan struct{}, len(ranges))
	for i := range ranges {
		f := c.root.RequestFuture(c.pl.PID(refs[i]), &pb.WaitChange{Since: vec[i], TimeoutMs: uint32(timeout / time.Millisecond)}, timeout)
		go func() {
			if _, err := f.Result(); err == nil {
				got <- struct{}{}
			}
		}()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-got:
		return true, nil
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// PendingAfter counts the changes after since across all shards.
func (c *Coordinator) PendingAfter(ctx context.Context, db, since string) (uint64, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return 0, err
	}
	pos, err := DecodeSeq(ranges, since)
	if err != nil {
		return 0, err
	}
	refs, vec := c.resolve(ranges, pos)
	var n uint64
	for i := range ranges {
		cnt, err := actors.Ask[*pb.Count](ctx, c.root, c.pl.PID(refs[i]), &pb.CountChanges{Since: vec[i]})
		if err != nil {
			return 0, fmt.Errorf("coordinator: pending: %w", err)
		}
		if cnt.Error != nil {
			return 0, cnt.Error
		}
		n += cnt.N
	}
	return n, nil
}

// resolve picks, for each range, the copy to read changes from and where
// to start in it: the copy the sequence came from when its node is up;
// otherwise another live copy from its beginning, because one copy's
// sequence numbers mean nothing in another (the feed then repeats some
// changes, which CouchDB's clients accept, rather than skipping any).
func (c *Coordinator) resolve(ranges []Range, pos []Pos) ([]*pb.ShardRef, []uint64) {
	refs := make([]*pb.ShardRef, len(ranges))
	seqs := make([]uint64, len(ranges))
	for i, r := range ranges {
		p := pos[i]
		if p.Node != "" {
			for _, cp := range r.Copies {
				if cp.Node == p.Node && c.pl.Alive(cp.Node) {
					refs[i], seqs[i] = cp, p.Seq
				}
			}
		}
		if refs[i] == nil {
			refs[i] = c.readRef(r)
			if p.Node == "" || p.Node == refs[i].Node {
				seqs[i] = p.Seq
			}
		}
	}
	return refs, seqs
}

func refNodes(refs []*pb.ShardRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Node
	}
	return out
}
