package policy

import (
	"context"
)

// ReadRule is what a subject may see of a database's documents beyond
// being a member: in _users its own doc alone (others are missing, design
// docs forbidden), in _replicator other owners' docs without their
// credentials. A nil *ReadRule lets everything through, and is what every
// other database and every admin gets, so a read pays nothing for it.
type ReadRule struct {
	users      bool
	replicator bool
	s          *Subject
}

// ReadRule is s's rule for db's documents (nil: none).
func (p *Policy) ReadRule(ctx context.Context, s *Subject, db string) *ReadRule {
	switch db {
	case UsersDB:
		if p.UsersAdmin(ctx, s) {
			return nil
		}
		return &ReadRule{users: true, s: s}
	case ReplicatorDB:
		if p.IsDBAdmin(ctx, s, ReplicatorDB) {
			return nil
		}
		return &ReadRule{replicator: true, s: s}
	}
	return nil
}

// Allow reports whether the doc id may be read at all: nil, or the error
// a read of it answers.
func (r *ReadRule) Allow(id string) error {
	if r == nil || !r.users {
		return nil
	}
	return userMayRead(false, r.s, id)
}

// Visible is whether a row of doc id is shown in a listing or query.
func (r *ReadRule) Visible(id string) bool { return r.Allow(id) == nil }

// Doc is a readable doc's JSON as the subject sees it (doc itself when
// nothing is hidden from it).
func (r *ReadRule) Doc(doc []byte) []byte {
	if r == nil || !r.replicator {
		return doc
	}
	if o := Owner(doc); o != "" && r.s != nil && o == r.s.Name {
		return doc
	}
	return stripCredentials(doc)
}

// Rewrites reports whether Doc may change a doc's bytes (the caller then
// cannot serve stored bytes as they are).
func (r *ReadRule) Rewrites() bool { return r != nil && r.replicator }

// RequireLister: _users' _all_docs and _changes list every user, and are
// for server admins alone (CouchDB's rule for the authentication db).
func RequireLister(s *Subject, db string) error {
	if db != UsersDB || s != nil && s.ServerAdmin {
		return nil
	}
	return ErrNotServerAdmin
}
