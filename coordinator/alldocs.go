package coordinator

import (
	"bytes"
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// RangeQuery is an _all_docs (or _local_docs) key range.
type RangeQuery struct {
	StartKey, EndKey string
	HasStart, HasEnd bool
	InclusiveEnd     bool
	Descending       bool
	IncludeDocs      bool
	Local            bool
	// Limit and Skip apply to the merged stream; Limit < 0 means none.
	Limit, Skip int
	// Partition, in a partitioned database, reads only the range that
	// holds the partition (the caller bounds the keys to it).
	Partition string
}

// partitionRanges narrows ranges to the one holding partition p ("" : all).
func partitionRanges(ranges []Range, p string) []Range {
	if p == "" || len(ranges) == 0 {
		return ranges
	}
	i := RangeOfKey(ranges, p)
	return ranges[i : i+1]
}

// cursor pages through one shard's part of a range. It reads one page
// ahead: the next page is asked for as soon as a page arrives, so that
// the copy reads it while the rows before it are merged and written
// (the shard's read was most of an _all_docs stream's time, and the
// two took turns on one core).
type cursor struct {
	ref  *pb.ShardRef
	q    *pb.ReadRange
	rows []*pb.Row
	// a json_rows page, and the index of its next row
	page *pb.RangeReply
	at   int
	done bool
	// ahead delivers the page asked for in advance (nil: none asked)
	ahead chan pageResult
}

type pageResult struct {
	r   *pb.RangeReply
	err error
}

// empty is whether the cursor holds no row now (fill asks for more).
func (cu *cursor) empty() bool {
	if cu.q.JsonRows {
		return cu.page == nil || cu.at >= len(cu.page.JsonEnds)
	}
	return len(cu.rows) == 0
}

// key is the id of the cursor's next row.
func (cu *cursor) key() []byte {
	if cu.q.JsonRows {
		return cu.page.Ids[rowStart(cu.page.IdEnds, cu.at):cu.page.IdEnds[cu.at]]
	}
	return rowKey(cu.rows[0])
}

// nextJSON takes the next row of a json_rows page.
func (cu *cursor) nextJSON() []byte {
	p := cu.page
	b := p.Json[rowStart(p.JsonEnds, cu.at):p.JsonEnds[cu.at]]
	cu.at++
	return b
}

func (cu *cursor) fill(ctx context.Context, c *Coordinator) error {
	for cu.empty() && !cu.done {
		var r *pb.RangeReply
		var err error
		if cu.ahead != nil {
			res := <-cu.ahead
			cu.ahead = nil
			r, err = res.r, res.err
		} else {
			r, err = askCopy[*pb.RangeReply](ctx, c, cu.ref, proto.Clone(cu.q).(*pb.ReadRange))
		}
		if err != nil {
			return fmt.Errorf("coordinator: range: %w", err)
		}
		if r.Error != nil {
			return r.Error
		}
		if !r.More {
			cu.done = true
		}
		if cu.q.JsonRows {
			rangeJSONPage(r)
			cu.page, cu.at = r, 0
			if r.LastKey != "" {
				cu.q.StartKey, cu.q.HasStart, cu.q.SkipStart = r.LastKey, true, true
				if !cu.done {
					cu.readAhead(ctx, c)
				}
			}
			continue
		}
		cu.rows = r.Rows
		if n := len(r.Rows); n > 0 {
			last := r.Rows[n-1]
			key := last.GetInfo().GetId()
			if cu.q.Local {
				key = last.GetLocal().GetId()
			}
			cu.q.StartKey, cu.q.HasStart, cu.q.SkipStart = key, true, true
		}
		if !cu.done && len(cu.rows) > 0 {
			cu.readAhead(ctx, c)
		}
	}
	return nil
}

// readAhead asks the cursor's copy for its next page now.
func (cu *cursor) readAhead(ctx context.Context, c *Coordinator) {
	ch := make(chan pageResult, 1)
	q, ref := proto.Clone(cu.q).(*pb.ReadRange), cu.ref
	cu.ahead = ch
	go func() {
		r, err := askCopy[*pb.RangeReply](ctx, c, ref, q)
		ch <- pageResult{r, err}
	}()
}

// drain waits for a page asked in advance that nobody will read (the
// stream ended early): no goroutine outlives the request.
func (cu *cursor) drain() {
	if cu.ahead != nil {
		<-cu.ahead
		cu.ahead = nil
	}
}

// fillOrFailover fills a cursor; when its copy's node goes away it goes on
// from the same key in another copy (keys, unlike sequences, are the same
// in every copy).
func (c *Coordinator) fillOrFailover(ctx context.Context, cu *cursor, r Range) error {
	var tried map[string]bool
	for {
		err := cu.fill(ctx, c)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if tried == nil {
			tried = map[string]bool{}
		}
		tried[cu.ref.Node] = true
		cu.drain()
		alt := c.otherCopy(r, tried)
		if alt == nil {
			return err
		}
		cu.ref = alt
	}
}

func rowKey(r *pb.Row) []byte {
	if r.Local != nil {
		return []byte(r.Local.Id)
	}
	return []byte(r.Info.Id)
}

// AllDocs streams the merged, sorted rows of a key range to emit, reading
// every shard a page at a time (never the whole range in memory). Deleted
// docs are skipped, as in CouchDB.
func (c *Coordinator) AllDocs(ctx context.Context, db string, q RangeQuery, emit func(*pb.Row) error) error {
	return c.allDocs(ctx, db, q, emit, nil)
}

// AllDocsJSON is AllDocs of rows without their docs (q.IncludeDocs and
// q.Local must be false), each handed to emit as its JSON
// ({"id":…,"key":…,"value":{"rev":…}}), rendered by the shard from the
// stored record: no Row, doc info or string is made per row between the
// record and the response. The bytes are valid during the call only.
func (c *Coordinator) AllDocsJSON(ctx context.Context, db string, q RangeQuery, emit func(row []byte) error) error {
	if q.IncludeDocs || q.Local {
		return fmt.Errorf("coordinator: AllDocsJSON of docs or _local docs")
	}
	return c.allDocs(ctx, db, q, nil, emit)
}

func (c *Coordinator) allDocs(ctx context.Context, db string, q RangeQuery, emit func(*pb.Row) error, emitJSON func([]byte) error) error {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return err
	}
	ranges = partitionRanges(ranges, q.Partition)
	page := uint32(500)
	if q.Limit >= 0 && q.Limit+q.Skip < int(page) {
		page = uint32(q.Limit + q.Skip + 1)
	}
	curs := make([]*cursor, len(ranges))
	for i, r := range ranges {
		curs[i] = &cursor{ref: c.readRef(r), q: &pb.ReadRange{
			StartKey: q.StartKey, HasStart: q.HasStart, EndKey: q.EndKey, HasEnd: q.HasEnd,
			InclusiveEnd: q.InclusiveEnd, Descending: q.Descending, IncludeDocs: q.IncludeDocs,
			Local: q.Local, Limit: page, JsonRows: emitJSON != nil,
		}}
	}
	// a page read ahead is not waited for past the stream's end
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		for _, cu := range curs {
			cu.drain()
		}
	}()
	skip, sent := q.Skip, 0
	for {
		if q.Limit >= 0 && sent >= q.Limit {
			return nil
		}
		best := -1
		for i, cu := range curs {
			if err := c.fillOrFailover(ctx, cu, ranges[i]); err != nil {
				return err
			}
			if cu.empty() {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			cmp := bytes.Compare(cu.key(), curs[best].key())
			if (cmp < 0) != q.Descending && cmp != 0 {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		if emitJSON != nil {
			// the shard left deleted docs out
			b := curs[best].nextJSON()
			if skip > 0 {
				skip--
				continue
			}
			if err := emitJSON(b); err != nil {
				return err
			}
			sent++
			continue
		}
		row := curs[best].rows[0]
		curs[best].rows = curs[best].rows[1:]
		if row.Info != nil && row.Info.Deleted {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		if err := emit(row); err != nil {
			return err
		}
		sent++
	}
}

// TotalRows is the doc count _all_docs reports.
func (c *Coordinator) TotalRows(ctx context.Context, db string) (uint64, error) {
	info, err := c.DBInfo(ctx, db)
	if err != nil {
		return 0, err
	}
	return info.DocCount, nil
}

// CountRange counts live docs in an id range across all shards.
func (c *Coordinator) CountRange(ctx context.Context, db string, m *pb.CountRange) (uint64, error) {
	return c.CountRangeIn(ctx, db, "", m)
}

// CountRangeIn counts live docs in an id range of the shard range holding
// partition p (every range when p is ""): a partition query's total_rows
// and offset, which CouchDB counts in that one shard.
func (c *Coordinator) CountRangeIn(ctx context.Context, db, p string, m *pb.CountRange) (uint64, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return 0, err
	}
	ranges = partitionRanges(ranges, p)
	futures := make([]*actor.Future, len(ranges))
	to := actors.Timeout(ctx)
	for i, r := range ranges {
		futures[i] = c.root.RequestFuture(c.readCopy(r), m, to)
	}
	var n uint64
	for _, f := range futures {
		cnt, err := actors.Await[*pb.Count](ctx, f)
		if err != nil {
			return 0, fmt.Errorf("coordinator: count: %w", err)
		}
		if cnt.Error != nil {
			return 0, cnt.Error
		}
		n += cnt.N
	}
	return n, nil
}

// PartitionInfo is partition p's counts and sizes in a partitioned
// database (GET /db/_partition/P): one copy of the range holding it is
// asked, another when its node fails.
func (c *Coordinator) PartitionInfo(ctx context.Context, db, p string) (*pb.PartitionStats, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
	}
	r := partitionRanges(ranges, p)[0]
	var last error
	for _, ref := range c.copies(r) {
		reply, err := askCopy[*pb.PartitionInfo](ctx, c, ref, &pb.GetPartitionInfo{Partition: p})
		if err != nil {
			last = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if reply.Error != nil {
			return nil, reply.Error
		}
		return reply.Stats, nil
	}
	return nil, fmt.Errorf("coordinator: partition info: %w", last)
}
