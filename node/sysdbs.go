package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/coordinator"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/storage"
)

// The system databases _users, _replicator and _global_changes are clustered like any other,
// with one difference: every node creates them on its first start, before
// it knows any peer, and a node that joins a cluster must end up with the
// cluster's, its own docs merged in rather than dropped. So their first
// incarnation has a fixed uuid and stamp on every node, and two records of
// it are merged rather than ordered: the copies are the union of both
// (minus removed nodes), each node adds itself and every member it knows,
// and internal replication then merges the copies' docs as it does for any
// range (conflicts kept). A deleted system database is final like any
// other; re-creating it makes an ordinary incarnation.

// systemDBs are created on a node's first start.
var systemDBs = []string{"_users", "_replicator", globalChangesName}

const systemUUIDPrefix = "system-"

// systemIncarnation reports whether rec is the first, shared incarnation of
// a system database (merged, not ordered, across nodes).
func systemIncarnation(rec *pb.DbRecord) bool { return strings.HasPrefix(rec.Uuid, systemUUIDPrefix) }

// ensureSystemDBs creates the system databases this node has never seen.
// A tombstone is respected in a cluster (a peer may hold a newer
// incarnation); a single node re-creates a deleted one, as CouchDB does.
func (n *Node) ensureSystemDBs(ctx context.Context, clustered bool) error {
	for _, name := range systemDBs {
		rec := n.cat.record(name)
		switch {
		case rec == nil:
			in := &pb.DbRecord{Name: name, Q: 1, N: 1, CreatedUs: 1, Uuid: systemUUIDPrefix + name,
				Shards: []*pb.ShardRef{{Db: name, RangeBegin: 0, RangeEnd: ^uint32(0), Node: n.cfg.Name}}}
			if _, err := n.cat.Apply(in); err != nil {
				return err
			}
		case rec.Deleted && !clustered:
			if _, err := n.cat.Create(ctx, name, 1, nil, 1, nil, false); err != nil && !errors.Is(err, ErrDBExists) {
				return err
			}
		}
	}
	return nil
}

// placeSystemDBs gives every member a copy of the shared system databases
// (and takes removed nodes' copies out); the anti-entropy push spreads the
// result. It runs on every anti-entropy tick: cheap when nothing changed.
func (n *Node) placeSystemDBs() {
	snap := n.snapshot()
	for _, name := range systemDBs {
		rec := n.cat.record(name)
		if rec == nil || rec.Deleted || !systemIncarnation(rec) {
			continue
		}
		want := proto.Clone(rec).(*pb.DbRecord)
		for _, m := range snap.members {
			for _, r := range splitBy(rec) {
				want.Shards = append(want.Shards, &pb.ShardRef{Db: name, RangeBegin: r[0], RangeEnd: r[1], Node: m})
			}
		}
		if _, err := n.cat.Apply(want); err != nil {
			n.log.Error("placing system database", "db", name, "err", err)
		}
	}
}

// splitBy lists a record's ranges.
func splitBy(rec *pb.DbRecord) [][2]uint32 {
	var out [][2]uint32
	for _, s := range rec.Shards {
		if len(out) == 0 || out[len(out)-1][0] != s.RangeBegin {
			out = append(out, [2]uint32{s.RangeBegin, s.RangeEnd})
		}
	}
	return out
}

