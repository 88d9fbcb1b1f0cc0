package shard

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/storage"
)

// group is the set of updates one commit takes.
type group struct {
	batches []*pb.UpdateDocs
	purges  []*pb.PurgeDocs
	// compact is at most one compaction batch; it applies after the
	// batches of the group.
	compact *compactBatch
	// purgeLimit, when set, changes purged_infos_limit.
	purgeLimit uint64
	stats      *pb.ShardStats
	// track collects the attachment keys (attKey) written (compaction running);
	// keep holds those collected by earlier groups of the compaction.
	track bool
	keep  map[string]bool
}

// applyResult is what a committed group gives back: per batch results, and
// the meta the shard has after it.
type applyResult struct {
	results [][]*pb.DocResult
	purged  []*pb.PurgeReply
	meta    *pb.ShardMeta
	stats   *pb.ShardStats
	digests []string
	// took is the time spent in badger's synced commits (Observer).
	took time.Duration
	err  error
}

// writer accumulates one group's writes, splitting into several badger
// transactions when a group outgrows one (ErrTxnTooBig). Only the final
// commit's success acknowledges anything. It remembers the entries of the
// open transaction so that a commit refused while badger blocks writes (a
// DropPrefix: a database being deleted, the node flushing its memtables
// before reclaiming space) is replayed in a new transaction: the shard is
// the only writer of its keys, so the same writes a moment later are the
// same commit.
type writer struct {
	db      *badger.DB
	txn     *badger.Txn
	entries []wentry
	// written estimates the bytes this group adds to badger (ShardStats).
	written int64
	// digests collects the attachment keys (attKey) of the bodies written, when
	// track is set (a compaction is running and will sweep attachments).
	track   bool
	digests []string
	// took sums the time spent in badger's synced commits.
	took time.Duration
	// parts are the group's partition deltas (partitioned databases);
	// partSizes the partitions' external sizes as the group found them.
	parts     map[string]*sizeDelta
	partSizes map[string]int64
}

type wentry struct {
	key, val []byte
	meta     byte
	del      bool
}

// entryOverhead approximates badger's per-entry bytes beyond key and value
// (headers, value pointer, checksums) for the file size estimate.
const entryOverhead = 32

func (w *writer) set(key, val []byte) error { return w.setMeta(key, val, 0) }

func (w *writer) setMeta(key, val []byte, meta byte) error {
	w.written += int64(len(key) + len(val) + entryOverhead)
	return w.add(wentry{key: key, val: val, meta: meta})
}

func (w *writer) del(key []byte) error {
	w.written += int64(len(key) + entryOverhead)
	return w.add(wentry{key: key, del: true})
}

func (w *writer) put(e wentry) error {
	if e.del {
		return w.txn.Delete(e.key)
	}
	return w.txn.SetEntry(badger.NewEntry(e.key, e.val).WithMeta(e.meta))
}

func (w *writer) add(e wentry) error {
	err := w.put(e)
	if errors.Is(err, badger.ErrTxnTooBig) {
		if err := w.commit(); err != nil {
			return err
		}
		w.txn = w.db.NewTransaction(true)
		err = w.put(e)
	}
	if err == nil {
		w.entries = append(w.entries, e)
	}
	return err
}

// commit commits the open transaction, replaying it while badger blocks
// writes.
func (w *writer) commit() error {
	start := time.Now()
	defer func() { w.took += time.Since(start) }()
	err := w.txn.Commit()
	for delay := time.Millisecond; errors.Is(err, badger.ErrBlockedWrites); delay = min(2*delay, 50*time.Millisecond) {
		time.Sleep(delay)
		w.txn = w.db.NewTransaction(true)
		for _, e := range w.entries {
			if err = w.put(e); err != nil {
				return err
			}
		}
		err = w.txn.Commit()
	}
	w.entries = w.entries[:0]
	return err
}

