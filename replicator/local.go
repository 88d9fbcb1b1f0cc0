package replicator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/mango"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// CreateFunc creates a database of this node (node.CreateDB); an existing
// database is not an error for the replicator.
type CreateFunc func(ctx context.Context, name string) error

// LocalEndpoint is a database of this node reached through the
// coordinator: no HTTP, no loopback socket. Docs still travel as JSON
// between fetch and write, so one pipeline serves both kinds of endpoint.
type LocalEndpoint struct {
	db      string
	c       *coordinator.Coordinator
	create  CreateFunc
	filters FilterFunc
	// pol and who: writes pass the target's rules (VDUs, _users) as the
	// job's user; nil pol only in tests that build an endpoint alone
	pol *policy.Policy
	who *policy.Subject
}

// FilterFunc makes the doc filter of a database's design-doc filter
// ("ddoc/name") with query_params as its req.query; the node builds it
// with its JavaScript engine (the replicator runs no JavaScript itself).
type FilterFunc func(ctx context.Context, db, filter string, query map[string]string) (func(ctx context.Context, doc []byte) (bool, error), error)

// NewLocalEndpoint returns the endpoint for database db.
func NewLocalEndpoint(c *coordinator.Coordinator, db string, create CreateFunc) *LocalEndpoint {
	return &LocalEndpoint{db: db, c: c, create: create}
}

// WithFilters lets the endpoint run design-doc filters.
func (e *LocalEndpoint) WithFilters(f FilterFunc) *LocalEndpoint {
	e.filters = f
	return e
}

// As makes the endpoint write as who, through the policy: a local target
// applies its validate_doc_update functions and _users rules to what a
// replication writes, as an HTTP one does. A job's who is a server admin
// (see Scheduler.docSubject); without As, nil who acts as an anonymous
// server admin.
func (e *LocalEndpoint) As(p *policy.Policy, who *policy.Subject) *LocalEndpoint {
	e.pol, e.who = p, who
	return e
}

func (e *LocalEndpoint) Name() string { return e.db }
func (e *LocalEndpoint) Close()       {}

func (e *LocalEndpoint) wrap(err error) error {
	if errors.Is(err, coordinator.ErrDBNotFound) || errors.Is(err, coordinator.ErrNotFound) {
		return fmt.Errorf("%w: database %s: %w", ErrNotFound, e.db, err)
	}
	return err
}

func (e *LocalEndpoint) Info(ctx context.Context) (*DBInfo, error) {
	info, err := e.c.DBInfo(ctx, e.db)
	if err != nil {
		return nil, e.wrap(err)
	}
	return &DBInfo{UpdateSeq: strconv.Quote(info.UpdateSeq), InstanceStartTime: strconv.FormatInt(info.Record.CreatedUs, 10)}, nil
}

func (e *LocalEndpoint) Create(ctx context.Context) error {
	if e.create == nil {
		return errors.New("replicator: cannot create local databases")
	}
	return e.create(ctx, e.db)
}

func (e *LocalEndpoint) Changes(ctx context.Context, q ChangesQuery) (*ChangesPage, error) {
	since := seqParam(q.Since)
	cq := coordinator.ChangesQuery{Since: since, Limit: q.Limit}
	if q.Limit <= 0 {
		cq.Limit = -1
	}
	if err := e.filterQuery(ctx, q, &cq); err != nil {
		return nil, err
	}
	p := &ChangesPage{}
	read := func() error {
		last, err := e.c.Changes(ctx, e.db, cq, func(r *coordinator.ChangeRow) error {
			ch := &pb.RepChange{Id: r.Info.Id, Deleted: r.Info.Deleted, Seq: strconv.Quote(r.Seq), Revs: changeRevs(r)}
			p.Rows = append(p.Rows, ch)
			return nil
		})
		if err != nil {
			return e.wrap(err)
		}
		p.LastSeq = strconv.Quote(last)
		return nil
	}
	if err := read(); err != nil {
		return nil, err
	}
	if len(p.Rows) == 0 && q.Wait {
		got, err := e.c.Wait(ctx, e.db, seqParam(p.LastSeq), time.Duration(max(q.Timeout, 1))*time.Millisecond)
		if err != nil {
			return nil, e.wrap(err)
		}
		if got {
			cq.Since = seqParam(p.LastSeq)
			if err := read(); err != nil {
				return nil, err
			}
		}
	}
	if q.Limit > 0 && len(p.Rows) >= q.Limit {
		if n, err := e.c.PendingAfter(ctx, e.db, seqParam(p.LastSeq)); err == nil {
			p.Pending = n
		}
	}
	return p, nil
}

