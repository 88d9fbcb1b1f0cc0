package httpgw

import (
	"sync"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
)

// What a write must pass (validate_doc_update, the _users rules, design
// docs for admins) is the policy's: every write goes through
// g.pol.Write with the request's user. What is here is the gateway's own
// cache of what design docs define for its queries (Mango indexes).

const designTTL = time.Second

// designCache keeps what a database's design docs define (its Mango
// indexes), read at most once per designTTL, and at once after a design
// doc is written through this node (forget).
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
	g.pol.ForgetDesigns(db)
	g.mangoIdx.forget(db)
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
