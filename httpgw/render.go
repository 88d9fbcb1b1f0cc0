package httpgw

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// _show, _list and _update: a design doc's JavaScript renders a doc, a
// view's rows or an update, with CouchDB's request object (jsReq) and
// response ({code, headers, body | json | base64}, or a string).

// designFn reads a design doc's function: member (shows, lists, updates)
// and name.
func (g *Gateway) designFn(rq *req, db, ddocID, member, name string) (string, error) {
	r, err := g.c.GetDocR(rq.ctx, db, &pb.GetDoc{Id: ddocID}, 1)
	if err != nil || r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || r.Bodies[0].Deleted {
		return "", errMissing
	}
	var ddoc map[string]json.RawMessage
	if err := json.Unmarshal(r.Bodies[0].Json, &ddoc); err != nil {
		return "", errMissing
	}
	var fns map[string]string
	if err := json.Unmarshal(ddoc[member], &fns); err != nil || fns[name] == "" {
		return "", newErr(404, "not_found", "missing function "+name+" on design doc "+ddocID)
	}
	return fns[name], nil
}

// writeJSResponse sends what a render function answered.
func (g *Gateway) writeJSResponse(rq *req, resp *couchjs.Response, defaultCode int) error {
	if resp == nil {
		resp = &couchjs.Response{}
	}
	h := rq.w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/html; charset=utf-8")
	}
	code := resp.Code
	if code == 0 {
		code = defaultCode
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	rq.w.WriteHeader(code)
	if rq.r.Method != http.MethodHead {
		_, _ = rq.w.Write(resp.Body)
	}
	return nil
}

func (g *Gateway) renderBody(rq *req) ([]byte, error) {
	if rq.r.Method != http.MethodPost && rq.r.Method != http.MethodPut {
		return nil, nil
	}
	return readBody(rq, g.cfg.MaxRequestSize)
}

// handleShow is /db/_design/d/_show/name[/docid].
func (g *Gateway) handleShow(rq *req, db, ddocID string, rest []string) error {
	if len(rest) == 0 {
		return errMissing
	}
	src, err := g.designFn(rq, db, ddocID, "shows", rest[0])
	if err != nil {
		return err
	}
	doc := []byte("null")
	var id any
	if len(rest) > 1 {
		docID := strings.Join(rest[1:], "/")
		id = docID
		m := &pb.GetDoc{Id: docID}
		if rev := rq.q.Get("rev"); rev != "" {
			m.Revs = []string{rev}
		}
		if r, err := g.c.GetDoc(rq.ctx, db, m); err == nil && r.Info != nil && len(r.Bodies) > 0 && !r.Bodies[0].Missing && !r.Bodies[0].Deleted {
			doc = appendDoc(r)
		}
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, body, id)
	if err != nil {
		return err
	}
	resp, err := g.cfg.JS.Show(rq.ctx, src, doc, jreq)
	if err != nil {
		return jsErr(err)
	}
	return g.writeJSResponse(rq, resp, 200)
}

// handleUpdate is POST|PUT /db/_design/d/_update/name[/docid]: the
// function answers the doc to save (or null) and the response.
func (g *Gateway) handleUpdate(rq *req, db, ddocID string, rest []string) error {
	if rq.r.Method != http.MethodPost && rq.r.Method != http.MethodPut {
		return methodNotAllowed("PUT,POST")
	}
	if len(rest) == 0 {
		return errMissing
	}
	src, err := g.designFn(rq, db, ddocID, "updates", rest[0])
	if err != nil {
		return err
	}
	doc := []byte("null")
	var id any
	if len(rest) > 1 {
		docID := strings.Join(rest[1:], "/")
		id = docID
		if r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: docID}); err == nil && r.Info != nil && len(r.Bodies) > 0 && !r.Bodies[0].Missing && !r.Bodies[0].Deleted {
			doc = appendDoc(r)
		}
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, body, id)
	if err != nil {
		return err
	}
	newDoc, resp, err := g.cfg.JS.Update(rq.ctx, src, doc, jreq)
	if err != nil {
		return jsErr(err)
	}
	code := 200
	if len(newDoc) > 0 && string(newDoc) != "null" {
		d, err := docjson.ParseDoc(newDoc)
		if err != nil {
			return err
		}
		if !d.HasID {
			return newErr(500, "render_error", "Document id must be a string")
		}
		rev, err := g.saveUpdated(rq, db, d)
		if err != nil {
			return err
		}
		rq.w.Header().Set("X-Couch-Id", url.PathEscape(d.ID))
		rq.w.Header().Set("X-Couch-Update-NewRev", rev)
		code = 201
	}
	return g.writeJSResponse(rq, resp, code)
}

