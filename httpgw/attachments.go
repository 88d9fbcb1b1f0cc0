package httpgw

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/settee/settee/couchdoc"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// handleAtt serves /db/doc/att: GET/HEAD the data, PUT new data (a new
// doc rev keeping the other attachments), DELETE one attachment.
func (g *Gateway) handleAtt(rq *req, db, id, name string) error {
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		return g.getAtt(rq, db, id, name)
	case http.MethodPut, http.MethodDelete:
		if isDesign(id) {
			if err := g.requireDBAdmin(rq, db); err != nil {
				return err
			}
		}
		return g.putAtt(rq, db, id, name)
	}
	return methodNotAllowed("DELETE,GET,HEAD,PUT")
}

func (g *Gateway) getAtt(rq *req, db, id, name string) error {
	m := &pb.GetDoc{Id: id}
	rev, err := revQuery(rq)
	if err != nil {
		return err
	}
	if rev != "" {
		if unstoredRev(rev) {
			return errMissing
		}
		m.Revs = []string{rev}
	}
	r, err := g.c.GetDoc(rq.ctx, db, m)
	if err != nil {
		return err
	}
	if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || (len(m.Revs) == 0 && r.Bodies[0].Deleted) {
		return errMissing
	}
	var meta *pb.AttMeta
	for _, a := range r.Bodies[0].Atts {
		if a.Name == name {
			meta = a
		}
	}
	if meta == nil {
		return newErr(404, "not_found", "Document is missing attachment")
	}
	etag := `"` + strings.TrimPrefix(meta.Digest, "md5-") + `"`
	h := rq.w.Header()
	h.Set("Etag", etag)
	h.Set("Content-Type", meta.ContentType)
	// ranges of what is stored as it is (CouchDB's rule: not of the text
	// types it stores gzipped)
	ranges := meta.Encoding != "gzip"
	if ranges {
		h.Set("Accept-Ranges", "bytes")
	} else {
		h.Set("Accept-Ranges", "none")
	}
	if inm := rq.r.Header.Get("If-None-Match"); inm != "" && strings.TrimPrefix(inm, "W/") == etag {
		notModified(rq)
		return nil
	}
	// the data is a user's, served from the API's origin: sandboxed
	// (CouchDB's [csp] attachments_*), never sniffed (csp.go)
	g.setAttachmentHeaders(h)
	sendEncoded := meta.Encoding == "gzip" && acceptsGzip(rq.r.Header.Get("Accept-Encoding"))
	if sendEncoded {
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", strconv.FormatUint(meta.EncodedLength, 10))
	} else {
		h.Set("Content-Length", strconv.FormatUint(meta.Length, 10))
	}
	if rq.r.Method == http.MethodHead {
		if ranges {
			if done, err := writeRanges(rq, meta.ContentType, nil, int64(meta.Length)); done || err != nil {
				return err
			}
		}
		rq.w.WriteHeader(200)
		return nil
	}
	data, err := g.c.GetAtt(rq.ctx, db, id, meta)
	if err != nil {
		// the copy asked may not hold it under the record's key (a record
		// an older settee wrote, read from another copy): read the
		// revision with its data, as rows do (attData)
		if data = g.attOfRev(rq, db, id, r.Bodies[0].Rev, meta); data == nil {
			return err
		}
	}
	if !sendEncoded {
		if data, err = couchdoc.Identity(meta, data); err != nil {
			return err
		}
	}
	if ranges {
		if done, err := writeRanges(rq, meta.ContentType, data, int64(len(data))); done || err != nil {
			return err
		}
	}
	rq.w.WriteHeader(200)
	_, _ = rq.w.Write(data)
	return nil
}

// attOfRev is the data of attachment meta read with revision rev of doc
// id, nil when that read does not find the same attachment.
func (g *Gateway) attOfRev(rq *req, db, id, rev string, meta *pb.AttMeta) []byte {
	r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: []string{rev}, WithAttsData: true})
	if err != nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || len(r.Bodies[0].AttData) != len(r.Bodies[0].Atts) {
		return nil
	}
	for i, a := range r.Bodies[0].Atts {
		if a.Name == meta.Name && a.Digest == meta.Digest && a.Encoding == meta.Encoding {
			return r.Bodies[0].AttData[i]
		}
	}
	return nil
}

