package httpgw

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"

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
		// a local doc is read by its id alone: any rev (its own too)
		// and open_revs=all find nothing, as fabric:open_revs does not
		// look at local docs; revs=true shows its one rev
		// the doc query is parsed as a doc's (chttpd_db's
		// parse_doc_query): its errors come first
		if err := checkDocQuery(rq); err != nil {
			return err
		}
		o, err := g.parseDocOpts(rq)
		if err != nil {
			return err
		}
		if ors, ok := rq.q["open_revs"]; ok && len(ors) > 0 {
			all, revs, _ := parseOpenRevs(ors[len(ors)-1]) // checked above
			if len(revs) > 0 {
				// each one missing, as fabric:open_revs finds no local doc
				noMeta(o)
				return g.getOpenRevs(rq, db, &pb.GetDoc{Id: id}, revs, o, 0)
			}
			if all {
				return errMissing
			}
		}
		if vs := rq.q["rev"]; len(vs) > 0 {
			return errMissing
		}
		d, err := g.c.GetLocal(rq.ctx, db, id)
		if err != nil {
			return err
		}
		n := strconv.FormatUint(d.Rev, 10)
		rb := &pb.RevBody{Rev: "0-" + n, Json: d.Json}
		rq.w.Header().Set("Etag", `"`+rb.Rev+`"`)
		out := couchdoc.Append(nil, id, nil, rb, nil)
		if docFlag(rq, "revs") {
			out = append(out[:len(out)-1], `,"_revisions":{"start":0,"ids":["`+n+`"]}}`...)
		}
		return g.writeJSON(rq, 200, append(out, '\n'))
	case http.MethodPut:
		if err := checkDocQuery(rq); err != nil {
			return err
		}
		// an id of invalid UTF-8 is CouchDB's 400 illegal_docid (it
		// would not even cross to the shard: protobuf strings are UTF-8)
		if err := checkDocID(id); err != nil {
			return err
		}
		d, err := g.readDocBody(rq, g.maxDocumentSize()+1)
		if err != nil {
			return err
		}
		if err := revFromRequest(rq, d); err != nil {
			return err
		}
		if ne, err := boolParam(rq, "new_edits", true); err != nil {
			return err
		} else if !ne {
			rev, err := g.putLocalReplicated(rq, db, id, d)
			if err != nil {
				return err
			}
			rq.w.Header().Set("Etag", `"`+rev+`"`)
			rq.w.Header().Set("Location", g.base(rq)+"/"+couchEscape(db)+"/"+couchEscape(id))
			status := 201
			if d.Deleted {
				status = 200 // CouchDB's status for a deletion
			}
			return g.writeJSON(rq, status, okRev(id, rev))
		}
		if d.Deleted {
			return g.deleteLocal(rq, db, id)
		}
		rev, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: id, Rev: d.Rev, Json: d.Body})
		if err != nil {
			return err
		}
		rq.w.Header().Set("Etag", `"`+rev+`"`)
		rq.w.Header().Set("Location", g.base(rq)+"/"+couchEscape(db)+"/"+couchEscape(id))
		return g.writeJSON(rq, 201, okRev(id, rev))
	case http.MethodDelete:
		return g.deleteLocal(rq, db, id)
	case "COPY":
		return g.copyDoc(rq, db, id)
	}
	return methodNotAllowed("DELETE,GET,HEAD,PUT,COPY")
}

// localRevFormat reports whether s is a rev as couch_doc:parse_rev takes
// one: digits, a dash, anything (a local doc's "0-N" too).
func localRevFormat(s string) bool {
	pos, _, ok := strings.Cut(s, "-")
	if !ok || pos == "" {
		return false
	}
	_, err := strconv.ParseUint(pos, 10, 64)
	return err == nil
}

func (g *Gateway) deleteLocal(rq *req, db, id string) error {
	if _, err := g.c.GetLocal(rq.ctx, db, id); err != nil {
		return err
	}
	rev, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: id, Deleted: true})
	if err != nil {
		return err
	}
	rq.w.Header().Set("Etag", `"`+rev+`"`)
	return g.writeJSON(rq, 200, okRev(id, rev))
}

// putLocalReplicated writes a _local doc as CouchDB does with new_edits
// false: the answer names the rev given (_rev, else _revisions' newest),
// and the doc is stored only when that rev is "0-N" with N an integer,
// as 0-(N+1) whatever the stored rev (CouchDB's updater drops any other
// rev without an error).
func (g *Gateway) putLocalReplicated(rq *req, db, id string, d *docjson.Doc) (string, error) {
	rev := d.Rev
	if !d.HasRev || rev == "" {
		if d.Revisions == nil || len(d.Revisions.IDs) == 0 {
			return "", errNewEditsNoRev
		}
		rev = strconv.FormatUint(d.Revisions.Start, 10) + "-" + d.Revisions.IDs[0]
	}
	if !localRevFormat(rev) {
		return "", errBadRev
	}
	pos, n, _ := strings.Cut(rev, "-")
	if _, err := strconv.ParseUint(n, 10, 64); err != nil || strings.TrimLeft(pos, "0") != "" {
		return rev, nil
	}
	if _, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: id, Rev: "0-" + n, Json: d.Body, Deleted: d.Deleted}); err != nil {
		return "", err
	}
	return rev, nil
}