// apply merges a group of updates into the store and commits them with one
// synced write. Reads see the writes of earlier docs of the same group
// because they go through the same transaction.
func (s *store) apply(g group, meta *pb.ShardMeta) applyResult {
	meta = proto.Clone(meta).(*pb.ShardMeta)
	stats := &pb.ShardStats{}
	if g.stats != nil {
		stats = proto.Clone(g.stats).(*pb.ShardStats)
	}
	w := &writer{db: s.db, txn: s.db.NewTransaction(true), track: g.track}
	defer func() { w.txn.Discard() }()
	res := applyResult{results: make([][]*pb.DocResult, len(g.batches))}
	for bi, b := range g.batches {
		// a batch's docs take their seqs in id order, as CouchDB's
		// updater merges a request's docs sorted by id; the results stay
		// in the batch's order
		order := make([]int, len(b.Docs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return strings.Compare(b.Docs[x].Id, b.Docs[y].Id) })
		byDoc := make([]*pb.DocResult, len(b.Docs))
		for _, i := range order {
			d := b.Docs[i]
			r, err := s.applyDoc(w, meta, d, b.NewEdits)
			if err != nil {
				res.err = fmt.Errorf("shard: apply %q: %w", d.Id, err)
				return res
			}
			byDoc[i] = r
		}
		out := make([]*pb.DocResult, 0, len(b.Docs))
		for _, r := range byDoc {
			if r != nil {
				out = append(out, r)
			}
		}
		res.results[bi] = out
	}
	for _, p := range g.purges {
		r, err := s.applyPurge(w, meta, stats, p)
		if err != nil {
			res.err = fmt.Errorf("shard: purge: %w", err)
			return res
		}
		res.purged = append(res.purged, r)
	}
	if g.purgeLimit > 0 {
		stats.PurgedInfosLimit = g.purgeLimit
		if err := s.trimPurgeInfos(w, meta, stats); err != nil {
			res.err = fmt.Errorf("shard: purge infos: %w", err)
			return res
		}
	}
	if g.compact != nil {
		if err := s.applyCompact(w, meta, stats, g.compact, g.keep); err != nil {
			res.err = fmt.Errorf("shard: compact: %w", err)
			return res
		}
	}
	err := s.writePartitions(w)
	var mb []byte
	if err == nil {
		mb, err = proto.Marshal(meta)
	}
	if err == nil {
		err = w.set(s.k.meta(), mb)
	}
	if err == nil {
		stats.FileSize += w.written + 64 // the stats record itself
		if g.compact != nil && g.compact.final {
			// what the shard holds after compaction: its live records
			stats.FileSize = meta.ActiveSize
			stats.Compactions++
			stats.LastCompactedUs = time.Now().UnixMicro()
		}
		var sb []byte
		if sb, err = proto.Marshal(stats); err == nil {
			err = w.set(s.k.stats(), sb)
		}
	}
	if err == nil {
		err = w.commit()
	}
	if err != nil {
		res.err = fmt.Errorf("shard: commit: %w", err)
		return res
	}
	res.meta, res.stats, res.digests, res.took = meta, stats, w.digests, w.took
	return res
}

// sameParent reports whether the parent a copy picked is the one the
// coordinator hashed the new revision for: the doc's _rev, or none.
func sameParent(pr *revtree.Rev, rev string) bool {
	if pr == nil {
		return rev == ""
	}
	return rev != "" && pr.String() == rev
}

