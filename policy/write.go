package policy

import (
	"context"
	"errors"
	"strings"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/views"
)

// Write writes docs as s: the subject must be a member of db, and each doc
// passes the rules (Check); a refused doc answers its error and is not
// written, the others go to the coordinator together with w. docs are
// tagged 0..n-1 by the caller (their tags are kept); the outcomes come
// back in the same order. _local docs must not be in docs: they have no
// rules beyond the members' and _users' (CheckLocal), and the caller
// stores them as local docs.
func (p *Policy) Write(ctx context.Context, s *Subject, db string, docs []*pb.DocUpdate, newEdits bool, w int) ([]coordinator.Outcome, error) {
	if err := p.RequireMember(ctx, s, db); err != nil {
		return nil, err
	}
	refused, err := p.Check(ctx, s, db, docs, newEdits)
	if err != nil {
		return nil, err
	}
	out := make([]coordinator.Outcome, len(docs))
	var send []*pb.DocUpdate
	var at []int // the batch position of send[i]
	design := false
	for i, u := range docs {
		if refused[i] != nil {
			out[i].Err = refused[i]
			continue
		}
		design = design || strings.HasPrefix(u.Id, "_design/")
		send, at = append(send, u), append(at, i)
	}
	if design {
		defer p.ForgetDesigns(db) // after the write too: a read in between cached the old
		p.ForgetDesigns(db)
	}
	if len(send) == 0 && len(docs) > 0 {
		return out, nil // (an empty batch still asks the coordinator: no such db is 404)
	}
	if len(send) < len(docs) {
		// the coordinator answers by tag, 0..n-1: the docs sent are
		// tagged anew in updates of their own (the copies read a doc after
		// the quorum answered, so the caller's must not change under them)
		for i, u := range send {
			send[i] = &pb.DocUpdate{Tag: uint32(i), Id: u.Id, Body: u.Body, Rev: u.Rev, Deleted: u.Deleted,
				Revisions: u.Revisions, Atts: u.Atts, HasAtts: u.HasAtts, RevHash: u.RevHash}
		}
	}
	written, err := p.c.UpdateDocs(ctx, db, send, newEdits, w)
	if err != nil {
		return nil, err
	}
	for i, o := range written {
		out[at[i]] = o
	}
	return out, nil
}

// Check applies the write rules to each of docs, written as s: a nil
// error for a doc that may be written, else its refusal (a *pb.Error in
// CouchDB's terms). A doc's body may be rewritten (a _users password is
// hashed, a _replicator doc gets its owner). err is set when the rules
// could not be decided (a read failed): nothing must be written then.
func (p *Policy) Check(ctx context.Context, s *Subject, db string, docs []*pb.DocUpdate, newEdits bool) (refused []*pb.Error, err error) {
	refused = make([]*pb.Error, len(docs))
	// a repeated id: each entry is checked against the database as it was
	// before the batch, as CouchDB does (an entry naming the revision an
	// earlier one will make is a conflict, not a write past the rules)
	var repeated map[string]bool
	if newEdits && len(docs) > 1 {
		seen := make(map[string]bool, len(docs))
		for _, u := range docs {
			if seen[u.Id] {
				if repeated == nil {
					repeated = map[string]bool{}
				}
				repeated[u.Id] = true
			}
			seen[u.Id] = true
		}
	}
	usersAdmin := db == UsersDB && p.UsersAdmin(ctx, s)
	var designErr error
	designChecked := false
	var fns []vduFn
	fnsLoaded := false
	for i, u := range docs {
		design := strings.HasPrefix(u.Id, "_design/")
		if strings.HasPrefix(u.Id, "_local/") {
			if db == UsersDB && !usersAdmin && !s.anonymous() {
				refused[i] = ErrMissing
			}
			continue
		}
		if lerr := p.checkSizes(u); lerr != nil {
			refused[i] = lerr
			continue
		}
		var rerr error
		switch {
		case db == UsersDB:
			rerr = p.checkUserWrite(ctx, s, usersAdmin, u, newEdits)
		case db == ReplicatorDB && !design:
			rerr = p.checkReplicatorWrite(ctx, s, u)
		}
		if rerr != nil {
			if refused[i], err = asRefusal(rerr); err != nil {
				return nil, err
			}
			continue
		}
		if design {
			if !designChecked {
				designErr, designChecked = p.RequireDBAdmin(ctx, s, db), true
			}
			if designErr != nil {
				// a design doc from a member fails alone, as in CouchDB
				if refused[i], err = asRefusal(designErr); err != nil {
					return nil, err
				}
				continue
			}
			if !u.Deleted {
				if derr := p.CheckDesign(ctx, db, u.Id, u.Body); derr != nil {
					if newEdits {
						if c, _ := p.parentState(ctx, db, u); c {
							refused[i] = ErrConflict // CouchDB finds the conflict first
							continue
						}
					}
					if refused[i], err = asRefusal(derr); err != nil {
						return nil, err
					}
				}
			}
			continue
		}
		if !fnsLoaded && p.cfg.JS != nil {
			if fns, err = p.validators(ctx, db); err != nil {
				return nil, err
			}
			fnsLoaded = true
		}
		if newEdits {
			if len(fns) == 0 && !repeated[u.Id] {
				continue // the shard finds any conflict; nothing to validate
			}
			conflict, parent := p.parentState(ctx, db, u)
			if conflict {
				refused[i] = ErrConflict
				continue
			}
			if len(fns) == 0 {
				continue
			}
			old, rev, revs := []byte("null"), u.Rev, u.Revisions
			var base *pb.RevBody
			var pos uint64
			if rev != "" && parent != nil {
				base = parent.Bodies[0]
				old = couchdoc.Append(nil, u.Id, parent.Info, base, &couchdoc.Options{Revs: true})
				revs = revPath(parent.Info, rev)
				if revs != nil {
					pos = revs.Start
				}
			}
			newDoc := vduDoc(u.Id, rev, revs, u.Deleted, u.Body, attStubs(u, base, pos))
			if verr := p.runValidators(ctx, s, db, fns, newDoc, old); verr != nil {
				if refused[i], err = asRefusal(verr); err != nil {
					return nil, err
				}
			}
			continue
		}
		if len(fns) == 0 {
			continue
		}
		revs := u.Revisions
		if revs == nil || len(revs.Ids) == 0 {
			if pr, perr := revtree.ParseRev(u.Rev); perr == nil {
				revs = &pb.Revisions{Start: pr.Pos, Ids: []string{pr.Hash}}
			}
		}
		if revs == nil || len(revs.Ids) == 0 {
			continue // a bad rev: the write refuses it
		}
		rev := revtree.Rev{Pos: revs.Start, Hash: revs.Ids[0]}.String()
		old, ok := p.replicatedOld(ctx, db, u.Id, revs)
		if !ok {
			continue // the doc has the revision: CouchDB ignores it
		}
		var pos uint64
		if revs.Start > 0 {
			pos = revs.Start - 1
		}
		newDoc := vduDoc(u.Id, rev, revs, u.Deleted, u.Body, attStubs(u, nil, pos))
		if verr := p.runValidators(ctx, s, db, fns, newDoc, old); verr != nil {
			if refused[i], err = asRefusal(verr); err != nil {
				return nil, err
			}
		}
	}
	return refused, nil
}

