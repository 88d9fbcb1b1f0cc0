package coordinator

import (
	"context"
	"fmt"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/shard"
)

// Outcome is the coordinator's answer for one doc of a write.
type Outcome struct {
	Rev string
	Err *pb.Error
	// Accepted is set when fewer than w copies acknowledged (HTTP 202).
	Accepted bool
}

// UpdateDocs writes docs (tagged 0..n-1 by the caller) to every live copy
// of their shards: one UpdateDocs message per copy, all sent before waiting
// on any. It returns as soon as every doc has w acknowledgements (the other
// copies still apply the write), or when all copies answered, failed or
// timed out. Results come back by tag; with new_edits=false every merged
// doc is acknowledged too. A doc acknowledged by fewer than w copies but at
// least one is Accepted (HTTP 202); by none, it carries the copies' error,
// or ErrNoCopies when no copy answered for it.
func (c *Coordinator) UpdateDocs(ctx context.Context, db string, docs []*pb.DocUpdate, newEdits bool, w int) ([]Outcome, error) {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	if w < 1 {
		w = int(rec.N)/2 + 1
	}
	if rec.Partitioned {
		// every writer's check (the gateway's answers first, with its
		// own order of errors): a doc of no partition would be placed
		// by its whole id and found by no partition query
		for _, d := range docs {
			if e := shard.CheckPartitionedID(d.Id); e != nil {
				return nil, e
			}
		}
	}
	per := make([][]*pb.DocUpdate, len(ranges))
	for _, d := range docs {
		i := RangeOf(ranges, d.Id)
		per[i] = append(per[i], d)
	}
	var refs []*pb.ShardRef // every copy written, of every range
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
	out := make([]Outcome, len(docs))
	acks := make([]int, len(docs))
	done := 0 // docs with w acks
	// one group of every copy, all wanted: the wait ends when each copy
	// answered or failed, or earlier when every doc has its w acks
	q := &quorum{c: c, wants: []want{{copies: refs, need: len(refs)}}}
	q.ask = func(q *quorum, g, i int) { q.request(g, i, c.pl.PID(refs[i]), batches[i]) }
	err = q.wait(ctx, func(a answer) error {
		res, ok := a.msg.(*pb.UpdateResult)
		if !ok {
			return fmt.Errorf("coordinator: unexpected reply %T", a.msg)
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
		if done == len(docs) {
			q.stop()
		}
		return nil
	})
	if f := q.failure(); f != nil {
		err = f
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
	if !answered && err != nil {
		return nil, fmt.Errorf("coordinator: update: %w", err)
	}
	if f := c.onWrite.Load(); f != nil {
		(*f)()
	}
	return out, nil
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

// CheckPartitionedIDs refuses, in a partitioned database, an id that no
// partitioned doc can have (shard.CheckPartitionedID); nil in another
// database.
func (c *Coordinator) CheckPartitionedIDs(ctx context.Context, db string, ids []string) error {
	rec, err := c.pl.Lookup(ctx, db)
	if err != nil || !rec.Partitioned {
		return err
	}
	for _, id := range ids {
		if e := shard.CheckPartitionedID(id); e != nil {
			return e
		}
	}
	return nil
}
