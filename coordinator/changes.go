package coordinator

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/mango"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// ChangesQuery selects a _changes read.
type ChangesQuery struct {
	Since       string // opaque; "now" handled by the caller via Now
	Descending  bool
	Limit       int // < 0: none
	IncludeDocs bool
	// Filter, when set, drops rows; dropped rows still advance the sequence.
	Filter func(*pb.FullDocInfo) bool
	// Selector, when set, drops the rows (after Filter) whose winning
	// revision does not match it, as CouchDB's filter=_selector: the doc
	// as CouchDB's filter sees it, with _id, _rev, _deleted, _conflicts
	// and attachment stubs (a deleted doc matches only a selector its
	// tombstone passes). The shards send the winners' bodies with the rows,
	// as for IncludeDocs, so filtering costs no request per row; the rows
	// keep them only with IncludeDocs. Dropped rows still advance the
	// sequence.
	Selector *mango.Selector
	// AllLeaves (with Selector) is style=all_docs: as CouchDB, every leaf
	// is matched, a row lists only the leaves that match (ChangeRow.Revs)
	// and is dropped when none does. The other leaves' bodies cost one
	// request to the copy the row came from, for conflicted docs only.
	AllLeaves bool
	// DocFilter, when set, drops the rows (after Filter and Selector)
	// whose winning revision it refuses: a design doc's JavaScript filter,
	// or filter=_view. It gets the doc as the selector does (bodies come
	// with the rows as for IncludeDocs).
	DocFilter func(ctx context.Context, doc []byte) (bool, error)
	// SeqInterval, when above 1, gives only every SeqInterval-th row
	// emitted its Seq (the others ""): encoding a sequence for every row is
	// most of a feed's cost to a replicator, which needs one per batch
	// (CouchDB's seq_interval). Ignored when Descending.
	SeqInterval int
	// SeqShown, when set, says instead which rows get their Seq: the
	// sent-th row emitted (from 0) does where it is true.
	SeqShown func(sent int) bool
	// WinnerOnly says the rows' Info need only Id, Seq, Deleted and
	// Winner: the shards do not build the rev trees (a fifth of a feed's
	// CPU). Ignored with IncludeDocs, Selector, AllLeaves or DocFilter.
	WinnerOnly bool
	// JSONRows (with WinnerOnly, and no Filter) asks for the rows as the
	// shards render them: ChangeRow.Fragment instead of Info, and one
	// ChangeRow reused for every row (valid during emit only).
	JSONRows bool
}

// ChangeRow is one row of a changes feed.
type ChangeRow struct {
	Seq  string
	Info *pb.FullDocInfo
	Json []byte
	Atts []*pb.AttMeta
	// Revs (Selector with AllLeaves) are the leaves that matched, in
	// revtree.Leaves' order; nil otherwise.
	Revs []string
	// Fragment (JSONRows) is the row's JSON after its seq:
	// "id":…,"changes":[{"rev":…}], then ,"deleted":true for a deleted
	// doc; Info is nil then.
	Fragment []byte
}

// seqCursor pages through one copy's by-seq index, a page ahead as
// _all_docs' cursor does.
type seqCursor struct {
	ref  *pb.ShardRef
	q    *pb.ReadChanges
	rows []*pb.Row
	// a json_rows page, and the index of its next change
	page  *pb.ChangesReply
	at    int
	done  bool
	ahead chan changesPage // the page asked in advance (nil: none)
}

type changesPage struct {
	r   *pb.ChangesReply
	err error
}

// empty is whether the cursor holds no change now (fill asks for more).
func (cu *seqCursor) empty() bool {
	if cu.q.JsonRows {
		return cu.page == nil || cu.at >= len(cu.page.Seqs)
	}
	return len(cu.rows) == 0
}

// seq is the seq of the cursor's next change.
func (cu *seqCursor) seq() uint64 {
	if cu.q.JsonRows {
		return cu.page.Seqs[cu.at]
	}
	return cu.rows[0].Info.Seq
}

// nextJSON takes the next change of a json_rows page.
func (cu *seqCursor) nextJSON() (uint64, []byte) {
	p, i := cu.page, cu.at
	cu.at++
	return p.Seqs[i], p.Json[rowStart(p.JsonEnds, i):p.JsonEnds[i]]
}