// Feed reads the changes after q.Since in one pass of the coordinator's
// feed and hands them on in pages while it reads.
func (e *LocalEndpoint) Feed(ctx context.Context, q ChangesQuery, size int, page func(*ChangesPage) error) error {
	since := seqParam(q.Since)
	cq := coordinator.ChangesQuery{Since: since, Limit: -1, SeqInterval: q.SeqInterval}
	if err := e.filterQuery(ctx, q, &cq); err != nil {
		return err
	}
	f := &feedPager{size: max(size, 1), since: q.Since, page: page}
	if n, err := e.c.PendingAfter(ctx, e.db, since); err == nil {
		f.pending = n
	}
	last, err := e.c.Changes(ctx, e.db, cq, func(r *coordinator.ChangeRow) error {
		ch := &pb.RepChange{Id: r.Info.Id, Deleted: r.Info.Deleted, Revs: changeRevs(r)}
		if r.Seq != "" {
			ch.Seq = strconv.Quote(r.Seq)
		}
		return f.add(ch)
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return e.wrap(err)
	}
	return f.flush(strconv.Quote(last), true)
}

// filterQuery puts q's filter into the coordinator's query: doc ids by
// id; a selector matched in the coordinator on the bodies the shards send
// with the rows, each leaf as CouchDB's style=all_docs does, so only the
// changes with a matching leaf reach the job.
func (e *LocalEndpoint) filterQuery(ctx context.Context, q ChangesQuery, cq *coordinator.ChangesQuery) error {
	if q.Filter != "" {
		if e.filters == nil {
			return fmt.Errorf("filter %q: this node runs no design-doc filters", q.Filter)
		}
		f, err := e.filters(ctx, e.db, q.Filter, q.QueryParams)
		if err != nil {
			return err
		}
		cq.DocFilter = f
	}
	return filterQuery(q, cq)
}

func filterQuery(q ChangesQuery, cq *coordinator.ChangesQuery) error {
	if q.DocIDs != nil {
		ids := make(map[string]bool, len(q.DocIDs))
		for _, id := range q.DocIDs {
			ids[id] = true
		}
		cq.Filter = func(i *pb.FullDocInfo) bool { return ids[i.Id] }
	}
	if q.Selector != nil {
		sel, err := mango.Parse(q.Selector)
		if err != nil {
			return err
		}
		cq.Selector, cq.AllLeaves = sel, true
	}
	return nil
}

// changeRevs are the revs a change row names: the leaves a selector kept,
// or all of them.
func changeRevs(r *coordinator.ChangeRow) []string {
	if r.Revs != nil {
		return r.Revs
	}
	leaves := revtree.Leaves(r.Info)
	out := make([]string, len(leaves))
	for i, l := range leaves {
		out[i] = l.Rev.String()
	}
	return out
}

func (e *LocalEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]RevDiff, error) {
	ids := make([]string, 0, len(revs))
	for id := range revs {
		ids = append(ids, id)
	}
	if err := e.c.CheckPartitionedIDs(ctx, e.db, ids); err != nil {
		// as a partitioned CouchDB's _revs_diff: the batch, and the
		// replication, fail
		return nil, e.wrap(err)
	}
	infos, err := e.c.GetDocInfos(ctx, e.db, ids)
	if err != nil {
		return nil, e.wrap(err)
	}
	out := map[string]RevDiff{}
	for i, id := range ids {
		var d RevDiff
		var maxPos uint64
		for _, s := range revs[id] {
			r, err := revtree.ParseRev(s)
			if err != nil {
				return nil, fmt.Errorf("replicator: bad rev %q of %q", s, id)
			}
			if infos[i] == nil || revtree.Find(infos[i], r) < 0 {
				d.Missing = append(d.Missing, s)
				maxPos = max(maxPos, r.Pos)
			}
		}
		if len(d.Missing) == 0 {
			continue
		}
		if infos[i] != nil {
			for _, l := range revtree.Leaves(infos[i]) {
				if l.Rev.Pos < maxPos {
					d.Ancestors = append(d.Ancestors, l.Rev.String())
				}
			}
		}
		out[id] = d
	}
	return out, nil
}