// parentState reads what a new_edits write of u edits, as the database is
// now: whether it is a conflict (the doc is there, live, and no rev is
// given, or the rev given is not there), and the doc with the revision u
// names (nil without one).
func (p *Policy) parentState(ctx context.Context, db string, u *pb.DocUpdate) (conflict bool, parent *pb.DocReply) {
	var revs []string
	if u.Rev != "" {
		revs = []string{u.Rev}
	}
	r, err := p.c.GetDoc(ctx, db, &pb.GetDoc{Id: u.Id, Revs: revs})
	found := err == nil && r.Info != nil && len(r.Bodies) > 0 && !r.Bodies[0].Missing
	if u.Rev == "" {
		return found && !r.Bodies[0].Deleted, nil
	}
	if !found {
		return true, nil
	}
	return false, r
}

// asRefusal turns a rule's error into a doc's refusal in CouchDB's terms;
// an error that is no rule's (a read failed, the request's time ran out)
// is returned as err, to fail the whole write.
func asRefusal(err error) (*pb.Error, error) {
	var pe *pb.Error
	var je *couchjs.Error
	var de *views.DesignError
	switch {
	case errors.As(err, &pe):
		return pe, nil
	case errors.As(err, &je):
		return &pb.Error{Code: je.Code, Reason: je.Reason}, nil
	case errors.As(err, &de):
		return &pb.Error{Code: de.Code, Reason: de.Reason}, nil
	}
	return nil, err
}

// CheckLocal applies the rules to a write of the _local doc id of db by s:
// the members', and in _users only admins write local docs.
func (p *Policy) CheckLocal(ctx context.Context, s *Subject, db, id string) error {
	if err := p.RequireMember(ctx, s, db); err != nil {
		return err
	}
	if db == UsersDB && !s.anonymous() && !p.UsersAdmin(ctx, s) {
		return ErrMissing
	}
	return nil
}

// Limits are the node's size limits (couchdb/max_document_size and
// max_attachment_size, live); the node's Settings have them.
type Limits interface {
	MaxDocumentSize() int64
	MaxAttachmentSize() int64
}

// checkSizes refuses a doc or an attachment over the node's limits. The
// gateway refuses an oversize HTTP request whole before it gets here, as
// CouchDB does; this holds for every other writer (a local replication).
func (p *Policy) checkSizes(u *pb.DocUpdate) *pb.Error {
	l, ok := p.cfg.Settings.(Limits)
	if !ok {
		return nil
	}
	if max := l.MaxDocumentSize(); max > 0 && int64(len(u.Body)) > max {
		return &pb.Error{Code: "document_too_large", Reason: u.Id}
	}
	max := l.MaxAttachmentSize()
	for _, a := range u.Atts {
		n := int64(len(a.Data))
		if a.Length > 0 {
			n = int64(a.Length) // the identity length of a compressed one
		}
		if max > 0 && n > max {
			return &pb.Error{Code: "attachment_too_large", Reason: a.Name}
		}
	}
	return nil
}