func (cu *seqCursor) fill(ctx context.Context, c *Coordinator) error {
	for cu.empty() && !cu.done {
		var r *pb.ChangesReply
		var err error
		if cu.ahead != nil {
			res := <-cu.ahead
			cu.ahead = nil
			r, err = res.r, res.err
		} else {
			r, err = askCopy[*pb.ChangesReply](ctx, c, cu.ref, proto.Clone(cu.q).(*pb.ReadChanges))
		}
		if err != nil {
			return fmt.Errorf("coordinator: changes: %w", err)
		}
		if r.Error != nil {
			return r.Error
		}
		cu.done = !r.More
		n := len(r.Rows)
		var s uint64
		if cu.q.JsonRows {
			changesJSONPage(r)
			cu.page, cu.at, n = r, 0, len(r.Seqs)
			if n > 0 {
				s = r.Seqs[n-1]
			}
		} else {
			cu.rows = r.Rows
			if n > 0 {
				s = r.Rows[n-1].Info.Seq
			}
		}
		if n > 0 {
			if cu.q.Descending {
				cu.q.Before = s
			} else {
				cu.q.Since = s
			}
			if !cu.done {
				ch := make(chan changesPage, 1)
				q, ref := proto.Clone(cu.q).(*pb.ReadChanges), cu.ref
				cu.ahead = ch
				go func() {
					r, err := askCopy[*pb.ChangesReply](ctx, c, ref, q)
					ch <- changesPage{r, err}
				}()
			}
		}
	}
	return nil
}