func (e *LocalEndpoint) Fetch(ctx context.Context, items []FetchItem, emit func(string, []byte)) (FetchStats, error) {
	ms := make([]*pb.GetDoc, len(items))
	for i, it := range items {
		ms[i] = &pb.GetDoc{Id: it.ID, Revs: []string{it.Rev}, Latest: true, WithAttsData: true}
	}
	got, err := e.c.GetDocs(ctx, e.db, ms)
	if err != nil {
		return FetchStats{}, e.wrap(err)
	}
	for i, it := range items {
		r, err := got[i].Reply, got[i].Err
		if err != nil {
			if errors.Is(e.wrap(err), ErrNotFound) {
				continue
			}
			return FetchStats{}, err
		}
		if r.Info == nil {
			continue
		}
		// as _bulk_docs new_edits=false wants it: _revisions, attachments
		// inline when newer than atts_since, as stored (the encoded form
		// the writers keep: the target gets the same bytes and digest)
		o := &couchdoc.Options{Revs: true, Attachments: true, AttsSince: it.AttsSince, EncodedData: true}
		for _, b := range r.Bodies {
			if b.Missing {
				continue
			}
			emit(it.ID, couchdoc.Append(nil, it.ID, r.Info, b, o))
		}
	}
	return FetchStats{}, nil
}

func (e *LocalEndpoint) BulkDocs(ctx context.Context, docs [][]byte) (int, error) {
	ups := make([]*pb.DocUpdate, 0, len(docs))
	failures := 0
	for _, raw := range docs {
		u, err := parseRepDoc(uint32(len(ups)), raw)
		if err != nil {
			failures++
			continue
		}
		ups = append(ups, u)
	}
	var out []coordinator.Outcome
	var err error
	if e.pol != nil {
		who := e.who
		if who == nil {
			who = policy.Admin("")
		}
		out, err = e.pol.Write(ctx, who, e.db, ups, false, 0)
	} else {
		out, err = e.c.UpdateDocs(ctx, e.db, ups, false, 0)
	}
	if err != nil {
		return 0, e.wrap(err)
	}
	for _, o := range out {
		if o.Err != nil {
			failures++
		}
	}
	return failures, nil
}

// parseRepDoc turns a fetched revision into a shard update.
func parseRepDoc(tag uint32, raw []byte) (*pb.DocUpdate, error) {
	d, err := docjson.ParseDoc(raw)
	if err != nil {
		return nil, err
	}
	if !d.HasID || d.ID == "" {
		return nil, errors.New("replicator: doc without _id")
	}
	u := &pb.DocUpdate{Tag: tag, Id: d.ID, Body: d.Body, Rev: d.Rev, Deleted: d.Deleted, HasAtts: d.HasAttachments}
	if d.Revisions != nil {
		u.Revisions = &pb.Revisions{Start: d.Revisions.Start, Ids: d.Revisions.IDs}
	}
	if d.HasAttachments && len(d.Attachments) > 2 {
		// stored as the gateway stores them (compressible types gzipped),
		// or as the source stored them when it says so (encodeAtts)
		if u.Atts, err = couchdoc.ParseAttachmentsEncoded(d.Attachments); err != nil {
			return nil, err
		}
	}
	return u, nil
}

func (e *LocalEndpoint) GetLocal(ctx context.Context, id string) ([]byte, error) {
	d, err := e.c.GetLocal(ctx, e.db, "_local/"+id)
	if err != nil {
		if errors.Is(e.wrap(err), ErrNotFound) {
			if _, ierr := e.c.DBInfo(ctx, e.db); ierr != nil {
				return nil, e.wrap(ierr)
			}
			return nil, nil
		}
		return nil, err
	}
	return d.Json, nil
}

func (e *LocalEndpoint) PutLocal(ctx context.Context, id string, body []byte) error {
	d, err := docjson.ParseDoc(body)
	if err != nil {
		return err
	}
	_, err = e.c.PutLocal(ctx, e.db, &pb.PutLocal{Id: "_local/" + id, Json: d.Body})
	return e.wrap(err)
}
