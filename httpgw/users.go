package httpgw

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
	"github.com/settee/settee/rights"
)

// The _users database as CouchDB 3.5 has it (couch_users_db and
// _design/_auth): a writer who is not an admin of _users writes only its
// own doc (another's is "missing" to it, not forbidden, so names do not
// leak) and reads only its own; design docs are for admins alone; the
// listing feeds are for server admins; a plain "password" is hashed on
// write; and every user doc written passes _design/_auth's rules
// (auth.ValidateUserDoc). The database's _security is fixed unless
// couchdb/users_db_security_editable is true.

const usersDB = "_users"

var (
	errUsersDesignRead = newErr(403, "forbidden", "Only administrators can view design docs in the users database.")
	errNotServerAdmin  = newErr(401, "unauthorized", "You are not a server admin.")
	errUsersSecurity   = newErr(403, "forbidden", "You can't edit the security object of the user database.")
)

// usersAdmin reports whether the request's user is a server admin or an
// admin of _users by its _security (CouchDB's check_is_admin).
func (g *Gateway) usersAdmin(rq *req) bool {
	if rq.user == nil {
		return false
	}
	if rq.user.Admin {
		return true
	}
	s, err := g.loadSecurity(rq, usersDB)
	return err == nil && s.Admins.match(rq.user)
}

// checkUserRead is the read rule for one doc id of _users.
func (g *Gateway) checkUserRead(rq *req, id string) error {
	return userMayRead(g.usersAdmin(rq), rq.user, id)
}

// userMayRead: admins read any doc of _users, a user its own, nobody else
// any (a design doc is forbidden; another's doc is missing).
func userMayRead(admin bool, u *User, id string) error {
	if admin {
		return nil
	}
	if isDesign(id) {
		return errUsersDesignRead
	}
	if name, ok := auth.DocName(id); ok && u != nil && u.Name == name {
		return nil
	}
	return errMissing
}

// requireServerAdminForListing guards _users' _all_docs and _changes,
// which would list every user to any member.
func requireServerAdminForListing(rq *req, db string) error {
	if db != usersDB || rq.user != nil && rq.user.Admin {
		return nil
	}
	return errNotServerAdmin
}

// checkUserWrite applies _users' rules to one doc written by the request's
// user and answers the doc to store (its password hashed). old is read
// from the database when the rules need it.
func (g *Gateway) checkUserWrite(rq *req, id string, d *docjson.Doc, newEdits bool) (*docjson.Doc, error) {
	admin := g.usersAdmin(rq)
	name, own := auth.DocName(id)
	if !admin && rq.user != nil && (!own || name != rq.user.Name) {
		return nil, errMissing
	}
	if isDesign(id) || strings.HasPrefix(id, "_local/") {
		return d, nil // design docs are checked as such; local docs have no rules
	}
	d, err := g.hashUserPassword(d)
	if err != nil {
		return nil, err
	}
	doc, err := rights.ParseUserDoc(d.Body)
	if err != nil {
		return nil, errInvalidJSON
	}
	old, err := g.parentUserDoc(rq, id, d, newEdits)
	if err != nil {
		return nil, err
	}
	w := auth.Writer{Admin: admin}
	if rq.user != nil {
		w.Name, w.Roles = rq.user.Name, rq.user.Roles
	}
	if err := auth.ValidateUserDoc(id, doc, old, d.Deleted, w); err != nil {
		return nil, err
	}
	return d, nil
}