// saveUpdated writes an update function's doc as a PUT would.
func (g *Gateway) saveUpdated(rq *req, db string, d *docjson.Doc) (string, error) {
	if err := g.requireMember(rq, db); err != nil {
		return "", err
	}
	if err := g.validateWrite(rq, db, d.ID, d, true); err != nil {
		return "", err
	}
	u, err := docUpdate(0, d.ID, d, true)
	if err != nil {
		return "", err
	}
	out, err := g.c.UpdateDocs(rq.ctx, db, []*pb.DocUpdate{u}, true, 0)
	if err != nil {
		return "", err
	}
	if out[0].Err != nil {
		return "", out[0].Err
	}
	return out[0].Rev, nil
}

// handleList is /db/_design/d/_list/list/view or …/_list/list/ddoc/view:
// the list function reads the view's rows with getRow() and sends chunks.
func (g *Gateway) handleList(rq *req, db, ddocID string, rest []string) error {
	if len(rest) < 2 {
		return errMissing
	}
	src, err := g.designFn(rq, db, ddocID, "lists", rest[0])
	if err != nil {
		return err
	}
	viewDDoc, view := ddocID, rest[1]
	if len(rest) > 2 {
		viewDDoc, view = "_design/"+rest[1], rest[2]
	}
	a, err := parseViewArgs(queryParams(rq))
	if err != nil {
		return err
	}
	ddoc, def, err := g.loadDesign(rq, db, viewDDoc)
	if err != nil {
		return err
	}
	// the rows are collected for the function (its getRow() pulls them);
	// a list is a rendering of a page of rows, not a bulk export
	col := &collectOut{}
	if err := g.runView(rq, db, viewDDoc, ddoc, def, view, a, col, true); err != nil {
		return err
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, body, nil)
	if err != nil {
		return err
	}
	head := col.head
	if len(head) == 0 {
		head = []byte(`{}`)
	}
	i := 0
	next := func() ([]byte, bool) {
		if i >= len(col.rows) {
			return nil, false
		}
		i++
		return col.rows[i-1], true
	}
	var sent []byte
	resp, err := g.cfg.JS.List(rq.ctx, src, head, jreq, next, func(chunk string) error {
		sent = append(sent, chunk...)
		return nil
	})
	if err != nil {
		return jsErr(err)
	}
	if resp == nil {
		resp = &couchjs.Response{}
	}
	resp.Body = append(sent, resp.Body...)
	return g.writeJSResponse(rq, resp, 200)
}

// collectOut keeps a view's answer for a list function: its head as the
// function's head object ({total_rows, offset}) and its rows.
type collectOut struct {
	head []byte
	rows [][]byte
}

func (c *collectOut) open(head []byte) error {
	// head is `{"total_rows":N,"offset":M,"rows":[`: the object without rows
	h := strings.TrimSuffix(string(head), `"rows":[`)
	h = strings.TrimSuffix(h, ",")
	if h == "{" {
		h = "{}"
	} else {
		h += "}"
	}
	c.head = []byte(h)
	return nil
}

func (c *collectOut) row(b []byte) error {
	c.rows = append(c.rows, append([]byte(nil), b...))
	return nil
}

// appendDoc renders a read doc as a function sees it.
func appendDoc(r *pb.DocReply) []byte {
	return couchdoc.Append(nil, r.Info.Id, r.Info, r.Bodies[0], nil)
}
