package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

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

// DBInfo sums the headers of every range, each read from r of its copies
// (see quorumMetas).
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
// node's, still committing. A range that ends with fewer than r answers
// (its other copies failed) gives the best of those; one with none, or
// the deadline, fails the read.
func (c *Coordinator) quorumMetas(ctx context.Context, rec *pb.DbRecord, ranges []Range) ([]metaAt, error) {
	wants := make([]want, len(ranges))
	for i, r := range ranges {
		cps := c.copies(r)
		wants[i] = want{copies: cps, need: int(rec.N)/2 + 1}
	}
	out := make([]metaAt, len(ranges))
	q := &quorum{c: c, wants: wants, hedge: true}
	q.ask = func(q *quorum, g, i int) { q.request(g, i, c.pl.PID(wants[g].copies[i]), &pb.GetShardInfo{}) }
	err := q.wait(ctx, func(a answer) error {
		si, ok := a.msg.(*pb.ShardInfo)
		switch {
		case !ok:
			return fmt.Errorf("coordinator: unexpected reply %T", a.msg)
		case si.Error != nil:
			return si.Error
		}
		if m := out[a.group].meta; m == nil || si.Meta.UpdateSeq > m.UpdateSeq {
			out[a.group] = metaAt{meta: si.Meta, ref: a.ref}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator: shard info: %w", err)
	}
	for _, m := range out {
		if m.meta == nil {
			return nil, fmt.Errorf("coordinator: shard info: %w", q.failure())
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
