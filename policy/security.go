package policy

import (
	"context"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/rights"
)

// ParseSecurity reads a stored _security object through package rights:
// exact member names (never a Go struct, whose fields match without
// case), a repeated member's last value, as CouchDB decodes it. An empty
// or absent object names nobody: the database is open to all and only
// server admins administer it.
func ParseSecurity(raw []byte) (*Security, error) {
	if len(raw) == 0 {
		return &Security{Raw: []byte("{}")}, nil
	}
	rs, err := rights.ParseSecurity(raw)
	if err != nil {
		return nil, err
	}
	return &Security{Raw: raw,
		Admins:  Group{Names: rs.Admins.Names, Roles: rs.Admins.Roles},
		Members: Group{Names: rs.Members.Names, Roles: rs.Members.Roles}}, nil
}

// ErrUsersSecurityFixed: _users' _security is not for writing unless
// couchdb/users_db_security_editable is true (CouchDB's rule).
var ErrUsersSecurityFixed = &pb.Error{Code: "forbidden", Reason: "You can't edit the security object of the user database."}

// SetSecurity writes db's security object as s: a database admin's
// write, _users' only where couchdb/users_db_security_editable is true.
// raw is read as every check reads it (package rights; a malformed side
// is a *rights.SecurityError) and stored as CouchDB stores it, each
// repeated member once, so GET _security shows what is granted.
func (p *Policy) SetSecurity(ctx context.Context, s *Subject, db string, raw []byte) error {
	if err := p.RequireDBAdmin(ctx, s, db); err != nil {
		return err
	}
	if db == UsersDB && p.setting("couchdb", "users_db_security_editable") != "true" {
		return ErrUsersSecurityFixed
	}
	if _, err := rights.ParseSecurity(raw); err != nil {
		return err
	}
	compact, err := rights.Dedupe(raw)
	if err != nil {
		return err
	}
	if err := p.c.SetMeta(ctx, db, &pb.SetMeta{Security: compact}); err != nil {
		return err
	}
	s.Forget(db)
	return nil
}
