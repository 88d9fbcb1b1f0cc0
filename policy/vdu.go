package policy

import (
	"context"
	"strconv"

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
// write to a database without any costs a cache lookup: the functions
// come with the database's design docs (designs.go), read once a second
// per database, and at once after a design doc is written through this
// node.

// vduFn is one design doc's validate_doc_update and the doc it runs with.
type vduFn struct {
	id  string
	src string
	sb  *couchjs.DDoc // the design doc's sandbox (Design.JS)
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