// applyDoc merges one doc. It returns a per-doc error as a result; a
// returned error is a storage failure that fails the whole group.
func (s *store) applyDoc(w *writer, meta *pb.ShardMeta, d *pb.DocUpdate, newEdits bool) (*pb.DocResult, error) {
	info, infoLen, err := s.docInfoSized(w.txn, d.Id)
	if err != nil {
		return nil, err
	}
	existed := info != nil && len(info.Nodes) > 0
	if !existed {
		info = &pb.FullDocInfo{Id: d.Id}
	}
	oldSeq, oldDeleted := info.Seq, info.Deleted

	var (
		path   []revtree.Rev // newest first
		parent = -1          // index of the parent node, new_edits=true
	)
	if newEdits {
		var perrr *pb.Error
		parent, perrr = editParent(info, existed, d)
		if perrr != nil {
			return &pb.DocResult{Tag: d.Tag, Id: d.Id, Error: perrr}, nil
		}
		if !d.Deleted && int64(len(d.Body)) > winnerSize(info) {
			// a write that grows its partition (a new doc, a bigger
			// edit); a smaller edit or a deletion gets through
			over, err := s.overflow(w, d.Id)
			if err != nil {
				return nil, err
			}
			if over {
				return &pb.DocResult{Tag: d.Tag, Id: d.Id, Error: errPartitionOverflow(d.Id)}, nil
			}
		}
	} else {
		path, err = replicatedPath(d)
		if err != nil {
			return &pb.DocResult{Tag: d.Tag, Id: d.Id, Error: ErrBadRev}, nil
		}
		if revtree.Find(info, path[0]) >= 0 {
			// a known rev: CouchDB silently keeps what it has; it still
			// counts as this copy's acknowledgement
			return &pb.DocResult{Tag: d.Tag, Id: d.Id, Rev: path[0].String()}, nil
		}
	}

	// attachments: resolve stubs against the parent (or nearest ancestor
	// with a body), store new data under the SHA-256 of its bytes.
	var atts []*pb.AttMeta
	var base *pb.BodyRecord
	if d.HasAtts {
		base, err = s.baseBody(w.txn, info, parent, path)
		if err != nil {
			return nil, err
		}
	}
	newPos := uint64(1)
	if newEdits && parent >= 0 {
		newPos = info.Nodes[parent].Pos + 1
	} else if !newEdits {
		newPos = path[0].Pos
	}
	for _, a := range d.Atts {
		if a.Stub {
			var found *pb.AttMeta
			if base != nil {
				for _, ba := range base.Atts {
					if ba.Name == a.Name {
						found = ba
						break
					}
				}
			}
			if found == nil {
				return &pb.DocResult{Tag: d.Tag, Id: d.Id, Error: perr("missing_stub", "Invalid attachment stub in "+d.Id+" for "+a.Name)}, nil
			}
			atts = append(atts, found)
			continue
		}
		// the data's key is the SHA-256 of its bytes, computed here from
		// the bytes themselves: never the MD5 digest (which another doc's
		// colliding bytes share), nor anything the sender claims
		sum := sha256.Sum256(a.Data)
		if err := w.set(s.k.att(sha256Key(sum[:])), a.Data); err != nil {
			return nil, err
		}
		length := a.Length
		if length == 0 && a.Encoding == "" {
			length = uint64(len(a.Data))
		}
		atts = append(atts, &pb.AttMeta{Name: a.Name, ContentType: a.ContentType, Digest: a.Digest,
			Length: length, Revpos: attRevpos(a, newPos, newEdits), Encoding: a.Encoding, EncodedLength: a.EncodedLength,
			Sha256: sum[:]})
	}

	meta.UpdateSeq++
	seq := meta.UpdateSeq
	var leaf revtree.Rev
	if newEdits {
		var pr *revtree.Rev
		if parent >= 0 {
			p := revtree.Rev{Pos: info.Nodes[parent].Pos, Hash: info.Nodes[parent].Hash}
			pr = &p
			path = []revtree.Rev{{Pos: p.Pos + 1}, p}
		} else {
			path = []revtree.Rev{{Pos: 1}}
		}
		if d.RevHash != "" && len(atts) == 0 && sameParent(pr, d.Rev) {
			path[0].Hash = d.RevHash // the coordinator's, for this parent
		} else {
			path[0].Hash = revtree.NewRevHash(d.Deleted, pr, d.Body, atts)
		}
		if revtree.Find(info, path[0]) >= 0 {
			meta.UpdateSeq--
			return &pb.DocResult{Tag: d.Tag, Id: d.Id, Error: ErrConflict}, nil
		}
	}
	leaf = path[0]
	oldLeaves, oldInfo, oldRec := leafBytes(info), 0, 0
	if existed {
		oldInfo, oldRec = infoLen, len(encodeInfo(nil, seqRecord(info)))
	}
	li, _ := revtree.AddPath(info, path, d.Deleted, true, seq)
	if li >= 0 {
		info.Nodes[li].BodySize = uint32(len(d.Body))
	}
	body := &pb.BodyRecord{Json: d.Body, Atts: atts}
	if w.track {
		for _, a := range atts {
			w.digests = append(w.digests, attKey(a))
		}
	}
	bb, err := proto.Marshal(body)
	if err != nil {
		return nil, err
	}
	if err := w.set(s.k.body(d.Id, leaf.String()), bb); err != nil {
		return nil, err
	}
	limit := int(meta.RevsLimit)
	if limit <= 0 {
		limit = DefaultRevsLimit
	}
	for _, r := range revtree.Stem(info, limit) {
		if err := w.del(s.k.body(d.Id, r.String())); err != nil {
			return nil, err
		}
	}
	revtree.Refresh(info)
	info.Seq = seq
	ib := encodeInfo(nil, info)
	sb := encodeInfo(nil, seqRecord(info))
	delta := countDelta(existed, oldDeleted, true, info.Deleted)
	// external: every leaf's body, a deleted one's too ({} is 2 bytes),
	// as CouchDB counts a doc's size
	delta.ext = leafBytes(info) - oldLeaves
	// active: leaf bodies, the doc info and its by-seq record
	delta.act = leafBytes(info) - oldLeaves + int64(len(ib)-oldInfo) + int64(len(sb)-oldRec)
	s.account(w, meta, d.Id, delta)
	if existed {
		if err := w.del(s.k.seq(oldSeq)); err != nil {
			return nil, err
		}
	}
	var um byte
	if info.Deleted {
		um = metaDeleted
	}
	if err := w.setMeta(s.k.id(d.Id), ib, um); err != nil {
		return nil, err
	}
	if err := w.set(s.k.seq(seq), sb); err != nil {
		return nil, err
	}
	return &pb.DocResult{Tag: d.Tag, Id: d.Id, Rev: leaf.String()}, nil
}

