package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/mango"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/views"
)

// Design docs: the one loader and the one cache of them. Everything that
// runs or reads what a design doc defines — validate_doc_update here, the
// gateway's views, shows, lists, updates, filters, rewrites and Mango
// indexes, a local source's replication filter — asks Design or Designs.
// A database's live design docs are read together, with one _all_docs
// range read, at most once per designTTL, and at once after a design doc
// is written through this node (ForgetDesigns, which Write calls) or the
// database is another incarnation of its name; each is parsed once per
// load, and its sandbox found once. A design doc written or deleted
// through another node is seen within the second (CouchDB's ddoc cache
// follows edits a little late too); one the cache does not hold is read
// at once (Design), so a new one is never missed.
//
// views/service.go keeps a DesignCache of its own: the index builder
// parses the design doc bytes a query carries across the cluster, by
// content hash, below the policy in the import graph.

const designTTL = time.Second

// ErrDesignDeleted is Design's answer for a design doc that was deleted
// (ErrMissing for one that never was). Both are not_found, and errors.Is
// matches a *pb.Error by its name only: compare with ==.
var ErrDesignDeleted = &pb.Error{Code: "not_found", Reason: "deleted"}

// Design is one live design doc of a database, read and parsed once per
// load and shared by every caller until the next: callers must not change
// anything it holds.
type Design struct {
	DB, ID, Rev string
	// Body is the doc as its functions see `this`: _id, _rev, the stored
	// members, _attachments as stubs (bytes a sandbox is keyed by, and a
	// show's ETag is made of).
	Body []byte
	// Members are Body's top-level members.
	Members map[string]json.RawMessage
	// Def is the doc's views as the index is built from them; nil when
	// they do not parse, with DefErr saying why (CouchDB's answer to a
	// query of such a doc).
	Def    *views.Def
	DefErr error
	// JS is the doc's sandbox (couchjs.Pool.DDoc of Body); nil without
	// JavaScript. Every function of the doc runs there.
	JS *couchjs.DDoc

	fns         map[string]map[string]json.RawMessage // filters, shows, lists, updates, views
	vdu         string                                // validate_doc_update, "" when none
	partitioned bool                                  // the database is

	mangoOnce sync.Once
	mango     []*mango.Index
}

// fnMembers are the members whose values are objects of functions by
// name (views: of {map, reduce} objects).
var fnMembers = []string{"filters", "shows", "lists", "updates", "views"}

// Func is member.name of the doc (a filter's, show's, list's or update's
// source, a view's object) as JSON; ok is false when the doc has none.
func (d *Design) Func(member, name string) (raw json.RawMessage, ok bool) {
	raw, ok = d.fns[member][name]
	return raw, ok
}

// Source is member.name as a function's source: ok is false when the doc
// has none or it is no string.
func (d *Design) Source(member, name string) (src string, ok bool) {
	raw, ok := d.Func(member, name)
	if !ok || json.Unmarshal(raw, &src) != nil {
		return "", false
	}
	return src, true
}

// MangoIndexes are the doc's Mango indexes (a "query" language doc's
// views CouchDB would not skip as invalid), in view name order; none for
// another doc.
func (d *Design) MangoIndexes() []*mango.Index {
	d.mangoOnce.Do(func() {
		if !bytes.Contains(d.Body, []byte(`"query"`)) {
			return // not a query-language design doc: no need to parse
		}
		if idxs, err := mango.ParseIndexDesign(d.Body, d.partitioned); err == nil {
			d.mango = idxs
		}
	})
	return d.mango
}

// newDesign reads a design doc's revision rb into a Design.
func (p *Policy) newDesign(db string, partitioned bool, info *pb.FullDocInfo, rb *pb.RevBody) *Design {
	d := &Design{DB: db, ID: info.Id, Rev: rb.Rev, partitioned: partitioned}
	d.Body = couchdoc.Append(nil, info.Id, info, rb, nil)
	if json.Unmarshal(d.Body, &d.Members) != nil {
		d.Members = nil // stored bodies are objects; this does not happen
	}
	for _, m := range fnMembers {
		var fns map[string]json.RawMessage
		if json.Unmarshal(d.Members[m], &fns) == nil && fns != nil {
			if d.fns == nil {
				d.fns = map[string]map[string]json.RawMessage{}
			}
			d.fns[m] = fns
		}
	}
	var src string
	if json.Unmarshal(d.Members["validate_doc_update"], &src) == nil && strings.TrimSpace(src) != "" {
		d.vdu = src
	}
	d.Def, d.DefErr = views.ParseDesign(info.Id, d.Body)
	d.JS = p.cfg.JS.DDoc(db, d.Body) // nil without a pool
	return d
}

// designSet is what the cache holds of one database: its live design docs
// as one load found them.
type designSet struct {
	uuid        string // the database's incarnation
	partitioned bool
	all         []*Design // by id
	vdus        []vduFn   // their validate_doc_update functions, by id
	at          time.Time
}

