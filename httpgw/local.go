package httpgw

import (
	"net/http"
	"strconv"

	"github.com/settee/settee/couchdoc"

	pb "github.com/settee/settee/proto"
)

// handleLocal serves _local docs: no rev tree, no replication, rev "0-N",
// and no MVCC (CouchDB accepts a missing or stale rev).
func (g *Gateway) handleLocal(rq *req, db, id string) error {
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	if id == "_local/" {
		return errBadLocalID
	}
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		d, err := g.c.GetLocal(rq.ctx, db, id)
		if err != nil {
			return err
		}
		rev := "0-" + strconv.FormatUint(d.Rev, 10)
		rb := &pb.RevBody{Rev: rev, Json: d.Json}
		rq.w.Header().Set("ETag", `"`+rev+`"`)
		return g.writeJSON(rq, 200, append(couchdoc.Append(nil, id, nil, rb, nil), '\n'))
	case http.MethodPut:
		d, err := g.readDocBody(rq, g.maxDocumentSize()+1)
		if err != nil {
			return err
		}
		if err := revFromRequest(rq, d); err != nil {
			return err
		}
		if d.Deleted {
			return g.deleteLocal(rq, db, id)
		}
		rev, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: id, Rev: d.Rev, Json: d.Body})
		if err != nil {
			return err
		}
		rq.w.Header().Set("ETag", `"`+rev+`"`)
		rq.w.Header().Set("Location", g.base(rq)+"/"+couchEscape(db)+"/"+couchEscape(id))
		return g.writeJSON(rq, 201, okRev(id, rev))
	case http.MethodDelete:
		return g.deleteLocal(rq, db, id)
	}
	return methodNotAllowed("DELETE,GET,HEAD,PUT")
}

func (g *Gateway) deleteLocal(rq *req, db, id string) error {
	if _, err := g.c.GetLocal(rq.ctx, db, id); err != nil {
		return err
	}
	rev, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: id, Deleted: true})
	if err != nil {
		return err
	}
	rq.w.Header().Set("ETag", `"`+rev+`"`)
	return g.writeJSON(rq, 200, okRev(id, rev))
}
