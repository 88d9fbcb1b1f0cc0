package httpgw

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// postForm serves POST /db/doc: CouchDB's HTML form upload of attachments
// (chttpd_db's db_doc_req POST). Its checks come in CouchDB's order: a
// Referer naming this host (a form posted from another site is refused),
// the doc id, a multipart/form-data body. The form's "_attachments" file
// fields are the new attachments (the file's name and type), on the doc
// its "_doc" field holds (JSON) or else on the revision its "_rev" field
// names; the doc's other attachments are kept.
func (g *Gateway) postForm(rq *req, db, id string) error {
	if err := checkReferer(rq); err != nil {
		return err
	}
	if err := g.checkWriteID(rq, db, id); err != nil {
		return err
	}
	if isDesign(id) {
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
	}
	ct := rq.r.Header.Get("Content-Type")
	if first, _, _ := strings.Cut(ct, ";"); first != "multipart/form-data" {
		return newErr(415, "bad_content_type", "Content-Type must be multipart/form-data")
	}
	form, err := readUploadForm(rq, ct, g.cfg.MaxRequestSize)
	if err != nil {
		return err
	}
	w, err := intParam(rq, "w", 0)
	if err != nil {
		return err
	}
	var u *pb.DocUpdate
	var base *pb.RevBody
	if form.hasDoc {
		d, err := docjson.ParseDoc(form.doc)
		if err != nil {
			return err
		}
		if err := revFromRequest(rq, d); err != nil {
			return err
		}
		if u, err = docUpdate(0, id, d, true); err != nil {
			return err
		}
	} else {
		if unstoredRev(form.rev) {
			return errMissingRev
		}
		if _, err := revtree.ParseRev(form.rev); err != nil {
			return errBadRev // CouchDB crashes on a form without a _rev (badarg)
		}
		r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: []string{form.rev}})
		if err != nil {
			return err
		}
		if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing {
			return errMissingRev
		}
		base = r.Bodies[0]
		u = &pb.DocUpdate{Id: id, Rev: form.rev, Body: base.Json, Deleted: base.Deleted, HasAtts: true}
		for _, a := range base.Atts {
			u.Atts = append(u.Atts, &pb.Att{Name: a.Name, Stub: true})
		}
	}
	// the uploaded ones first, then the doc's others, as CouchDB lists them
	uploaded := map[string]bool{}
	for _, a := range form.atts {
		uploaded[a.Name] = true
	}
	atts := form.atts
	for _, a := range u.Atts {
		if !uploaded[a.Name] {
			atts = append(atts, a)
		}
	}
	u.Atts, u.HasAtts = atts, u.HasAtts || len(atts) > 0
	if err := g.checkAttSizes(u.Atts); err != nil {
		return err
	}
	out, err := g.writeDocs(rq, db, []*pb.DocUpdate{u}, true, w)
	if err != nil {
		return err
	}
	if out[0].Err != nil {
		return out[0].Err
	}
	if isDesign(id) {
		g.forgetDesigns(db)
	}
	rq.w.Header().Set("Etag", `"`+out[0].Rev+`"`)
	status := 201
	if out[0].Accepted {
		status = 202
	}
	return g.writeJSON(rq, status, okRev(id, out[0].Rev))
}

// checkReferer is CouchDB's validate_referer: the request must name a
// Referer whose host (and port) is the one the request was sent to.
func checkReferer(rq *req) error {
	ref := rq.r.Header.Get("Referer")
	if ref == "" {
		return badRequest("Referer header required.")
	}
	host := rq.r.Header.Get("X-Forwarded-Host")
	if host == "" {
		host = rq.r.Host
	}
	if u, err := url.Parse(ref); err != nil || u.Host != host {
		return badRequest("Referer header must match host.")
	}
	return nil
}

// uploadForm is what postForm takes from a form: the first _doc or _rev
// field and the _attachments files.
type uploadForm struct {
	doc    []byte
	hasDoc bool
	rev    string
	hasRev bool
	atts   []*pb.Att
}

func readUploadForm(rq *req, ct string, limit int64) (*uploadForm, error) {
	_, params, err := mime.ParseMediaType(ct)
	if err != nil || params["boundary"] == "" {
		return nil, badRequest("multipart/form-data needs a boundary")
	}
	raw, err := rawBody(rq, limit)
	if err != nil {
		return nil, err
	}
	mr := multipart.NewReader(raw, params["boundary"])
	f := &uploadForm{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return nil, formErr(err)
		}
		name := p.FormName()
		switch {
		case name == "_attachments" && p.FileName() != "" && p.Header.Get("Content-Type") != "":
			// (a file part without a type is no file to mochiweb's form
			// parser: CouchDB ignores it)
			data, err := io.ReadAll(p)
			if err != nil {
				return nil, formErr(err)
			}
			if n := p.FileName(); !utf8.ValidString(n) {
				return nil, badRequest("Attachment name is not UTF-8 encoded")
			} else if strings.HasPrefix(n, "_") {
				return nil, badRequest("Attachment name '" + n + "' starts with prohibited character '_'")
			}
			f.atts = append(f.atts, couchdoc.NewAttachment(p.FileName(), p.Header.Get("Content-Type"), data))
		case name == "_doc" && !f.hasDoc, name == "_rev" && !f.hasRev:
			v, err := io.ReadAll(p)
			if err != nil {
				return nil, formErr(err)
			}
			if name == "_doc" {
				f.doc, f.hasDoc = v, true
			} else {
				f.rev, f.hasRev = string(v), true
			}
		}
	}
}

func formErr(err error) error {
	var ce *couchError
	if errors.As(err, &ce) {
		return err // the limits' answers (limits.go)
	}
	return badRequest("Invalid multipart/form-data body: " + err.Error())
}
