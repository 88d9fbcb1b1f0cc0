package coordinator

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/views"
)

// ViewService answers view pages of this node's copies (views.Service);
// other nodes' are asked through their views process.
type ViewService interface {
	Query(ctx context.Context, q *pb.ViewQuery) *pb.ViewReply
	CleanupMsg(m *pb.ViewCleanup) *pb.ViewCleanupReply
	CompactMsg(m *pb.ViewCompact) *pb.ViewCleanupReply
}

// ViewCleanup drops, on every copy of db, the view indexes whose
// signatures are not in keep.
func (c *Coordinator) ViewCleanup(ctx context.Context, db string, keep [][16]byte) error {
	var ks [][]byte
	for _, k := range keep {
		ks = append(ks, append([]byte(nil), k[:]...))
	}
	return c.eachViewCopy(ctx, db, func(ref *pb.ShardRef) (*pb.ViewCleanupReply, error) {
		q := &pb.ViewCleanup{Shard: ref, Keep: ks}
		if ref.Node == c.pl.Self() && c.views != nil {
			return c.views.CleanupMsg(q), nil
		}
		return actors.Ask[*pb.ViewCleanupReply](ctx, c.root, actor.NewPID(c.pl.PID(ref).Address, views.ProcessName), q)
	})
}

// ViewCompact starts the compaction of one index on every copy of db
// (POST /db/_compact/{ddoc}).
func (c *Coordinator) ViewCompact(ctx context.Context, db, ddocID string, sig [16]byte) error {
	return c.eachViewCopy(ctx, db, func(ref *pb.ShardRef) (*pb.ViewCleanupReply, error) {
		q := &pb.ViewCompact{Shard: ref, Sig: append([]byte(nil), sig[:]...), DdocId: ddocID}
		if ref.Node == c.pl.Self() && c.views != nil {
			return c.views.CompactMsg(q), nil
		}
		return actors.Ask[*pb.ViewCleanupReply](ctx, c.root, actor.NewPID(c.pl.PID(ref).Address, views.ProcessName), q)
	})
}

// eachViewCopy asks every copy of db's ranges on a node that is up; a node
// down is skipped (it is asked at the next request).
func (c *Coordinator) eachViewCopy(ctx context.Context, db string, ask func(*pb.ShardRef) (*pb.ViewCleanupReply, error)) error {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range ranges {
		for _, ref := range r.Copies {
			if ref.Node != c.pl.Self() && !c.pl.Alive(ref.Node) {
				continue
			}
			reply, err := ask(ref)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if reply.Error != nil {
				errs = append(errs, reply.Error)
			}
		}
	}
	return errors.Join(errs...)
}

// SetViews gives the coordinator this node's view service.
func (c *Coordinator) SetViews(v ViewService) { c.views = v }

// ViewArgs is a view query, its bounds collated (views.Bounds).
type ViewArgs struct {
	DDocID     string
	DDoc       []byte
	View       string
	Start, End []byte
	Descending bool
	Reduce     bool
	GroupLevel int
	Update     string
	// Reducer rereduces the ranges' reductions (with Reduce).
	Reducer *views.Reducer
	// PageRows is how many rows to ask each copy for at once (0: its page).
	PageRows int
	// NoOffset: the caller has no use for the offset (a _find), which
	// costs each copy a count of the rows before the range.
	NoOffset bool
	// Partition, in a partitioned database, queries a partitioned index
	// for one partition: only the range holding it is read, and Start
	// and End are within it (views.PartitionBounds).
	Partition string
	// dbPartitioned is the database's flag, for the copies' indexers
	dbPartitioned bool
}

// ViewMeta is what the answer says before its rows.
type ViewMeta struct {
	TotalRows, Offset uint64
	// UpdateSeq is the seqs the ranges' indexes were read at, in the
	// database's opaque seq form.
	UpdateSeq string
	// SeqSum adds the ranges' seqs (what _info shows as a number).
	SeqSum uint64
	// Active adds the ranges' index bytes.
	Active uint64
	// CompactRunning: a range's index is being compacted.
	CompactRunning bool
}

// ErrViewNotFound is a view the design doc does not define.
var ErrViewNotFound = errors.New("coordinator: missing_named_view")

