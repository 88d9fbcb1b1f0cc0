package node

import (
	"context"
	"errors"

	"github.com/settee/settee/httpgw"
	"github.com/settee/settee/replicator"
)

// startReplicator starts the replication scheduler: it watches _replicator
// and serves /_replicate and /_scheduler through httpgw's interface.
func (n *Node) startReplicator() {
	n.rep = replicator.Start(replicator.Config{
		System:     n.sys,
		Coord:      n.coord,
		ServerUUID: n.uuid,
		NodeName:   n.cfg.Name,
		Tasks:      n.tasks,
		Log:        n.log.With("src", "replicator"),
		Create:     n.createForReplicator,
	})
}

// createForReplicator creates a target database (create_target) with the
// node's defaults; an existing one is fine. It goes through an interface
// so it builds against CreateDB both before and after the cluster work
// changed its signature (q, n copies, accepted); simplify once that lands.
func (n *Node) createForReplicator(ctx context.Context, name string) error {
	var err error
	switch c := any(n).(type) {
	case interface {
		CreateDB(context.Context, string, int, int) (bool, error)
	}:
		_, err = c.CreateDB(ctx, name, 0, 0)
	case interface {
		CreateDB(context.Context, string, int) error
	}:
		err = c.CreateDB(ctx, name, 0)
	default:
		err = errors.New("node: cannot create databases")
	}
	if errors.Is(err, httpgw.ErrDBExists) {
		return nil
	}
	return err
}
