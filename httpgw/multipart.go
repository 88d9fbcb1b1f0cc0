package httpgw

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// Multipart, as CouchDB speaks it (see couchdoc/multipart.go for the
// shape of one document):
//
//   - PUT /db/doc with Content-Type multipart/related: the JSON part, then
//     the bodies of the attachments that say "follows", in JSON order.
//   - GET /db/doc?attachments=true with Accept: multipart/related: the doc
//     the same way (only when Accept names it: CouchDB also answers
//     multipart to */* or no Accept, which surprises clients).
//   - GET /db/doc?open_revs=… with Accept: multipart/mixed: one part per
//     rev, a nested multipart/related one when it has attachment data,
//     {"missing": rev} parts for the revs not found.
//   - POST /db/_bulk_get with an Accept that names multipart/mixed or
//     multipart/related and not JSON.

// accepts reports whether the Accept header names typ (or, with wildcards,
// a range covering it) with a non-zero q. A missing header is */*.
func accepts(rq *req, typ string, wildcards bool) bool {
	h := rq.r.Header.Values("Accept")
	if len(h) == 0 {
		return wildcards
	}
	main, _, _ := strings.Cut(typ, "/")
	for _, line := range h {
		for _, r := range strings.Split(line, ",") {
			mt, params, _ := strings.Cut(r, ";")
			mt = strings.ToLower(strings.TrimSpace(mt))
			if zeroQ(params) {
				continue
			}
			if mt == typ || wildcards && (mt == "*/*" || mt == main+"/*") {
				return true
			}
		}
	}
	return false
}

// zeroQ reports a q=0 among a media range's parameters.
func zeroQ(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q <= 0
		}
	}
	return false
}

// readMultipartDoc reads a multipart/related PUT body: the doc and its
// attachment parts. Bad shapes are 400, a JSON part that is not JSON 415,
// a JSON part over max_document_size 413 document_too_large.
func (g *Gateway) readMultipartDoc(rq *req, boundary string) (*docjson.Doc, *couchdoc.Related, error) {
	body, err := bodyReader(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return nil, nil, err
	}
	rel, err := couchdoc.ReadRelated(body, boundary, g.maxDocumentSize())
	if err != nil {
		return nil, nil, multipartErr(err)
	}
	d, err := docjson.ParseDoc(rel.JSON)
	if err != nil {
		return nil, nil, err
	}
	return d, rel, nil
}

// multipartErr keeps the errors the table knows (errors.go); anything else
// reading a multipart body failed on is the client's body.
func multipartErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || errors.Is(err, couchdoc.ErrNotJSONPart) ||
		errors.Is(err, couchdoc.ErrDocTooLarge) || errors.Is(err, couchdoc.ErrBadMultipart) ||
		errors.Is(err, errTooLarge) || errors.Is(err, errNotGzipped) || errors.Is(err, errBodyBudget) || errors.Is(err, errBodyRead) {
		return err
	}
	return badRequest("could not read request body")
}

// relatedDoc is one revision in multipart/related form.
type relatedDoc struct {
	json []byte
	atts []*pb.AttMeta
	data [][]byte // stored bytes, as sent
}

// newRelatedDoc renders rb with follows stubs for the attachments whose
// data o sends; nil atts means the JSON alone (no attachment goes).
func newRelatedDoc(id string, info *pb.FullDocInfo, rb *pb.RevBody, o couchdoc.Options) *relatedDoc {
	o.Follows, o.AttEncodingInfo = true, true
	d := &relatedDoc{json: couchdoc.Append(make([]byte, 0, len(rb.Json)+256), id, info, rb, &o)}
	for _, i := range couchdoc.SentAtts(rb, &o) {
		d.atts = append(d.atts, rb.Atts[i])
		d.data = append(d.data, rb.AttData[i])
	}
	return d
}

// pieces lays the document out as CouchDB's multipart/related body.
func (d *relatedDoc) pieces(boundary string) [][]byte {
	out := [][]byte{couchdoc.RelatedHead(nil, boundary), d.json}
	for i, a := range d.atts {
		out = append(out, couchdoc.AttPartHead(nil, boundary, a.Name, a.ContentType, a.Encoding, len(d.data[i])), d.data[i])
	}
	return append(out, couchdoc.RelatedTail(nil, boundary))
}

