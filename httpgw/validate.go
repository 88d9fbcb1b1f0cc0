package httpgw

import (
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
)

// What a write must pass (validate_doc_update, the _users rules, design
// docs for admins) is the policy's: every write goes through
// g.pol.Write with the request's user. What design docs define for
// queries (views, Mango indexes, shows, lists, updates, filters,
// rewrites) the gateway asks the policy for too (Policy.Design,
// Policy.Designs): one loader and one cache.

// forgetDesigns drops what the policy holds of db's design docs (a design
// doc was written).
func (g *Gateway) forgetDesigns(db string) {
	g.pol.ForgetDesigns(db)
}

// userCtxJSON is the user as CouchDB's functions see it: {db, name, roles}.
func userCtxJSON(rq *req, db string) []byte { return rq.who().UserCtx(db) }

// secObj is the database's security object ({} when none was set).
func (g *Gateway) secObj(rq *req, db string) []byte {
	if sec, err := g.pol.Security(rq.ctx, rq.who(), db); err == nil {
		return sec.Raw
	}
	return []byte("{}")
}

// eachDesign calls f with the id and body of each live design doc of db,
// in id order.
func (g *Gateway) eachDesign(rq *req, db string, f func(id string, body []byte)) error {
	return policy.EachDesign(rq.ctx, g.c, db, f)
}

// writeDocs writes a user's docs through the policy, as the request's
// user: the one way the gateway writes documents.
func (g *Gateway) writeDocs(rq *req, db string, docs []*pb.DocUpdate, newEdits bool, w int) ([]coordinator.Outcome, error) {
	return g.pol.Write(rq.ctx, rq.who(), db, docs, newEdits, w)
}