// View streams a view's rows (or groups) in collation order across the
// database's ranges: one copy of each range is asked (this node's first,
// another when it fails, as CouchDB reads views with r=1), a page at a
// time, and the pages are merged as they come (k-way), never collected.
// Groups of several ranges with the same key are rereduced into one; with
// Reduce and no grouping, the one row is every range's reduction
// rereduced. meta is called once, before the first row.
func (c *Coordinator) View(ctx context.Context, db string, a ViewArgs, meta func(ViewMeta) error, emit func(*pb.ViewRow) error) error {
	rec, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return err
	}
	a.dbPartitioned = rec.Partitioned
	ranges = partitionRanges(ranges, a.Partition)
	cursors := make([]*viewCursor, len(ranges))
	for i, r := range ranges {
		cursors[i] = &viewCursor{c: c, r: r, a: &a, skip: map[string]bool{}}
	}
	// every range's first page: total_rows and offset are their sums
	errs := make(chan error, len(cursors))
	for _, vc := range cursors {
		go func() { errs <- vc.fetch(ctx, true) }()
	}
	var first error
	for range cursors {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	var m ViewMeta
	pos := make([]Pos, len(cursors))
	for i, vc := range cursors {
		m.TotalRows += vc.total
		m.Offset += vc.offset
		pos[i] = Pos{Node: vc.node, Seq: vc.seq}
		m.SeqSum += vc.seq
		m.Active += vc.active
		m.CompactRunning = m.CompactRunning || vc.compacting
	}
	m.UpdateSeq = EncodeSeq(ranges, pos)
	if err := meta(m); err != nil {
		return err
	}
	h := &viewHeap{desc: a.Descending}
	for _, vc := range cursors {
		if vc.valid() {
			h.items = append(h.items, vc)
		}
	}
	heap.Init(h)
	if a.Reduce && a.GroupLevel == 0 {
		// one group: every range's reduction, rereduced
		var reds [][]byte
		for h.Len() > 0 {
			vc := heap.Pop(h).(*viewCursor)
			reds = append(reds, vc.row().Value)
			if err := vc.advance(ctx); err != nil {
				return err
			}
			if vc.valid() {
				heap.Push(h, vc)
			}
		}
		if len(reds) == 0 {
			return nil
		}
		out, err := c.rereduce(ctx, &a, reds)
		if err != nil {
			return err
		}
		if out, err = a.Reducer.Final(out); err != nil {
			return err
		}
		return emit(&pb.ViewRow{Key: []byte("null"), Value: out})
	}
	// groups several ranges have are rereduced in batches (a JavaScript
	// reduce in one worker call per batch): closed groups wait in pend,
	// in order, until it holds Reducer.BatchGroups groups (1 for a
	// builtin) or views.ReduceBatchBytes of reductions, then go out
	var (
		group     *pb.ViewRow
		reds      [][]byte
		pend      []pendingGroup
		pendRe    int // groups in pend to rereduce
		pendBytes int
		batch     int
	)
	if batch = 1; a.Reduce && a.Reducer != nil {
		batch = a.Reducer.BatchGroups()
		if a.PageRows > 0 {
			// a query with a small limit asks small pages: its groups
			// go out as soon as before, not after more pages
			batch = min(batch, a.PageRows)
		}
	}
	flushPend := func() error {
		if len(pend) == 0 {
			return nil
		}
		if pendRe > 0 && a.Reducer == nil {
			return errors.New("coordinator: a reduce query without a reducer")
		}
		if pendRe > 0 {
			re := make([][][]byte, 0, pendRe)
			for _, g := range pend {
				if len(g.reds) > 1 {
					re = append(re, g.reds)
				}
			}
			outs, err := a.Reducer.RereduceGroups(ctx, re)
			if err != nil {
				return err
			}
			i := 0
			for k := range pend {
				if len(pend[k].reds) > 1 {
					pend[k].reds = outs[i : i+1]
					i++
				}
			}
		}
		for _, g := range pend {
			out, err := a.Reducer.Final(g.reds[0])
			if err != nil {
				return err
			}
			if err := emit(&pb.ViewRow{Key: g.key, Value: out}); err != nil {
				return err
			}
		}
		clear(pend)
		pend, pendRe, pendBytes = pend[:0], 0, 0
		return nil
	}
	flushGroup := func() error {
		if group == nil {
			return nil
		}
		pend = append(pend, pendingGroup{key: group.Key, reds: reds})
		if len(reds) > 1 {
			pendRe++
		}
		for _, r := range reds {
			pendBytes += len(r)
		}
		group, reds = nil, nil
		if len(pend) >= batch || pendBytes >= views.ReduceBatchBytes {
			return flushPend()
		}
		return nil
	}
	for h.Len() > 0 {
		vc := h.items[0]
		row := vc.row()
		if a.Reduce {
			if group != nil && !bytes.Equal(group.Sort, row.Sort) {
				if err := flushGroup(); err != nil {
					return err
				}
			}
			if group == nil {
				group = row
			}
			reds = append(reds, row.Value)
		} else if err := emit(row); err != nil {
			return err
		}
		if err := vc.advance(ctx); err != nil {
			return err
		}
		if vc.valid() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	if err := flushGroup(); err != nil {
		return err
	}
	return flushPend()
}

// pendingGroup is a merged group waiting for its batch's rereduce: the
// reductions of the ranges that have it.
type pendingGroup struct {
	key  []byte
	reds [][]byte
}

func (c *Coordinator) rereduce(ctx context.Context, a *ViewArgs, reds [][]byte) ([]byte, error) {
	if a.Reducer == nil {
		return nil, errors.New("coordinator: a reduce query without a reducer")
	}
	return a.Reducer.Rereduce(ctx, reds)
}

// viewCursor reads one range's pages from one copy.
type viewCursor struct {
	c      *Coordinator
	r      Range
	a      *ViewArgs
	ref    *pb.ShardRef
	skip   map[string]bool // nodes that failed
	rows   []*pb.ViewRow
	i      int
	more   bool
	next   []byte
	total  uint64
	offset uint64
	seq    uint64
	node   string // the copy the first page came from
	active uint64
	// compacting: the first page's copy compacts its index
	compacting bool
}

func (vc *viewCursor) valid() bool      { return vc.i < len(vc.rows) }
func (vc *viewCursor) row() *pb.ViewRow { return vc.rows[vc.i] }
func (vc *viewCursor) advance(ctx context.Context) error {
	vc.i++
	if vc.i < len(vc.rows) || !vc.more {
		return nil
	}
	return vc.fetch(ctx, false)
}

// fetch reads the next page (the first with first), moving to another
// copy when one fails.
func (vc *viewCursor) fetch(ctx context.Context, first bool) error {
	q := &pb.ViewQuery{DdocId: vc.a.DDocID, Ddoc: vc.a.DDoc, View: vc.a.View, Start: vc.a.Start, End: vc.a.End,
		Descending: vc.a.Descending, Reduce: vc.a.Reduce, GroupLevel: int32(vc.a.GroupLevel), Update: vc.a.Update,
		Total: first && !vc.a.NoOffset, Limit: uint32(vc.a.PageRows), Partitioned: vc.a.dbPartitioned, Partition: vc.a.Partition}
	if !first {
		if vc.a.Descending {
			q.End = vc.next
		} else {
			q.Start = vc.next
		}
		q.Update = "false" // later pages read what the first waited for
	}
	for {
		if vc.ref == nil {
			if vc.ref = vc.c.otherCopy(vc.r, vc.skip); vc.ref == nil {
				return fmt.Errorf("coordinator: view: no live copy of range %08x: %w", vc.r.Begin, actors.ErrUnreachable)
			}
		}
		q.Shard = vc.ref
		reply, err := vc.c.askView(ctx, q)
		if err == nil && reply.Error != nil {
			if reply.Error.Code == "not_found" && reply.Error.Reason == "missing_named_view" {
				return ErrViewNotFound
			}
			err = reply.Error
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// another copy, if the range has one
			vc.skip[vc.ref.Node] = true
			vc.ref = nil
			if vc.c.otherCopy(vc.r, vc.skip) == nil {
				return fmt.Errorf("coordinator: view: %w", err)
			}
			// another copy's index may be behind the one that failed:
			// it catches up as the query asked before it answers
			q.Update = vc.a.Update
			continue
		}
		vc.rows, vc.i, vc.more, vc.next = reply.Rows, 0, reply.More, reply.Next
		if first {
			vc.total, vc.offset, vc.seq, vc.node, vc.active = reply.TotalRows, reply.Offset, reply.UpdateSeq, vc.ref.Node, reply.Active
			vc.compacting = reply.CompactRunning
		}
		if len(vc.rows) == 0 && vc.more {
			// an empty page that goes on: ask from where it ended (asked
			// again from the same bound, it would answer the same)
			if vc.a.Descending {
				q.End = vc.next
			} else {
				q.Start = vc.next
			}
			q.Update = "false"
			continue
		}
		return nil
	}
}

func (c *Coordinator) askView(ctx context.Context, q *pb.ViewQuery) (*pb.ViewReply, error) {
	if q.Shard.Node == c.pl.Self() && c.views != nil {
		return c.views.Query(ctx, q), nil
	}
	return askResending[*pb.ViewReply](ctx, c, q.Shard, actor.NewPID(c.pl.PID(q.Shard).Address, views.ProcessName), q)
}

// viewHeap orders cursors by their current row's collated sort key.
type viewHeap struct {
	items []*viewCursor
	desc  bool
}

func (h *viewHeap) Len() int { return len(h.items) }
func (h *viewHeap) Less(i, j int) bool {
	c := bytes.Compare(h.items[i].row().Sort, h.items[j].row().Sort)
	if h.desc {
		return c > 0
	}
	return c < 0
}
func (h *viewHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *viewHeap) Push(x any)    { h.items = append(h.items, x.(*viewCursor)) }
func (h *viewHeap) Pop() any {
	n := len(h.items)
	x := h.items[n-1]
	h.items = h.items[:n-1]
	return x
}