// editParent finds the node a new_edits=true update extends, CouchDB's way:
// an existing doc needs the rev of a leaf, except that a deleted doc may be
// re-created without one (continuing its deleted branch) and only so: a
// rev given for a deleted doc is a conflict, even its tombstone's (CouchDB
// 3.5.2). A live doc's deleted conflict may be edited by its rev.
func editParent(info *pb.FullDocInfo, existed bool, d *pb.DocUpdate) (int, *pb.Error) {
	if d.Rev == "" {
		if !existed {
			return -1, nil
		}
		if w, ok := revtree.Winner(info); ok && w.Deleted {
			return w.Index, nil
		}
		return -1, ErrConflict
	}
	r, err := revtree.ParseRev(d.Rev)
	if err != nil {
		return -1, ErrBadRev
	}
	if !existed {
		return -1, ErrConflict
	}
	idx := revtree.Find(info, r)
	if idx < 0 || !revtree.IsLeaf(info, idx) {
		return -1, ErrConflict
	}
	if w, ok := revtree.Winner(info); ok && w.Deleted {
		return -1, ErrConflict
	}
	return idx, nil
}

// replicatedPath is the rev path of a new_edits=false update: _revisions
// when given, else the single _rev.
func replicatedPath(d *pb.DocUpdate) ([]revtree.Rev, error) {
	if d.Revisions != nil && len(d.Revisions.Ids) > 0 {
		if d.Revisions.Start < uint64(len(d.Revisions.Ids)) {
			return nil, revtree.ErrBadRev
		}
		p := make([]revtree.Rev, len(d.Revisions.Ids))
		for i, h := range d.Revisions.Ids {
			p[i] = revtree.Rev{Pos: d.Revisions.Start - uint64(i), Hash: h}
		}
		if d.Rev != "" {
			r, err := revtree.ParseRev(d.Rev)
			if err != nil || r != p[0] {
				return nil, revtree.ErrBadRev
			}
		}
		return p, nil
	}
	r, err := revtree.ParseRev(d.Rev)
	if err != nil {
		return nil, err
	}
	return []revtree.Rev{r}, nil
}

