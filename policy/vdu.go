package policy

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
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

// designs keeps each database's validate_doc_update functions, read at
// most once per designTTL, and at once after a design doc is written
// through this node (ForgetDesigns).
type designs struct {
	mu sync.Mutex
	m  map[string]designEntry
}

type designEntry struct {
	fns []vduFn
	at  time.Time
}

// vduFn is one design doc's validate_doc_update and the doc it runs with.
type vduFn struct {
	id  string
	src string
	sb  *couchjs.DDoc // the design doc's sandbox, found once per load
}

// ForgetDesigns drops what the policy holds of db's design docs (one was
// written or deleted).
func (p *Policy) ForgetDesigns(db string) {
	p.designs.mu.Lock()
	delete(p.designs.m, db)
	p.designs.mu.Unlock()
}

// validators are db's validate_doc_update functions, in design doc id
// order.
func (p *Policy) validators(ctx context.Context, db string) ([]vduFn, error) {
	p.designs.mu.Lock()
	e, ok := p.designs.m[db]
	p.designs.mu.Unlock()
	if ok && time.Since(e.at) < designTTL {
		return e.fns, nil
	}
	var fns []vduFn
	err := EachDesign(ctx, p.c, db, func(id string, body []byte) {
		var d map[string]json.RawMessage
		if json.Unmarshal(body, &d) != nil {
			return
		}
		var src string
		if json.Unmarshal(d["validate_doc_update"], &src) == nil && strings.TrimSpace(src) != "" {
			fns = append(fns, vduFn{id: id, src: src, sb: p.cfg.JS.DDoc(db, append([]byte(nil), body...))})
		}
	})
	if err != nil {
		return nil, err
	}
	p.designs.mu.Lock()
	if p.designs.m == nil {
		p.designs.m = map[string]designEntry{}
	}
	p.designs.m[db] = designEntry{fns: fns, at: time.Now()}
	p.designs.mu.Unlock()
	return fns, nil
}

// EachDesign calls f with the id and body of each live design doc of db,
// in id order.
func EachDesign(ctx context.Context, c *coordinator.Coordinator, db string, f func(id string, body []byte)) error {
	q := coordinator.RangeQuery{StartKey: "_design/", EndKey: "_design0", HasStart: true, HasEnd: true, IncludeDocs: true, Limit: -1}
	return c.AllDocs(ctx, db, q, func(row *pb.Row) error {
		if row.Json != nil && row.Info != nil && !row.Info.Deleted {
			f(row.Info.Id, row.Json)
		}
		return nil
	})
}

// runValidators runs each function with the design doc it belongs to as
// `this`; every one must pass.
func (p *Policy) runValidators(ctx context.Context, s *Subject, db string, fns []vduFn, newDoc, old []byte) error {
	sec, err := p.Security(ctx, s, db)
	if err != nil {
		return err
	}
	userCtx := s.UserCtx(db)
	for _, f := range fns {
		if err := f.sb.ValidateDocUpdate(ctx, f.src, newDoc, old, userCtx, sec.Raw); err != nil {
			return err // a *couchjs.Error: the gateway's table gives its status
		}
	}
	return nil
}

// replicatedOld is a new_edits=false revision's oldDoc, as CouchDB's
// prep_and_validate_replicated_updates finds it: the first revision of
// its history (after itself) that the database has a body of, or null.
// ok is false when the revision is in the doc already (not validated).
func (p *Policy) replicatedOld(ctx context.Context, db, id string, revs *pb.Revisions) (old []byte, ok bool) {
	path := make([]string, len(revs.Ids))
	for i, h := range revs.Ids {
		if uint64(i) >= revs.Start {
			path = path[:i]
			break
		}
		path[i] = revtree.Rev{Pos: revs.Start - uint64(i), Hash: h}.String()
	}
	r, err := p.c.GetDoc(ctx, db, &pb.GetDoc{Id: id, Revs: path})
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
			if pr, err := revtree.ParseRev(rv); i == 0 && err == nil && revtree.Find(r.Info, pr) >= 0 {
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

// revPath is rev's history in info as _revisions (nil if not there).
func revPath(info *pb.FullDocInfo, rev string) *pb.Revisions {
	r, err := revtree.ParseRev(rev)
	if err != nil || info == nil {
		return nil
	}
	idx := revtree.Find(info, r)
	if idx < 0 {
		return nil
	}
	path := revtree.Path(info, idx)
	out := &pb.Revisions{Start: path[0].Pos}
	for _, pr := range path {
		out.Ids = append(out.Ids, pr.Hash)
	}
	return out
}

// vduDoc is a doc as a validate function sees it, in couch_doc's member
// order: _id, _rev, the body, _deleted, _revisions, _attachments (as
// stubs: CouchDB renders newDoc without attachment data).
func vduDoc(id, rev string, revs *pb.Revisions, deleted bool, body, atts []byte) []byte {
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
	if rev != "" && revs != nil && len(revs.Ids) > 0 {
		b = append(b, `,"_revisions":{"start":`...)
		b = strconv.AppendUint(b, revs.Start, 10)
		b = append(b, `,"ids":[`...)
		for i, h := range revs.Ids {
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

// attStubs renders a write's attachments as newDoc shows them: stubs,
// those the write keeps from its parent with the parent's metadata, new
// ones with their data's length and digest and revpos one past the
// parent's. nil when the write has none.
func attStubs(u *pb.DocUpdate, parent *pb.RevBody, pos uint64) []byte {
	if len(u.Atts) == 0 {
		return nil
	}
	metas := map[string]*pb.AttMeta{}
	if parent != nil {
		for _, a := range parent.Atts {
			metas[a.Name] = a
		}
	}
	atts := []byte{'{'}
	for i, a := range u.Atts {
		length := a.Length
		if length == 0 && len(a.Data) > 0 && a.Encoding == "" {
			length = uint64(len(a.Data))
		}
		revpos := pos + 1
		if a.Stub && a.Revpos > 0 {
			revpos = a.Revpos
		}
		m := &pb.AttMeta{Name: a.Name, ContentType: a.ContentType, Digest: a.Digest, Length: length, Revpos: revpos}
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
	return append(atts, '}')
}
