package httpgw

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// validate_doc_update: every design doc of a database may have one, and
// every write to the database passes each (CouchDB runs them on single
// writes, _bulk_docs, attachments and replicated revisions alike, with
// newDoc, oldDoc, userCtx and secObj). A write to a database without any
// costs a cache lookup: the functions are read once a second per
// database, and at once after a design doc is written through this node.

const vduTTL = time.Second

type vduCache struct {
	mu sync.Mutex
	m  map[string]vduEntry
}

type vduEntry struct {
	fns []string
	at  time.Time
}

func (c *vduCache) forget(db string) {
	c.mu.Lock()
	delete(c.m, db)
	c.mu.Unlock()
}

// validators are db's validate_doc_update functions.
func (g *Gateway) validators(rq *req, db string) ([]string, error) {
	c := &g.vdus
	c.mu.Lock()
	e, ok := c.m[db]
	c.mu.Unlock()
	if ok && time.Since(e.at) < vduTTL {
		return e.fns, nil
	}
	var fns []string
	q := coordinator.RangeQuery{StartKey: "_design/", EndKey: "_design0", HasStart: true, HasEnd: true, IncludeDocs: true, Limit: -1}
	err := g.c.AllDocs(rq.ctx, db, q, func(row *pb.Row) error {
		if row.Json == nil || row.Info == nil || row.Info.Deleted {
			return nil
		}
		var d struct {
			VDU *string `json:"validate_doc_update"`
		}
		if json.Unmarshal(row.Json, &d) == nil && d.VDU != nil && strings.TrimSpace(*d.VDU) != "" {
			fns = append(fns, *d.VDU)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]vduEntry{}
	}
	c.m[db] = vduEntry{fns: fns, at: time.Now()}
	c.mu.Unlock()
	return fns, nil
}

// validateWrite runs db's validate_doc_update functions on a write of d to
// id: nil, or the first refusal (403 forbidden, 401 unauthorized).
// Design docs are not validated (only db admins write them), as CouchDB.
func (g *Gateway) validateWrite(rq *req, db, id string, d *docjson.Doc, newEdits bool) error {
	if isDesign(id) || strings.HasPrefix(id, "_local/") || g.cfg.JS == nil {
		return nil
	}
	fns, err := g.validators(rq, db)
	if err != nil || len(fns) == 0 {
		return err
	}
	newDoc := couchdoc.Append(nil, id, nil, &pb.RevBody{Rev: d.Rev, Deleted: d.Deleted, Json: d.Body}, nil)
	if d.Rev == "" {
		newDoc = spliceNoRev(id, d)
	}
	old := []byte("null")
	if newEdits && d.HasRev || !newEdits {
		r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id})
		if err == nil && r.Info != nil && len(r.Bodies) > 0 && !r.Bodies[0].Missing && !r.Bodies[0].Deleted {
			old = couchdoc.Append(nil, id, r.Info, r.Bodies[0], nil)
		}
	}
	user := map[string]any{"db": db, "name": nil, "roles": []string{}}
	if rq.user != nil {
		user["name"], user["roles"] = rq.user.Name, rq.user.Roles
	}
	userCtx, _ := json.Marshal(user)
	sec := []byte("{}")
	if info, err := g.c.DBInfo(rq.ctx, db); err == nil && len(info.Meta.Security) > 0 {
		sec = info.Meta.Security
	}
	for _, src := range fns {
		if err := g.cfg.JS.ValidateDocUpdate(rq.ctx, src, newDoc, old, userCtx, sec); err != nil {
			return jsErr(err)
		}
	}
	return nil
}

// spliceNoRev is a new doc as a validate function sees it: no _rev.
func spliceNoRev(id string, d *docjson.Doc) []byte {
	b := append([]byte(`{"_id":`), docjson.AppendString(nil, id)...)
	if len(d.Body) > 2 {
		b = append(b, ',')
		b = append(b, d.Body[1:len(d.Body)-1]...)
	}
	if d.Deleted {
		b = append(b, `,"_deleted":true`...)
	}
	return append(b, '}')
}
