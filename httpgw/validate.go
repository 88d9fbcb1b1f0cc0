package httpgw

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// validate_doc_update: every design doc of a database may have one, and
// every write to the database passes each (CouchDB runs them on single
// writes, _bulk_docs, attachments, COPY and replicated revisions alike,
// with newDoc, oldDoc, userCtx and secObj, the design doc as `this`). A
// write to a database without any costs a cache lookup: the functions are
// read once a second per database, and at once after a design doc is
// written through this node (other nodes' edits are seen within the
// second, as CouchDB's ddoc cache follows edits a little late too).

const designTTL = time.Second

// designCache keeps what a database's design docs define (its
// validate_doc_update functions, its Mango indexes), read at most once
// per designTTL, and at once after a design doc is written through this
// node (forget).
type designCache[T any] struct {
	mu sync.Mutex
	m  map[string]designEntry[T]
}

type designEntry[T any] struct {
	v  T
	at time.Time
}

func (c *designCache[T]) forget(db string) {
	c.mu.Lock()
	delete(c.m, db)
	c.mu.Unlock()
}

// get answers db's entry, loaded anew when older than designTTL.
func (c *designCache[T]) get(db string, load func() (T, error)) (T, error) {
	c.mu.Lock()
	e, ok := c.m[db]
	c.mu.Unlock()
	if ok && time.Since(e.at) < designTTL {
		return e.v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]designEntry[T]{}
	}
	c.m[db] = designEntry[T]{v: v, at: time.Now()}
	c.mu.Unlock()
	return v, nil
}

// forgetDesigns drops what the caches hold of db's design docs (a design
// doc was written).
func (g *Gateway) forgetDesigns(db string) {
	g.vdus.forget(db)
	g.mangoIdx.forget(db)
}

// vduFn is one design doc's validate_doc_update and the doc it runs with.
type vduFn struct {
	src  string
	ddoc []byte
}

// validators are db's validate_doc_update functions, in design doc id
// order.
func (g *Gateway) validators(rq *req, db string) ([]vduFn, error) {
	return g.vdus.get(db, func() ([]vduFn, error) {
		var fns []vduFn
		err := g.eachDesign(rq, db, func(_ string, body []byte) {
			var d struct {
				VDU *string `json:"validate_doc_update"`
			}
			if json.Unmarshal(body, &d) == nil && d.VDU != nil && strings.TrimSpace(*d.VDU) != "" {
				fns = append(fns, vduFn{src: *d.VDU, ddoc: append([]byte(nil), body...)})
			}
		})
		return fns, err
	})
}

// skipValidation: design docs are not validated (only db admins write
// them) and neither are local docs, as in CouchDB.
func (g *Gateway) skipValidation(id string) bool {
	return isDesign(id) || strings.HasPrefix(id, "_local/") || g.cfg.JS == nil
}

// validateWrite runs db's validate_doc_update functions on a write of d to
// id: nil, or the first refusal (403 forbidden, 401 unauthorized, other
// throws as CouchDB answers them). A write that will conflict is not
// validated (CouchDB finds the conflict first and answers it), nor a
// replicated revision the doc already has (CouchDB ignores it).
// wouldConflict is whether a new_edits write of d is a conflict (the doc
// is there and no rev is given, or the given rev is not there): CouchDB
// checks that before it validates a doc, so a conflicting write answers
// 409 whatever its body (a design doc's bad fields too).
func (g *Gateway) wouldConflict(rq *req, db, id string, d *docjson.Doc) bool {
	rev := d.Rev
	if !d.HasRev {
		rev = ""
	}
	r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: nonEmpty(rev)})
	found := err == nil && r.Info != nil && len(r.Bodies) > 0 && !r.Bodies[0].Missing
	return (rev == "" && found && !r.Bodies[0].Deleted) || (rev != "" && !found)
}