// parentUserDoc is the body of the revision a write edits, which the
// rules compare with (CouchDB's oldDoc): the _rev it names, or with
// new_edits=false the parent its _revisions names; nil when there is
// none, it is deleted or this database does not have it.
func (g *Gateway) parentUserDoc(rq *req, id string, d *docjson.Doc, newEdits bool) (*rights.UserDoc, error) {
	parent := ""
	switch {
	case newEdits && d.HasRev:
		parent = d.Rev
	case !newEdits && d.Revisions != nil && len(d.Revisions.IDs) > 1 && d.Revisions.Start > 1:
		parent = revtree.Rev{Pos: d.Revisions.Start - 1, Hash: d.Revisions.IDs[1]}.String()
	}
	if parent == "" {
		return nil, nil
	}
	r, err := g.c.GetDoc(rq.ctx, usersDB, &pb.GetDoc{Id: id, Revs: []string{parent}})
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
func (g *Gateway) hashUserPassword(d *docjson.Doc) (*docjson.Doc, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Body, &m); err != nil {
		return nil, errInvalidJSON
	}
	raw, ok := m["password"]
	if !ok || string(raw) == "null" {
		return d, nil
	}
	var pw string
	if err := json.Unmarshal(raw, &pw); err != nil {
		return nil, newErr(403, "forbidden", "Password value of '"+string(raw)+"' is invalid.")
	}
	delete(m, "password")
	var name string
	_ = json.Unmarshal(m["name"], &name)
	cred := auth.NewCredential(name, pw, g.auth.conf().iterations)
	for k, v := range map[string]any{"password_scheme": cred.Scheme, "pbkdf2_prf": cred.PRF,
		"salt": cred.Salt, "iterations": cred.Iterations, "derived_key": cred.DerivedKey} {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := *d
	out.Body = body
	return &out, nil
}

// usersSecurityEditable is couchdb/users_db_security_editable.
func (g *Gateway) usersSecurityEditable() bool {
	if s := g.cfg.Settings; s != nil {
		v, err := s.ConfigValue("couchdb", "users_db_security_editable")
		return err == nil && v == "true"
	}
	return false
}

// userRuleErr is a refused user doc write as a _bulk_docs row error.
func userRuleErr(err error) *pb.Error {
	var re *auth.RuleError
	if errors.As(err, &re) {
		return &pb.Error{Code: "forbidden", Reason: re.Reason}
	}
	ce := toCouch(err)
	return &pb.Error{Code: ce.code, Reason: ce.reason}
}

// usersGate applies _users' read rules (and the writes decided by path
// alone) before a request to a path under /_users/ is routed.
func (g *Gateway) usersGate(rq *req, second string, rest []string) error {
	m := rq.r.Method
	read := m == http.MethodGet || m == http.MethodHead
	encoded := strings.HasPrefix(second, "_design/")
	switch second {
	case "_all_docs", "_changes":
		return requireServerAdminForListing(rq, usersDB)
	case "_security":
		if !read && !g.usersSecurityEditable() {
			return errUsersSecurity
		}
		return nil
	case "_local":
		if !read && rq.user != nil && !g.usersAdmin(rq) {
			return g.memberOr(rq, errMissing)
		}
		return nil
	case "_design":
		if len(rest) == 0 {
			return nil
		}
		second, rest = "_design/"+rest[0], rest[1:]
	}
	if strings.HasPrefix(second, "_") && !strings.HasPrefix(second, "_design/") || read && encoded {
		return nil // not a doc, or an encoded slash: redirected to the path checked here
	}
	switch {
	case !read && isDesign(second) && rq.user != nil && !g.usersAdmin(rq):
		// a named user writing any doc but its own finds it missing,
		// design docs too
		return g.memberOr(rq, errMissing)
	case read:
		return g.memberOr(rq, g.checkUserRead(rq, second))
	case len(rest) > 0 && rest[0] != "" && !g.usersAdmin(rq) && rq.user != nil:
		// an attachment written to a user doc: the writer's own only
		if name, ok := auth.DocName(second); !ok || name != rq.user.Name {
			return g.memberOr(rq, errMissing)
		}
	}
	return nil
}

// memberOr is the member check's refusal when there is one, else err: a
// user who may not use the database at all is told that first.
func (g *Gateway) memberOr(rq *req, err error) error {
	if err == nil {
		return nil
	}
	if merr := g.requireMember(rq, usersDB); merr != nil {
		return merr
	}
	return err
}