// baseBody is the body record stubs refer to: the parent for an edit, the
// nearest ancestor with a body for a replicated path.
func (s *store) baseBody(txn *badger.Txn, info *pb.FullDocInfo, parent int, path []revtree.Rev) (*pb.BodyRecord, error) {
	if parent >= 0 {
		n := info.Nodes[parent]
		return s.body(txn, info.Id, revtree.Rev{Pos: n.Pos, Hash: n.Hash}.String())
	}
	for _, r := range path[min(1, len(path)):] {
		if idx := revtree.Find(info, r); idx >= 0 && info.Nodes[idx].HasBody {
			return s.body(txn, info.Id, r.String())
		}
	}
	return nil, nil
}

// putLocal writes a _local doc. Local docs have no MVCC (CouchDB accepts a
// missing or stale rev); the new rev is the sent one plus one.
func (s *store) putLocal(m *pb.PutLocal) *pb.LocalReply {
	var n uint64
	if m.Rev != "" {
		var pos, i int
		if len(m.Rev) > 2 && m.Rev[:2] == "0-" {
			i = 2
		}
		for ; i < len(m.Rev); i++ {
			c := m.Rev[i]
			if c < '0' || c > '9' {
				return &pb.LocalReply{Error: perr("bad_request", "Invalid rev format")}
			}
			pos = pos*10 + int(c-'0')
		}
		n = uint64(pos)
	}
	err := storage.Update(s.db, func(txn *badger.Txn) error {
		if m.Deleted {
			return txn.Delete(s.k.local(m.Id))
		}
		b, err := proto.Marshal(&pb.LocalDoc{Id: m.Id, Rev: n + 1, Json: m.Json})
		if err != nil {
			return err
		}
		return txn.Set(s.k.local(m.Id), b)
	})
	if err != nil {
		return &pb.LocalReply{Error: perr(ErrInternal.Code, err.Error())}
	}
	if m.Deleted {
		return &pb.LocalReply{Rev: "0-0"}
	}
	return &pb.LocalReply{Rev: fmt.Sprintf("0-%d", n+1)}
}

// seqRecord is what the by-seq index holds for a doc: its id, seq, winner
// and its leaves, each stored as a root (parent -1), which is all that
// _changes (style=all_docs, conflicts), replication and the compactor's
// walk read. The full rev tree is stored once, under the by-id key: every
// edit rewrites the tree, so a second copy doubled the bytes each update
// wrote (and compaction later had to reclaim), for a tree only doc reads,
// merges and compaction need.
func seqRecord(info *pb.FullDocInfo) *pb.FullDocInfo {
	rec := &pb.FullDocInfo{Id: info.Id, Seq: info.Seq, Deleted: info.Deleted, Winner: info.Winner}
	nodes := info.Nodes
	hasChild := make([]bool, len(nodes))
	for _, nd := range nodes {
		if nd.Parent >= 0 && int(nd.Parent) < len(nodes) {
			hasChild[nd.Parent] = true
		}
	}
	for i, nd := range nodes {
		if !hasChild[i] {
			rec.Nodes = append(rec.Nodes, &pb.RevNode{Pos: nd.Pos, Hash: nd.Hash, Parent: -1, Deleted: nd.Deleted,
				HasBody: nd.HasBody, Seq: nd.Seq, BodySize: nd.BodySize})
		}
	}
	return rec
}

// winnerSize is the body size of a doc's winning rev when it is live.
func winnerSize(info *pb.FullDocInfo) int64 {
	if info == nil || info.Deleted {
		return 0
	}
	w, ok := revtree.Winner(info)
	if !ok {
		return 0
	}
	return int64(info.Nodes[w.Index].BodySize)
}

func leafBytes(info *pb.FullDocInfo) int64 {
	var n int64
	for _, l := range revtree.Leaves(info) {
		n += int64(info.Nodes[l.Index].BodySize)
	}
	return n
}

// attRevpos is the generation an attachment was added in: a new edit adds
// it now; a replicated revision keeps the source's revpos.
func attRevpos(a *pb.Att, newPos uint64, newEdits bool) uint64 {
	if !newEdits && a.Revpos > 0 && a.Revpos <= newPos {
		return a.Revpos
	}
	return newPos
}
