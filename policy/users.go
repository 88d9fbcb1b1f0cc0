package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/coordinator"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/rights"
)

// The _users database as CouchDB 3.5 has it (couch_users_db and
// _design/_auth): a writer who is not an admin of _users writes only its
// own doc (another's is "missing" to it, not forbidden, so names do not
// leak) and reads only its own; design docs are for admins alone; the
// listing feeds are for server admins; a plain "password" is hashed on
// every write, replicated ones too; and every user doc written passes
// _design/_auth's rules (auth.ValidateUserDoc).

// UsersAdmin reports whether the subject is a server admin or an admin
// of _users by its _security (CouchDB's check_is_admin).
func (p *Policy) UsersAdmin(ctx context.Context, s *Subject) bool {
	if s.anonymous() {
		return false
	}
	return p.IsDBAdmin(ctx, s, UsersDB)
}

// userMayRead: admins read any doc of _users, a user its own, nobody else
// any (a design doc is forbidden; another's doc is missing).
func userMayRead(admin bool, s *Subject, id string) error {
	if admin {
		return nil
	}
	if strings.HasPrefix(id, "_design/") {
		return ErrUsersDesignRead
	}
	if name, ok := auth.DocName(id); ok && s != nil && s.Name != "" && s.Name == name {
		return nil
	}
	return ErrMissing
}

// checkUserWrite applies _users' rules to one doc written by the subject
// and rewrites u's body with its password hashed.
func (p *Policy) checkUserWrite(ctx context.Context, s *Subject, admin bool, u *pb.DocUpdate, newEdits bool) error {
	name, own := auth.DocName(u.Id)
	if !admin && !s.anonymous() && (!own || name != s.Name) {
		return ErrMissing
	}
	if strings.HasPrefix(u.Id, "_design/") || strings.HasPrefix(u.Id, "_local/") {
		return nil // design docs are checked as such; local docs have no rules
	}
	if err := p.hashUserPassword(u); err != nil {
		return err
	}
	// read by package rights, as the login reads it: exact member
	// names, a repeated member's last value
	doc, err := rights.ParseUserDoc(u.Body)
	if err != nil {
		return &pb.Error{Code: "bad_request", Reason: "invalid UTF-8 JSON"}
	}
	old, err := p.parentUserDoc(ctx, u, newEdits)
	if err != nil {
		return err
	}
	w := auth.Writer{Admin: admin}
	if s != nil {
		w.Name, w.Roles = s.Name, s.Roles
	}
	if err := auth.ValidateUserDoc(u.Id, doc, old, u.Deleted, w); err != nil {
		var re *auth.RuleError
		if errors.As(err, &re) {
			return &pb.Error{Code: "forbidden", Reason: re.Reason}
		}
		return err
	}
	return nil
}

// parentUserDoc is the body of the revision a write edits, which the
// rules compare with (CouchDB's oldDoc): the _rev it names, or with
// new_edits=false the parent its _revisions names; nil when there is
// none, it is deleted or this database does not have it.
func (p *Policy) parentUserDoc(ctx context.Context, u *pb.DocUpdate, newEdits bool) (*rights.UserDoc, error) {
	parent := ""
	switch {
	case newEdits:
		parent = u.Rev
	case u.Revisions != nil && len(u.Revisions.Ids) > 1 && u.Revisions.Start > 1:
		parent = revtree.Rev{Pos: u.Revisions.Start - 1, Hash: u.Revisions.Ids[1]}.String()
	}
	if parent == "" {
		return nil, nil
	}
	r, err := p.c.GetDoc(ctx, UsersDB, &pb.GetDoc{Id: u.Id, Revs: []string{parent}})
	if err != nil {
		if errors.Is(err, coordinator.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	if len(r.Bodies) == 0 || r.Bodies[0].Missing || r.Bodies[0].Deleted {
		return nil, nil
	}
	return rights.ParseUserDoc(r.Bodies[0].Json)
}

// hashUserPassword replaces a plain "password" with its PBKDF2 hash
// (password_scheme, pbkdf2_prf, salt, iterations, derived_key), as
// CouchDB's _users database does before it stores the doc; the password
// itself is never stored. A null password is left as it is (CouchDB's
// rule for server admins' docs).
func (p *Policy) hashUserPassword(u *pb.DocUpdate) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(u.Body, &m); err != nil {
		return &pb.Error{Code: "bad_request", Reason: "invalid UTF-8 JSON"}
	}
	raw, ok := m["password"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var pw string
	if err := json.Unmarshal(raw, &pw); err != nil {
		return &pb.Error{Code: "forbidden", Reason: "Password value of '" + string(raw) + "' is invalid."}
	}
	delete(m, "password")
	var name string
	_ = json.Unmarshal(m["name"], &name)
	cred := auth.NewCredential(name, pw, p.iterations())
	for k, v := range map[string]any{"password_scheme": cred.Scheme, "pbkdf2_prf": cred.PRF,
		"salt": cred.Salt, "iterations": cred.Iterations, "derived_key": cred.DerivedKey} {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	u.Body = body
	u.RevHash = "" // the body changed: the copies hash it anew
	return nil
}