func (s *designSet) find(id string) *Design {
	for _, d := range s.all {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// designLoad is a load in flight: callers that want the same database
// meanwhile wait for it rather than read it again.
type designLoad struct {
	done chan struct{}
	set  *designSet
	err  error
}

// designCache is the Policy's cache of design docs, by database.
type designCache struct {
	mu      sync.Mutex
	m       map[string]*designSet
	loading map[string]*designLoad
}

// ForgetDesigns drops what the policy holds of db's design docs (one was
// written or deleted): the next caller reads them again, and a load
// already running is not kept.
func (p *Policy) ForgetDesigns(db string) {
	p.designs.mu.Lock()
	delete(p.designs.m, db)
	delete(p.designs.loading, db)
	p.designs.mu.Unlock()
}

// Designs are db's live design docs, in id order.
func (p *Policy) Designs(ctx context.Context, db string) ([]*Design, error) {
	s, err := p.designSet(ctx, db)
	if err != nil {
		return nil, err
	}
	return s.all, nil
}

// Design is db's live design doc id (with its "_design/" prefix):
// ErrMissing when there is none, ErrDesignDeleted when it was deleted.
func (p *Policy) Design(ctx context.Context, db, id string) (*Design, error) {
	s, err := p.designSet(ctx, db)
	if err != nil {
		return nil, err
	}
	if d := s.find(id); d != nil {
		return d, nil
	}
	// not among the live ones the load found: read it, to tell a deleted
	// doc from a missing one, and to find one written through another
	// node since
	r, err := p.c.GetDocR(ctx, db, &pb.GetDoc{Id: id}, 1)
	if errors.Is(err, coordinator.ErrNotFound) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, err
	}
	if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing {
		return nil, ErrMissing
	}
	if r.Bodies[0].Deleted {
		return nil, ErrDesignDeleted
	}
	if strings.HasPrefix(id, "_design/") {
		p.ForgetDesigns(db) // the cache is behind: the next caller reloads
	}
	return p.newDesign(db, s.partitioned, r.Info, r.Bodies[0]), nil
}

// validators are db's validate_doc_update functions, in design doc id
// order.
func (p *Policy) validators(ctx context.Context, db string) ([]vduFn, error) {
	s, err := p.designSet(ctx, db)
	if err != nil {
		return nil, err
	}
	return s.vdus, nil
}

// designSet answers db's entry, read anew when older than designTTL or of
// another incarnation of the database.
func (p *Policy) designSet(ctx context.Context, db string) (*designSet, error) {
	rec, _, err := p.c.ShardMap(ctx, db)
	if err != nil {
		return nil, err
	}
	c := &p.designs
	for {
		c.mu.Lock()
		if s := c.m[db]; s != nil && s.uuid == rec.Uuid && time.Since(s.at) < designTTL {
			c.mu.Unlock()
			return s, nil
		}
		if l := c.loading[db]; l != nil {
			c.mu.Unlock()
			select {
			case <-l.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if l.err != nil && ctx.Err() == nil && (errors.Is(l.err, context.Canceled) || errors.Is(l.err, context.DeadlineExceeded)) {
				continue // the loader's request ended, not ours: load again
			}
			return l.set, l.err
		}
		l := &designLoad{done: make(chan struct{})}
		if c.loading == nil {
			c.loading = map[string]*designLoad{}
		}
		c.loading[db] = l
		c.mu.Unlock()

		l.set, l.err = p.loadDesigns(ctx, db, rec)
		c.mu.Lock()
		if c.loading[db] == l { // not forgotten meanwhile: a write did not overtake the read
			delete(c.loading, db)
			if l.err == nil {
				if c.m == nil {
					c.m = map[string]*designSet{}
				}
				c.m[db] = l.set
			}
		}
		c.mu.Unlock()
		close(l.done)
		return l.set, l.err
	}
}

// loadDesigns reads db's live design docs.
func (p *Policy) loadDesigns(ctx context.Context, db string, rec *pb.DbRecord) (*designSet, error) {
	s := &designSet{uuid: rec.Uuid, partitioned: rec.Partitioned, at: time.Now()}
	err := p.c.AllDocs(ctx, db, designRange, func(row *pb.Row) error {
		if row.Json == nil || row.Info == nil || row.Info.Deleted {
			return nil
		}
		d := p.newDesign(db, rec.Partitioned, row.Info, &pb.RevBody{Rev: row.Info.Winner, Json: row.Json, Atts: row.Atts})
		s.all = append(s.all, d)
		if d.vdu != "" && d.JS != nil {
			s.vdus = append(s.vdus, vduFn{id: d.ID, src: d.vdu, sb: d.JS})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// designRange is the _all_docs range of the design docs, with the docs.
var designRange = coordinator.RangeQuery{StartKey: "_design/", EndKey: "_design0", HasStart: true, HasEnd: true, IncludeDocs: true, Limit: -1}

// EachDesign calls f with the id and stored body (without _id and _rev)
// of each live design doc of db, in id order, read now: for work that
// must not miss a design doc written through another node within the
// last second (view cleanup drops the indexes no design doc names).
func EachDesign(ctx context.Context, c *coordinator.Coordinator, db string, f func(id string, body []byte)) error {
	return c.AllDocs(ctx, db, designRange, func(row *pb.Row) error {
		if row.Json != nil && row.Info != nil && !row.Info.Deleted {
			f(row.Info.Id, row.Json)
		}
		return nil
	})
}
