package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// Compact asks every copy of every shard of db to compact. It returns true
// when every copy was compacting already (the request changed nothing).
func (c *Coordinator) Compact(ctx context.Context, db string) (alreadyRunning bool, err error) {
	replies, err := askAll[*pb.CompactStarted](ctx, c, db, &pb.CompactShard{}, "compact")
	if err != nil {
		return false, err
	}
	already := true
	for _, r := range replies {
		already = already && r.AlreadyRunning
	}
	return already, nil
}

// DiskInfo is a database's sizes and compaction state over its copies.
type DiskInfo struct {
	FileSize         int64 // bytes on disk, every copy on every node
	ActiveSize       int64 // live bytes, every copy
	CompactRunning   bool  // some copy is compacting
	PurgedInfosLimit uint64
	// IndexFile is the bytes of the database's indexes on every copy,
	// IndexActive on one copy of each range (the largest), as ActiveSize
	// counts the docs
	IndexFile, IndexActive int64
}

// DiskInfo asks every copy of db for its disk figures.
func (c *Coordinator) DiskInfo(ctx context.Context, db string) (*DiskInfo, error) {
	replies, rng, err := askAllRanges[*pb.DiskInfo](ctx, c, db, &pb.GetDiskInfo{}, "disk info")
	if err != nil {
		return nil, err
	}
	out := &DiskInfo{}
	perRange := map[int]int64{}
	for i, r := range replies {
		out.IndexFile += r.IndexSize
		perRange[rng[i]] = max(perRange[rng[i]], r.IndexSize)
		out.FileSize += r.FileSize
		out.ActiveSize += r.ActiveSize
		out.CompactRunning = out.CompactRunning || r.CompactRunning
		if out.PurgedInfosLimit == 0 {
			out.PurgedInfosLimit = r.PurgedInfosLimit
		}
	}
	for _, n := range perRange {
		out.IndexActive += n
	}
	return out, nil
}

// Purge removes leaf revisions for good on every copy of their shards. The
// answer lists, per id in request order, the revs that were purged (as
// the first copy of the range answered).
func (c *Coordinator) Purge(ctx context.Context, db string, reqs []*pb.PurgeRequest) ([]*pb.PurgeResult, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	per := make([][]int, len(ranges))
	for i, r := range reqs {
		k := RangeOf(ranges, r.Id)
		per[k] = append(per[k], i)
	}
	out := make([]*pb.PurgeResult, len(reqs))
	to := actors.Timeout(ctx)
	type sent struct {
		f     *actor.Future
		rng   int
		first bool
	}
	var futures []sent
	for k, idx := range per {
		if len(idx) == 0 {
			continue
		}
		m := &pb.PurgeDocs{Docs: make([]*pb.PurgeRequest, len(idx))}
		for j, i := range idx {
			m.Docs[j] = reqs[i]
		}
		for ci, cp := range c.copies(ranges[k]) {
			futures = append(futures, sent{f: c.root.RequestFuture(c.pl.PID(cp), m, to), rng: k, first: ci == 0})
		}
	}
	for _, s := range futures {
		r, err := actors.Await[*pb.PurgeReply](ctx, s.f)
		if err != nil {
			return nil, fmt.Errorf("coordinator: purge: %w", err)
		}
		if r.Error != nil {
			return nil, r.Error
		}
		for j, i := range per[s.rng] {
			if j < len(r.Results) && (s.first || out[i] == nil) {
				out[i] = r.Results[j]
			}
		}
	}
	return out, nil
}

// SetPurgedInfosLimit sets purged_infos_limit on every copy of db.
func (c *Coordinator) SetPurgedInfosLimit(ctx context.Context, db string, limit uint64) error {
	_, err := askAll[*pb.PurgedInfosLimitReply](ctx, c, db, &pb.SetPurgedInfosLimit{Limit: limit}, "purged_infos_limit")
	return err
}

// PurgedInfos is GET /db/_purged_infos: the purge infos every copy keeps,
// each (id, revs) once, in Erlang's term order of {Id, Revs} (the order of
// the set CouchDB's fabric answers with, for a few dozen). A range needs
// one copy's answer; a copy that does not answer is left out, as fabric
// does while every range has one.
func (c *Coordinator) PurgedInfos(ctx context.Context, db string) ([]*pb.PurgeInfo, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	type sent struct {
		f   *actor.Future
		rng int
	}
	var futures []sent
	to := actors.Timeout(ctx)
	for i, r := range ranges {
		for _, cp := range c.copies(r) {
			futures = append(futures, sent{c.root.RequestFuture(c.pl.PID(cp), &pb.GetPurgedInfos{}, to), i})
		}
	}
	answered := make([]bool, len(ranges))
	var lastErr error
	seen := map[string]bool{}
	var out []*pb.PurgeInfo
	for _, s := range futures {
		r, err := actors.Await[*pb.PurgedInfos](ctx, s.f)
		if err == nil && r.Error != nil {
			err = r.Error
		}
		if err != nil {
			lastErr = err
			continue
		}
		answered[s.rng] = true
		for _, pi := range r.Infos {
			k := pi.Id + "\x00" + strings.Join(pi.Revs, "\x00")
			if !seen[k] {
				seen[k] = true
				out = append(out, &pb.PurgeInfo{Id: pi.Id, Revs: pi.Revs})
			}
		}
	}
	for _, ok := range answered {
		if !ok {
			return nil, fmt.Errorf("coordinator: purged infos: no copy of a range answered: %w", lastErr)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Id != out[j].Id {
			return out[i].Id < out[j].Id
		}
		return slices.CompareFunc(out[i].Revs, out[j].Revs, revtree.CompareParsed) < 0
	})
	return out, nil
}