func (g *Gateway) validateWrite(rq *req, db, id string, d *docjson.Doc, newEdits bool) error {
	if g.skipValidation(id) {
		return nil
	}
	fns, err := g.validators(rq, db)
	if err != nil || len(fns) == 0 {
		return err
	}
	old := []byte("null")
	rev, revs := d.Rev, d.Revisions
	if !d.HasRev {
		rev = ""
	}
	if newEdits {
		r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: nonEmpty(rev)})
		found := err == nil && r.Info != nil && len(r.Bodies) > 0 && !r.Bodies[0].Missing
		switch {
		case rev == "" && found && !r.Bodies[0].Deleted:
			return nil // a conflict: the doc is there and no rev was given
		case rev != "" && !found:
			return nil // a conflict: no such revision
		case rev != "":
			// newDoc carries the rev it edits and that rev's history, as
			// CouchDB's does before the new rev is made
			old = couchdoc.Append(nil, id, r.Info, r.Bodies[0], &couchdoc.Options{Revs: true})
			revs = revPath(r.Info, rev)
		}
	} else {
		if revs == nil {
			if p, err := revtree.ParseRev(rev); err == nil {
				revs = &docjson.Revisions{Start: p.Pos, IDs: []string{p.Hash}}
			}
		}
		if revs == nil || len(revs.IDs) == 0 {
			return nil // a bad rev: the write refuses it
		}
		rev = revtree.Rev{Pos: revs.Start, Hash: revs.IDs[0]}.String()
		var ok bool
		if old, ok = g.replicatedOld(rq, db, id, revs); !ok {
			return nil
		}
	}
	newDoc := vduDoc(id, rev, revs, d.Deleted, d.Body, d.Attachments)
	return g.runValidators(rq, db, fns, newDoc, old)
}

// replicatedOld is a new_edits=false revision's oldDoc, as CouchDB's
// prep_and_validate_replicated_updates finds it: the first revision of
// its history (after itself) that the database has a body of, or null.
// ok is false when the revision is in the doc already (not validated).
func (g *Gateway) replicatedOld(rq *req, db, id string, revs *docjson.Revisions) (old []byte, ok bool) {
	path := make([]string, len(revs.IDs))
	for i, h := range revs.IDs {
		if uint64(i) >= revs.Start {
			path = path[:i]
			break
		}
		path[i] = revtree.Rev{Pos: revs.Start - uint64(i), Hash: h}.String()
	}
	r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: path})
	if err != nil || r.Info == nil {
		return []byte("null"), true
	}
	bodies := map[string]*pb.RevBody{}
	for _, b := range r.Bodies {
		if !b.Missing {
			bodies[b.Rev] = b
		}
	}
	for i, rv := range path {
		b := bodies[rv]
		if b == nil {
			if p, err := revtree.ParseRev(rv); i == 0 && err == nil && revtree.Find(r.Info, p) >= 0 {
				return nil, false // in the tree already, body or not
			}
			continue
		}
		if i == 0 {
			return nil, false
		}
		return couchdoc.Append(nil, id, r.Info, b, &couchdoc.Options{Revs: true}), true
	}
	return []byte("null"), true
}

// validateAttWrite validates an attachment's PUT or DELETE (u, made from
// base, the revision it edits, or from nothing): newDoc is the doc with
// the attachment added or gone, its attachments as stubs.
func (g *Gateway) validateAttWrite(rq *req, db string, info *pb.FullDocInfo, base *pb.RevBody, u *pb.DocUpdate) error {
	if g.skipValidation(u.Id) {
		return nil
	}
	fns, err := g.validators(rq, db)
	if err != nil || len(fns) == 0 {
		return err
	}
	old := []byte("null")
	var revs *docjson.Revisions
	var pos uint64
	if base != nil {
		old = couchdoc.Append(nil, u.Id, info, base, &couchdoc.Options{Revs: true})
		revs = revPath(info, base.Rev)
		if revs != nil {
			pos = revs.Start
		}
	}
	metas := map[string]*pb.AttMeta{}
	if base != nil {
		for _, a := range base.Atts {
			metas[a.Name] = a
		}
	}
	atts := []byte{'{'}
	for i, a := range u.Atts {
		m := &pb.AttMeta{Name: a.Name, ContentType: a.ContentType, Digest: a.Digest, Length: uint64(len(a.Data)), Revpos: pos + 1}
		if a.Stub && metas[a.Name] != nil {
			m = metas[a.Name]
		}
		if i > 0 {
			atts = append(atts, ',')
		}
		atts = docjson.AppendString(atts, m.Name)
		atts = append(atts, `:{"content_type":`...)
		atts = docjson.AppendString(atts, m.ContentType)
		atts = append(atts, `,"revpos":`...)
		atts = strconv.AppendUint(atts, m.Revpos, 10)
		if m.Digest != "" {
			atts = append(atts, `,"digest":`...)
			atts = docjson.AppendString(atts, m.Digest)
		}
		atts = append(atts, `,"length":`...)
		atts = strconv.AppendUint(atts, m.Length, 10)
		atts = append(atts, `,"stub":true}`...)
	}
	atts = append(atts, '}')
	if len(u.Atts) == 0 {
		atts = nil
	}
	newDoc := vduDoc(u.Id, u.Rev, revs, false, u.Body, atts)
	return g.runValidators(rq, db, fns, newDoc, old)
}

