package coordinator

import (
	"context"
	"fmt"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

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