func (g *Gateway) putAtt(rq *req, db, id, name string) error {
	// a DELETE opens the doc first (a missing one is 404 whatever its id)
	if err := g.checkWriteID(rq, db, id); err != nil && rq.r.Method != http.MethodDelete {
		return err
	}
	if !utf8.ValidString(name) {
		return badRequest("Attachment name is not UTF-8 encoded")
	}
	if strings.HasPrefix(name, "_") {
		return badRequest("Attachment name '" + name + "' starts with prohibited character '_'")
	}
	// w: copies that must commit for a 201 (CouchDB's write quorum; 0 is
	// the database's default, n/2+1)
	w := quorumParam(rq, "w")
	rev, err := revToEdit(rq)
	if err != nil {
		return err
	}
	if im := strings.Trim(rq.r.Header.Get("If-Match"), `"`); rev == "" && im != "" {
		rev = im
	}
	var base *pb.RevBody
	if rev != "" {
		if unstoredRev(rev) {
			return errMissingRev
		}
		if _, err := revtree.ParseRev(rev); err != nil {
			return errBadRev
		}
		r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: []string{rev}})
		if err != nil {
			return err
		}
		// CouchDB opens the rev to edit it: a rev it does not find is
		// its {not_found, missing} for that rev
		if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing {
			return errMissingRev
		}
		base = r.Bodies[0]
	} else if rq.r.Method == http.MethodDelete {
		// CouchDB looks for the doc and the attachment, then its edit
		// without a rev conflicts
		r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id})
		if err != nil {
			return err
		}
		if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing {
			return errMissing
		}
		if r.Bodies[0].Deleted {
			return errDeleted
		}
		found := false
		for _, a := range r.Bodies[0].Atts {
			found = found || a.Name == name
		}
		if !found {
			return newErr(404, "not_found", "Document is missing attachment")
		}
		return errConflict
	}
	u := &pb.DocUpdate{Id: id, Rev: rev, Body: []byte("{}"), HasAtts: true}
	if base != nil {
		u.Body = base.Json
		for _, a := range base.Atts {
			if a.Name != name {
				u.Atts = append(u.Atts, &pb.Att{Name: a.Name, Stub: true})
			}
		}
	}
	if rq.r.Method == http.MethodDelete {
		found := false
		for _, a := range base.Atts {
			found = found || a.Name == name
		}
		if !found {
			return newErr(404, "not_found", "Document is missing attachment")
		}
	} else {
		data, err := readBody(rq, g.cfg.MaxRequestSize)
		if err != nil {
			return err
		}
		ct := rq.r.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/octet-stream"
		}
		att := couchdoc.NewAttachment(name, ct, data)
		if err := g.checkAttSizes([]*pb.Att{att}); err != nil {
			return err
		}
		// the new one first, the others in their order: CouchDB's
		// list, which the revision's hash follows
		u.Atts = append([]*pb.Att{att}, u.Atts...)
	}
	out, err := g.writeDocs(rq, db, []*pb.DocUpdate{u}, true, w)
	if err != nil {
		return err
	}
	if out[0].Err != nil {
		return out[0].Err
	}
	// CouchDB answers an attachment's removal 200 whatever the quorum
	// (only its PUT tells 201 from 202)
	if rq.r.Method == http.MethodDelete {
		return g.writeJSON(rq, 200, okRev(id, out[0].Rev))
	}
	// CouchDB's: the database's name as it is, the doc id and the
	// attachment's name (slashes and all) encoded
	rq.w.Header().Set("Location", g.base(rq)+"/"+db+"/"+couchEscape(id)+"/"+couchEscape(name))
	status := 201
	if out[0].Accepted {
		status = 202
	}
	return g.writeJSON(rq, status, okRev(id, out[0].Rev))
}

func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && !strings.Contains(strings.ReplaceAll(params, " ", ""), "q=0") {
			return true
		}
	}
	return false
}