// runValidators runs each function with the design doc it belongs to as
// `this`; every one must pass.
func (g *Gateway) runValidators(rq *req, db string, fns []vduFn, newDoc, old []byte) error {
	userCtx := userCtxJSON(rq, db)
	sec := g.secObj(rq, db)
	for _, f := range fns {
		if err := g.cfg.JS.DDoc(db, f.ddoc).ValidateDocUpdate(rq.ctx, f.src, newDoc, old, userCtx, sec); err != nil {
			return err // a *couchjs.Error: errors.go gives its status
		}
	}
	return nil
}

// userCtxJSON is the user as CouchDB's functions see it: {db, name, roles}.
func userCtxJSON(rq *req, db string) []byte {
	user := map[string]any{"db": db, "name": nil, "roles": []string{}}
	if rq.user != nil {
		user["name"], user["roles"] = rq.user.Name, rq.user.Roles
		if rq.user.Roles == nil {
			user["roles"] = []string{}
		}
	}
	b, _ := json.Marshal(user)
	return b
}

// secObj is the database's security object ({} when none was set).
func (g *Gateway) secObj(rq *req, db string) []byte {
	if info, err := g.c.DBInfo(rq.ctx, db); err == nil && len(info.Meta.Security) > 0 {
		return info.Meta.Security
	}
	return []byte("{}")
}

func nonEmpty(rev string) []string {
	if rev == "" {
		return nil
	}
	return []string{rev}
}

// revPath is rev's history in info as _revisions (nil if not there).
func revPath(info *pb.FullDocInfo, rev string) *docjson.Revisions {
	r, err := revtree.ParseRev(rev)
	if err != nil || info == nil {
		return nil
	}
	idx := revtree.Find(info, r)
	if idx < 0 {
		return nil
	}
	path := revtree.Path(info, idx)
	out := &docjson.Revisions{Start: path[0].Pos}
	for _, p := range path {
		out.IDs = append(out.IDs, p.Hash)
	}
	return out
}

// vduDoc is a doc as a validate function sees it, in couch_doc's member
// order: _id, _rev, the body, _deleted, _revisions, _attachments.
func vduDoc(id, rev string, revs *docjson.Revisions, deleted bool, body, atts []byte) []byte {
	b := append([]byte(`{"_id":`), docjson.AppendString(nil, id)...)
	if rev != "" {
		b = append(b, `,"_rev":`...)
		b = docjson.AppendString(b, rev)
	}
	if len(body) > 2 {
		b = append(b, ',')
		b = append(b, body[1:len(body)-1]...)
	}
	if deleted {
		b = append(b, `,"_deleted":true`...)
	}
	if rev != "" && revs != nil && len(revs.IDs) > 0 {
		b = append(b, `,"_revisions":{"start":`...)
		b = strconv.AppendUint(b, revs.Start, 10)
		b = append(b, `,"ids":[`...)
		for i, h := range revs.IDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = docjson.AppendString(b, h)
		}
		b = append(b, "]}"...)
	}
	if len(atts) > 2 {
		b = append(b, `,"_attachments":`...)
		b = append(b, atts...)
	}
	return append(b, '}')
}

// eachDesign calls f with the id and body of each live design doc of db,
// in id order.
func (g *Gateway) eachDesign(rq *req, db string, f func(id string, body []byte)) error {
	q := coordinator.RangeQuery{StartKey: "_design/", EndKey: "_design0", HasStart: true, HasEnd: true, IncludeDocs: true, Limit: -1}
	return g.c.AllDocs(rq.ctx, db, q, func(row *pb.Row) error {
		if row.Json != nil && row.Info != nil && !row.Info.Deleted {
			f(row.Info.Id, row.Json)
		}
		return nil
	})
}
