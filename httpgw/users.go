package httpgw

import (
	"net/http"
	"strings"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/policy"
)

// The _users database as CouchDB 3.5 has it: the rules themselves (who
// writes and reads which doc, password hashing, _design/_auth's checks)
// are the policy's (package policy), reached by every write and read
// path; what is here routes requests by path to them before a handler
// runs, so that a refused request answers as CouchDB's does. The
// database's _security is fixed unless couchdb/users_db_security_editable
// is true.

const usersDB = policy.UsersDB

var errUsersSecurity = newErr(403, "forbidden", "You can't edit the security object of the user database.")

// usersAdmin reports whether the request's user is a server admin or an
// admin of _users by its _security (CouchDB's check_is_admin).
func (g *Gateway) usersAdmin(rq *req) bool { return g.pol.UsersAdmin(rq.ctx, rq.who()) }

// checkUserRead is the read rule for one doc id of _users.
func (g *Gateway) checkUserRead(rq *req, id string) error {
	return g.pol.ReadRule(rq.ctx, rq.who(), usersDB).Allow(id)
}

// requireServerAdminForListing guards _users' _all_docs and _changes,
// which would list every user to any member.
func requireServerAdminForListing(rq *req, db string) error {
	return policy.RequireLister(rq.who(), db)
}

// usersSecurityEditable is couchdb/users_db_security_editable.
func (g *Gateway) usersSecurityEditable() bool {
	if s := g.cfg.Settings; s != nil {
		v, err := s.ConfigValue("couchdb", "users_db_security_editable")
		return err == nil && v == "true"
	}
	return false
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