// drain waits for a page read ahead that nobody will use.
func (cu *seqCursor) drain() {
	if cu.ahead != nil {
		<-cu.ahead
		cu.ahead = nil
	}
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
	bodies := q.IncludeDocs || q.Selector != nil || q.DocFilter != nil
	winnerOnly := q.WinnerOnly && !bodies && !q.AllLeaves
	jsonRows := winnerOnly && q.JSONRows && q.Filter == nil
	var shared ChangeRow // jsonRows: every row's, reused
	curs := make([]*seqCursor, len(ranges))
	for i := range ranges {
		rq := &pb.ReadChanges{Since: vec[i], Descending: q.Descending, IncludeDocs: bodies, Limit: page, WinnerOnly: winnerOnly, JsonRows: jsonRows}
		if q.Descending {
			rq.Since, rq.Before = 0, vec[i]+1
		}
		curs[i] = &seqCursor{ref: refs[i], q: rq}
	}
	// pages read ahead are not waited for past the feed's end
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		for _, cu := range curs {
			cu.drain()
		}
	}()
	tried := make([]map[string]bool, len(ranges))
	sent := 0
	lastRow := ""
	var seqEnc seqEncoder
	for q.Limit < 0 || sent < q.Limit {
		best := -1
		for i := range curs {
			for {
				err := curs[i].fill(ctx, c)
				if err == nil {
					break
				}
				// the copy's node went away mid-feed: go on from another
				// copy, from its beginning (its sequence numbers are its
				// own), repeating changes rather than skipping any
				if ctx.Err() != nil || q.Descending {
					return "", err
				}
				if tried[i] == nil {
					tried[i] = map[string]bool{}
				}
				tried[i][nodes[i]] = true
				alt := c.otherCopy(ranges[i], tried[i])
				if alt == nil {
					return "", err
				}
				nodes[i], vec[i] = alt.Node, 0
				curs[i].drain()
				curs[i] = &seqCursor{ref: alt, q: &pb.ReadChanges{IncludeDocs: bodies, Limit: page, WinnerOnly: winnerOnly, JsonRows: jsonRows}}
			}
			cu := curs[i]
			if cu.empty() {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			a, b := cu.seq(), curs[best].seq()
			if (!q.Descending && a < b) || (q.Descending && a > b) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		var row *pb.Row
		var rowSeq uint64
		var frag []byte
		if jsonRows {
			rowSeq, frag = curs[best].nextJSON()
		} else {
			row = curs[best].rows[0]
			curs[best].rows = curs[best].rows[1:]
			rowSeq = row.Info.Seq
		}
		seqVec := vec
		if q.Descending {
			// a descending row's seq is its own position; the vector
			// then stands just below it for that shard
			seqVec = append([]uint64(nil), vec...)
			seqVec[best] = rowSeq
			vec[best] = rowSeq - 1
		} else {
			vec[best] = rowSeq
		}
		var cr *ChangeRow
		if jsonRows {
			shared = ChangeRow{Fragment: frag}
			cr = &shared
		} else if q.Filter != nil && !q.Filter(row.Info) {
			continue
		} else {
			cr = &ChangeRow{Info: row.Info}
		}
		if q.IncludeDocs {
			cr.Json, cr.Atts = row.Json, row.Atts
		}
		if q.Selector != nil || q.DocFilter != nil {
			// a JavaScript filter or filter=_view picks leaves as the
			// selector does (CouchDB filters each leaf with all_docs)
			match := func(rb *pb.RevBody, conflicts bool) (bool, error) {
				return matchRev(q.Selector, row.Info, rb, conflicts), nil
			}
			if q.DocFilter != nil {
				match = func(rb *pb.RevBody, conflicts bool) (bool, error) {
					if rb.Json == nil {
						rb = &pb.RevBody{Rev: rb.Rev, Deleted: rb.Deleted, Json: []byte("{}"), Atts: rb.Atts}
					}
					return q.DocFilter(ctx, couchdoc.Append(nil, row.Info.Id, row.Info, rb, &couchdoc.Options{Conflicts: conflicts}))
				}
			}
			ok, err := c.selectRow(ctx, curs[best].ref, row, q, cr, match)
			if err != nil {
				return "", err
			}
			if !ok {
				continue
			}
		}
		if q.SeqShown != nil && !q.Descending {
			if q.SeqShown(sent) {
				cr.Seq = seqEnc.encodeVec(ranges, nodes, seqVec)
			}
		} else if q.SeqInterval <= 1 || q.Descending || (sent+1)%q.SeqInterval == 0 {
			cr.Seq = seqEnc.encodeVec(ranges, nodes, seqVec)
		}
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

// selectRow matches a row against q.Selector, listing in cr.Revs the
// leaves that match when q.AllLeaves. ref is the copy the row came from,
// which holds its leaves.
func (c *Coordinator) selectRow(ctx context.Context, ref *pb.ShardRef, row *pb.Row, q ChangesQuery, cr *ChangeRow, matchRev func(*pb.RevBody, bool) (bool, error)) (bool, error) {
	info := row.Info
	winner := &pb.RevBody{Rev: info.Winner, Deleted: info.Deleted, Json: row.Json, Atts: row.Atts}
	if !q.AllLeaves {
		// CouchDB opens the winner with its conflicts (main_only)
		return matchRev(winner, true)
	}
	leaves := revtree.Leaves(info)
	match := make(map[string]bool, len(leaves))
	var err error
	if match[info.Winner], err = matchRev(winner, false); err != nil {
		return false, err
	}
	var others []string
	for _, l := range leaves {
		if r := l.Rev.String(); r != info.Winner {
			others = append(others, r)
		}
	}
	if len(others) > 0 {
		r, err := askCopy[*pb.DocReply](ctx, c, ref, &pb.GetDoc{Id: info.Id, Revs: others})
		if err != nil {
			return false, fmt.Errorf("coordinator: changes: leaves of %q: %w", info.Id, err)
		}
		if r.Error != nil {
			return false, r.Error
		}
		for _, b := range r.Bodies {
			// a leaf gone since the row was read (compacted under a newer
			// edit) is not shown, as CouchDB skips a rev it cannot open
			if !b.Missing {
				if match[b.Rev], err = matchRev(b, false); err != nil {
					return false, err
				}
			}
		}
	}
	for _, l := range leaves {
		if r := l.Rev.String(); match[r] {
			cr.Revs = append(cr.Revs, r)
		}
	}
	return len(cr.Revs) > 0, nil
}

// matchRev matches a revision as CouchDB's filter=_selector does: the doc
// as couch_doc:to_json_obj renders it (_id, _rev, the body, _deleted,
// _conflicts when opened with them, attachment stubs).
func matchRev(sel *mango.Selector, info *pb.FullDocInfo, rb *pb.RevBody, conflicts bool) bool {
	if rb.Json == nil {
		// no body stored (an empty one): the members around it still count
		rb = &pb.RevBody{Rev: rb.Rev, Deleted: rb.Deleted, Json: []byte("{}"), Atts: rb.Atts}
	}
	return sel.MatchJSON(couchdoc.Append(nil, info.Id, info, rb, &couchdoc.Options{Conflicts: conflicts}))
}

// Now returns the current sequence of a database (since=now).
func (c *Coordinator) Now(ctx context.Context, db string) (string, error) {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return "", err
	}
	metas, err := c.quorumMetas(ctx, rec, ranges)
	if err != nil {
		return "", err
	}
	seqs := make([]Pos, len(ranges))
	for i, m := range metas {
		seqs[i] = Pos{Node: m.ref.Node, Seq: m.meta.UpdateSeq}
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
	t := time.NewTimer(timeout)
	defer t.Stop()
	// the first copy to answer has a change: a shard answers a WaitChange
	// only then
	changed := false
	q := &quorum{c: c, wants: []want{{copies: refs, need: 1, first: len(refs)}}, timeout: timeout}
	q.ask = func(q *quorum, g, i int) {
		q.request(g, i, c.pl.PID(refs[i]), &pb.WaitChange{Since: vec[i], TimeoutMs: uint32(timeout / time.Millisecond)})
	}
	err = q.wait(ctx, func(answer) error {
		changed = true
		return nil
	})
	switch {
	case changed:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil:
		return false, nil // the timeout passed
	}
	// every copy failed (unreachable, or its node seen down): no change
	// can come, but the caller polls again once this returns, so it waits
	// out the timeout as it would for a change
	select {
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
