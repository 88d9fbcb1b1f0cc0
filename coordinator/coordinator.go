package coordinator

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// Coordinator runs requests against a node's view of the cluster.
type Coordinator struct {
	root *actor.RootContext
	pl   Placement
}

// New returns a coordinator sending through root.
func New(root *actor.RootContext, pl Placement) *Coordinator {
	return &Coordinator{root: root, pl: pl}
}

func (c *Coordinator) lookup(ctx context.Context, db string) (*pb.DbRecord, []Range, error) {
	rec, err := c.pl.Lookup(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return rec, Ranges(rec), nil
}

// readCopy picks the copy of a range that serves a read.
func (c *Coordinator) readCopy(r Range) *actor.PID { return c.pl.PID(r.Copies[0]) }

// Outcome is the coordinator's answer for one doc of a write.
type Outcome struct {
	Rev string
	Err *pb.Error
	// Accepted is set when fewer than w copies acknowledged (HTTP 202).
	Accepted bool
}

// UpdateDocs writes docs (tagged 0..n-1 by the caller) to their shards:
// one UpdateDocs message per shard copy, all sent before waiting on any.
// Results come back by tag; with new_edits=false a doc whose rev is already
// known has no result and gets a zero Outcome.
func (c *Coordinator) UpdateDocs(ctx context.Context, db string, docs []*pb.DocUpdate, newEdits bool, w int) ([]Outcome, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	per := make([][]*pb.DocUpdate, len(ranges))
	for _, d := range docs {
		i := RangeOf(ranges, d.Id)
		per[i] = append(per[i], d)
	}
	type sent struct {
		f     *actor.Future
		rng   int
		count int
	}
	var futures []sent
	to := actors.Timeout(ctx)
	for i, ds := range per {
		if len(ds) == 0 {
			continue
		}
		for _, cp := range ranges[i].Copies {
			msg := &pb.UpdateDocs{Docs: ds, NewEdits: newEdits, Reply: true}
			futures = append(futures, sent{f: c.root.RequestFuture(c.pl.PID(cp), msg, to), rng: i})
		}
	}
	out := make([]Outcome, len(docs))
	acks := make([]int, len(docs))
	var firstErr error
	for _, s := range futures {
		res, err := actors.Await[*pb.UpdateResult](ctx, s.f)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, r := range res.Results {
			if int(r.Tag) >= len(out) {
				continue
			}
			if r.Error != nil {
				if out[r.Tag].Rev == "" {
					out[r.Tag].Err = r.Error
				}
				continue
			}
			acks[r.Tag]++
			out[r.Tag].Rev = r.Rev
			out[r.Tag].Err = nil
		}
	}
	if firstErr != nil && len(futures) > 0 {
		answered := false
		for i := range out {
			if acks[i] > 0 || out[i].Err != nil {
				answered = true
				break
			}
		}
		if !answered && newEdits {
			return nil, fmt.Errorf("coordinator: update: %w", firstErr)
		}
	}
	if w < 1 {
		w = 1
	}
	for i := range out {
		if out[i].Rev != "" && acks[i] < w {
			out[i].Accepted = true
		}
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

// GetDoc reads one doc from the shard that holds it.
func (c *Coordinator) GetDoc(ctx context.Context, db string, m *pb.GetDoc) (*pb.DocReply, error) {
	pid, err := c.docShard(ctx, db, m.Id)
	if err != nil {
		return nil, err
	}
	r, err := actors.Ask[*pb.DocReply](ctx, c.root, pid, m)
	if err != nil {
		return nil, fmt.Errorf("coordinator: get %q: %w", m.Id, err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return r, nil
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
	for _, cp := range ranges[RangeOf(ranges, m.Id)].Copies {
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
	metas, err := c.shardMetas(ctx, ranges)
	if err != nil {
		return nil, err
	}
	info := &Info{Record: rec, Meta: metas[0]}
	seqs := make([]uint64, len(ranges))
	for i, m := range metas {
		info.DocCount += m.DocCount
		info.DelCount += m.DelCount
		info.PurgeSeq += m.PurgeSeq
		info.External += m.ExternalSize
		info.Active += m.ActiveSize
		seqs[i] = m.UpdateSeq
	}
	info.UpdateSeq = EncodeSeq(ranges, seqs)
	return info, nil
}

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
func (c *Coordinator) SetMeta(ctx context.Context, db string, m *pb.SetMeta) error {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return err
	}
	var futures []*actor.Future
	to := actors.Timeout(ctx)
	for _, r := range ranges {
		for _, cp := range r.Copies {
			futures = append(futures, c.root.RequestFuture(c.pl.PID(cp), m, to))
		}
	}
	for _, f := range futures {
		r, err := actors.Await[*pb.MetaReply](ctx, f)
		if err != nil {
			return fmt.Errorf("coordinator: set meta: %w", err)
		}
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

// Flush waits until every write cast to the database's shards is synced.
func (c *Coordinator) Flush(ctx context.Context, db string) error {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		for _, cp := range r.Copies {
			fr, err := actors.Ask[*pb.FlushReply](ctx, c.root, c.pl.PID(cp), &pb.Flush{})
			if err != nil {
				return fmt.Errorf("coordinator: flush: %w", err)
			}
			if fr.Error != nil {
				return fr.Error
			}
		}
	}
	return nil
}
