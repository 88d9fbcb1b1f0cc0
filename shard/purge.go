package shard

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/dgraph-io/badger/v4"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// DefaultPurgedInfosLimit is CouchDB's default purged_infos_limit.
const DefaultPurgedInfosLimit = 1000

// applyPurge removes leaf revisions for good, as couch_key_tree:remove_leafs
// does: every root-to-leaf path whose leaf is purged goes, except the nodes
// that a remaining path shares. The bodies of removed revs are deleted. A
// doc left without revisions disappears (by-id and by-seq); one that keeps
// some moves to a new seq. Each doc that lost revisions takes a purge seq
// and a PurgeInfo record. Revs that are unknown or not leaves are not
// reported as purged (CouchDB's answer). Every request takes a purge seq
// and a PurgeInfo of the revs it named, whatever it purged, as in CouchDB
// (a purge of an unknown doc is kept too: GET /db/_purged_infos shows it).
func (s *store) applyPurge(w *writer, meta *pb.ShardMeta, stats *pb.ShardStats, m *pb.PurgeDocs) (*pb.PurgeReply, error) {
	reply := &pb.PurgeReply{}
	for _, req := range m.Docs {
		res := &pb.PurgeResult{Id: req.Id, Purged: []string{}}
		reply.Results = append(reply.Results, res)
		info, infoLen, err := s.docInfoSized(w.txn, req.Id)
		if err != nil {
			return nil, err
		}
		meta.PurgeSeq++
		if err := s.putPurgeInfo(w, meta, stats, &pb.PurgeInfo{PurgeSeq: meta.PurgeSeq, Id: req.Id, Revs: purgeInfoRevs(req.Revs)}); err != nil {
			return nil, err
		}
		if info == nil || len(info.Nodes) == 0 {
			continue
		}
		leaves := revtree.Leaves(info)
		purge := map[int]bool{}
		for _, rs := range req.Revs {
			r, err := revtree.ParseRev(rs)
			if err != nil {
				continue
			}
			for _, l := range leaves {
				if l.Rev == r && !purge[l.Index] {
					purge[l.Index] = true
					res.Purged = append(res.Purged, l.Rev.String())
				}
			}
		}
		if len(purge) == 0 {
			continue
		}
		oldSeq, oldDeleted := info.Seq, info.Deleted
		oldLeaves, oldLen := leafBytes(info), infoLen+len(encodeInfo(nil, seqRecord(info)))
		keep := make([]bool, len(info.Nodes))
		for _, l := range leaves {
			if purge[l.Index] {
				continue
			}
			for k := l.Index; k >= 0 && !keep[k]; k = int(info.Nodes[k].Parent) {
				keep[k] = true
			}
		}
		remap := make([]int32, len(info.Nodes))
		var nodes []*pb.RevNode
		for i, nd := range info.Nodes {
			if !keep[i] {
				remap[i] = -1
				if nd.HasBody {
					if err := w.del(s.k.body(info.Id, revtree.Rev{Pos: nd.Pos, Hash: nd.Hash}.String())); err != nil {
						return nil, err
					}
				}
				continue
			}
			remap[i] = int32(len(nodes))
			nodes = append(nodes, nd)
		}
		for _, nd := range nodes {
			if nd.Parent >= 0 {
				nd.Parent = remap[nd.Parent]
			}
		}
		info.Nodes = nodes
		if err := w.del(s.k.seq(oldSeq)); err != nil {
			return nil, err
		}
		if len(nodes) == 0 {
			if err := w.del(s.k.id(info.Id)); err != nil {
				return nil, err
			}
			delta := countDelta(true, oldDeleted, false, false)
			delta.ext, delta.act = -oldLeaves, -(oldLeaves + int64(oldLen))
			s.account(w, meta, info.Id, delta)
			continue
		}
		revtree.Refresh(info)
		meta.UpdateSeq++
		info.Seq = meta.UpdateSeq
		ib := encodeInfo(nil, info)
		sb := encodeInfo(nil, seqRecord(info))
		var um byte
		if info.Deleted {
			um = metaDeleted
		}
		if err := w.setMeta(s.k.id(info.Id), ib, um); err != nil {
			return nil, err
		}
		if err := w.set(s.k.seq(info.Seq), sb); err != nil {
			return nil, err
		}
		delta := countDelta(true, oldDeleted, true, info.Deleted)
		delta.ext = leafBytes(info) - oldLeaves
		delta.act = leafBytes(info) - oldLeaves + int64(len(ib)+len(sb)-oldLen)
		s.account(w, meta, info.Id, delta)
	}
	reply.PurgeSeq = meta.PurgeSeq
	return reply, nil
}

// purgeInfoRevs are a request's revs as CouchDB keeps them in a purge info:
// each once, in the order of its parsed revs.
func purgeInfoRevs(revs []string) []string {
	out := slices.Clone(revs)
	slices.SortFunc(out, revtree.CompareParsed)
	return slices.Compact(out)
}

func (s *store) putPurgeInfo(w *writer, meta *pb.ShardMeta, stats *pb.ShardStats, pi *pb.PurgeInfo) error {
	b, err := proto.Marshal(pi)
	if err != nil {
		return err
	}
	if err := w.set(s.k.purge(pi.PurgeSeq), b); err != nil {
		return err
	}
	// keep at most purged_infos_limit records: drop the one that falls out
	limit := stats.PurgedInfosLimit
	if limit == 0 {
		limit = DefaultPurgedInfosLimit
	}
	if meta.PurgeSeq > limit {
		return w.del(s.k.purge(meta.PurgeSeq - limit))
	}
	return nil
}

// trimPurgeInfos drops purge infos beyond a (new) limit.
func (s *store) trimPurgeInfos(w *writer, meta *pb.ShardMeta, stats *pb.ShardStats) error {
	limit := stats.PurgedInfosLimit
	if limit == 0 || meta.PurgeSeq <= limit {
		return nil
	}
	var old [][]byte
	opts := badger.DefaultIteratorOptions
	opts.Prefix = s.k.purgePrefix()
	opts.PrefetchValues = false
	it := w.txn.NewIterator(opts)
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().KeyCopy(nil)
		if beUint64(k[5:]) > meta.PurgeSeq-limit {
			break
		}
		old = append(old, k)
	}
	it.Close()
	for _, k := range old {
		if err := w.del(k); err != nil {
			return err
		}
	}
	return nil
}

// readPurges answers the purge infos after since (at most limit), in
// order, and whether the ones right after since are gone (trimmed to
// purged_infos_limit): a reader that was behind them cannot know what
// was purged.
func (s *store) readPurges(since uint64, limit int) ([]*pb.PurgeInfo, bool, error) {
	var out []*pb.PurgeInfo
	gap := false
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = s.k.purgePrefix()
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(s.k.purge(since + 1)); it.Valid() && len(out) < limit; it.Next() {
			pi := &pb.PurgeInfo{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, pi) }); err != nil {
				return err
			}
			if len(out) == 0 && pi.PurgeSeq > since+1 {
				gap = true
			}
			out = append(out, pi)
		}
		return nil
	})
	return out, gap, err
}

// lastPurgeSeq is the highest purge seq with a purge info.
func (s *store) lastPurgeSeq() uint64 {
	return s.lastKeySeqCached(&s.lastPurgeHint, s.k.purgePrefix())
}