func writePieces(w io.Writer, pieces [][]byte) error {
	for _, p := range pieces {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// writeRelated answers one document as multipart/related (GET with
// attachments), with its length known.
func (g *Gateway) writeRelated(rq *req, d *relatedDoc) error {
	boundary := couchdoc.NewBoundary()
	pieces := d.pieces(boundary)
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	rawAnswer(rq)
	h := rq.w.Header()
	h.Set("Content-Type", `multipart/related; boundary="`+boundary+`"`)
	h.Set("Content-Length", strconv.Itoa(n))
	rq.w.WriteHeader(200)
	if rq.r.Method == http.MethodHead {
		return nil
	}
	_ = writePieces(rq.w, pieces)
	return nil
}

// writeOpenRevsMixed answers open_revs as multipart/mixed: every found rev
// with its attachment data (CouchDB always sends it in this form, except
// for attachments atts_since says the client has), then the missing revs.
func (g *Gateway) writeOpenRevsMixed(rq *req, id string, info *pb.FullDocInfo, found, missing []*pb.RevBody, o couchdoc.Options) error {
	o.Attachments = true
	outer, inner := couchdoc.NewBoundary(), couchdoc.NewBoundary()
	rawAnswer(rq)
	rq.w.Header().Set("Content-Type", `multipart/mixed; boundary="`+outer+`"`)
	rq.w.WriteHeader(200)
	if rq.r.Method == http.MethodHead {
		return nil
	}
	w := rq.w
	_, _ = io.WriteString(w, "--"+outer)
	for _, b := range found {
		d := newRelatedDoc(id, info, b, o)
		var err error
		if len(d.atts) == 0 {
			_, err = io.WriteString(w, "\r\nContent-Type: application/json\r\n\r\n")
			if err == nil {
				_, err = w.Write(d.json)
			}
		} else {
			_, err = io.WriteString(w, "\r\nContent-Type: multipart/related; boundary=\""+inner+"\"\r\n\r\n")
			if err == nil {
				err = writePieces(w, d.pieces(inner))
			}
		}
		if err == nil {
			_, err = io.WriteString(w, "\r\n--"+outer)
		}
		if err != nil {
			return nil // the client went away
		}
	}
	for _, b := range missing {
		part := append([]byte("\r\nContent-Type: application/json; error=\"true\"\r\n\r\n{\"missing\":"), docjson.AppendString(nil, b.Rev)...)
		part = append(part, "}\r\n--"+outer...)
		if _, err := w.Write(part); err != nil {
			return nil
		}
	}
	_, _ = io.WriteString(w, "--")
	return nil
}

// wantsBulkGetMultipart mirrors CouchDB: multipart when Accept names
// multipart/mixed or multipart/related and does not accept JSON.
func wantsBulkGetMultipart(rq *req) (string, bool) {
	if accepts(rq, "application/json", true) {
		return "", false
	}
	switch {
	case accepts(rq, "multipart/mixed", false):
		return "multipart/mixed", true
	case accepts(rq, "multipart/related", false):
		return "multipart/related", true
	}
	return "", false
}

// writeBulkGetMultipart answers _bulk_get as CouchDB's multipart form: per
// found rev a JSON part, or a multipart/related part with X-Doc-Id and
// X-Rev-Id headers when attachment data goes with it; per missing rev or
// failed item an error part.
func (g *Gateway) writeBulkGetMultipart(rq *req, mt string, results []*bulkGetResult) error {
	outer, inner := couchdoc.NewBoundary(), couchdoc.NewBoundary()
	rawAnswer(rq)
	rq.w.Header().Set("Content-Type", mt+`; boundary="`+outer+`"`)
	rq.w.WriteHeader(200)
	w := rq.w
	errPart := func(id, rev []byte, code, reason string) error {
		b := []byte("\r\n--" + outer + "\r\nContent-Type: application/json; error=\"true\"\r\n\r\n")
		_, err := w.Write(appendRevError(b, id, rev, code, reason))
		return err
	}
	for _, res := range results {
		if res.code != "" {
			if errPart(res.item.idJSON, res.rev, res.code, res.reason) != nil {
				return nil
			}
			continue
		}
		for _, b := range res.reply.Bodies {
			var err error
			if b.Missing {
				err = errPart(res.item.idJSON, docjson.AppendString(nil, b.Rev), "not_found", "missing")
			} else {
				o := res.opts
				o.Attachments = true
				d := newRelatedDoc(res.item.ID, res.reply.Info, b, o)
				if len(d.atts) == 0 {
					_, err = w.Write(append([]byte("\r\n--"+outer+"\r\nContent-Type: application/json\r\n\r\n"), d.json...))
				} else {
					hdr := "\r\n--" + outer + "\r\nX-Doc-Id: " + headerValue(res.item.ID) + "\r\nX-Rev-Id: " + headerValue(b.Rev) +
						"\r\nContent-Type: multipart/related; boundary=\"" + inner + "\"\r\n\r\n"
					if _, err = io.WriteString(w, hdr); err == nil {
						err = writePieces(w, d.pieces(inner))
					}
				}
			}
			if err != nil {
				return nil // the client went away
			}
		}
	}
	_, _ = io.WriteString(w, "\r\n--"+outer+"--\r\n")
	return nil
}

// headerValue keeps a doc id from breaking a part's header block.
func headerValue(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", "%0D", "\n", "%0A").Replace(s)
}