// mergeCopies is the placement of two records of one shared incarnation:
// the union of their copies, without removed nodes' (unless that would
// leave a range with none), sorted by range then node. It reports whether
// it differs from cur.
func mergeCopies(cur, in *pb.DbRecord, removed map[string]bool) (*pb.DbRecord, bool) {
	type key struct {
		begin uint32
		node  string
	}
	seen := map[key]bool{}
	var all []*pb.ShardRef
	for _, s := range append(slices.Clone(cur.Shards), in.Shards...) {
		k := key{s.RangeBegin, s.Node}
		if !seen[k] {
			seen[k] = true
			all = append(all, &pb.ShardRef{Db: s.Db, RangeBegin: s.RangeBegin, RangeEnd: s.RangeEnd, Node: s.Node})
		}
	}
	kept := all[:0:0]
	for _, s := range all {
		if !removed[s.Node] {
			kept = append(kept, s)
		}
	}
	for _, r := range splitBy(cur) {
		if !slices.ContainsFunc(kept, func(s *pb.ShardRef) bool { return s.RangeBegin == r[0] }) {
			for _, s := range all {
				if s.RangeBegin == r[0] {
					kept = append(kept, s)
				}
			}
		}
	}
	slices.SortFunc(kept, func(a, b *pb.ShardRef) int {
		return cmp.Or(cmp.Compare(a.RangeBegin, b.RangeBegin), strings.Compare(a.Node, b.Node))
	})
	out := proto.Clone(cur).(*pb.DbRecord)
	out.Shards = kept
	per := map[uint32]uint32{}
	for _, s := range kept {
		per[s.RangeBegin]++
	}
	out.N = 0
	for _, c := range per {
		out.N = max(out.N, c)
	}
	if len(kept) != len(cur.Shards) {
		return out, true
	}
	for i, s := range kept {
		if s.RangeBegin != cur.Shards[i].RangeBegin || s.Node != cur.Shards[i].Node {
			return out, true
		}
	}
	return out, false
}

// replace installs a new placement of the current incarnation: copies here
// that stay keep their handle and data, new ones here are created (in the
// same synced transaction as the record), ones no longer here are dropped.
// Callers hold createMu.
func (c *catalog) replace(cur, rec *pb.DbRecord) (bool, error) {
	had := map[uint32]uint32{} // range begin -> handle of the copy here
	for _, s := range cur.Shards {
		if s.Node == c.node {
			had[s.RangeBegin] = s.Handle
		}
	}
	var fresh []*pb.ShardRef
	stays := map[uint32]bool{}
	for _, ref := range rec.Shards {
		ref.Handle = 0
		if ref.Node != c.node {
			continue
		}
		if h, ok := had[ref.RangeBegin]; ok {
			ref.Handle = h
			stays[h] = true
			continue
		}
		fresh = append(fresh, ref)
	}
	var drop []uint32
	for _, h := range had {
		if !stays[h] {
			drop = append(drop, h)
		}
	}
	err := storage.Update(c.db, func(txn *badger.Txn) error { return writeRecord(txn, rec, fresh, drop, DefaultSecurity) })
	if err != nil {
		return false, fmt.Errorf("node: place %s: %w", rec.Name, err)
	}
	if err := c.switchTo(rec, drop, fresh); err != nil {
		return true, err
	}
	nodes := make([]string, 0, len(rec.Shards))
	for _, s := range rec.Shards {
		nodes = append(nodes, s.Node)
	}
	c.log.Info("database placement changed", "db", rec.Name, "n", rec.N, "copies", nodes)
	return true, nil
}

// ensureUsersDesign writes _users/_design/_auth (the user doc rules) when
// this node's copy lacks it, as CouchDB creates it with the database. The
// rev is fixed, so every node writes the same one and none conflicts; a
// design doc an admin has since edited or deleted is left as it is.
func (n *Node) ensureUsersDesign(ctx context.Context) error {
	body, rev := auth.UsersDesignDoc()
	got, err := n.coord.GetDocR(ctx, "_users", &pb.GetDoc{Id: auth.UsersDesignID}, 1)
	if err == nil && got.Info != nil {
		return nil
	}
	if err != nil && !errors.Is(err, coordinator.ErrNotFound) {
		if errors.Is(err, coordinator.ErrDBNotFound) {
			return nil // deleted in a cluster: not ours to re-create
		}
		return err
	}
	out, err := n.coord.UpdateDocs(ctx, "_users", []*pb.DocUpdate{{Id: auth.UsersDesignID, Body: body, Rev: rev}}, false, 1)
	if err != nil {
		return err
	}
	if out[0].Err != nil {
		return out[0].Err
	}
	return nil
}
