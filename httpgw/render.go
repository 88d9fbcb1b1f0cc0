package httpgw

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
)

// _show, _list and _update: a design doc's JavaScript renders a doc, a
// view's rows or an update, with CouchDB's request object (jsReq) and
// response ({code, headers, body | json | base64}, or a string), the
// design doc as the function's `this`. CouchDB 3.x's headers: a
// Content-Security-Policy of "sandbox" on what the function rendered
// (not on a {json: …} answer, which CouchDB sends as JSON), Vary: Accept
// on a show.

// designFn is a design doc (from the policy's design docs) and its
// function member.name: 404 missing without the doc (deleted or never
// written), "missing json key: name" without the function, as CouchDB.
func (g *Gateway) designFn(rq *req, db, ddocID, member, name string) (string, *policy.Design, error) {
	d, err := g.pol.Design(rq.ctx, db, ddocID)
	if err != nil {
		return "", nil, errMissing
	}
	src, ok := d.Source(member, name)
	if !ok {
		return "", nil, newErr(404, "not_found", "missing json key: "+name)
	}
	return src, d, nil
}

// renderErr is a render function's failure as CouchDB answers it: a
// response object the function built wrong (a body that is no string) is
// Erlang's badarg.
func renderErr(err error) error {
	var je *couchjs.Error
	if errors.As(err, &je) && je.Code == "not_acceptable" {
		return newErr(406, je.Code, je.Reason)
	}
	if err == nil || errors.As(err, &je) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if strings.Contains(err.Error(), "response object") {
		return newErr(500, "unknown_error", "badarg")
	}
	return err
}

// writeJSResponse sends what a render function answered.
func (g *Gateway) writeJSResponse(rq *req, resp *couchjs.Response, defaultCode int) error {
	if resp == nil {
		resp = &couchjs.Response{}
	}
	rawAnswer(rq)
	h := rq.w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/html; charset=utf-8")
	}
	if !resp.JSON {
		g.setShowListCSP(h) // CouchDB sends none with a json answer
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

// readDocFor is the doc a show or update renders: nil (null) when it is
// missing or deleted, as CouchDB hands the function null.
func (g *Gateway) readDocFor(rq *req, db, docID, rev string) []byte {
	m := &pb.GetDoc{Id: docID}
	if rev != "" {
		m.Revs = []string{rev}
	}
	r, err := g.c.GetDoc(rq.ctx, db, m)
	if err != nil || r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || r.Bodies[0].Deleted {
		return nil
	}
	// CouchDB opens it with its history (_revisions)
	return couchdoc.Append(nil, r.Info.Id, r.Info, r.Bodies[0], &couchdoc.Options{Revs: true})
}

// handleShow is /db/_design/d/_show/name[/docid].
func (g *Gateway) handleShow(rq *req, db, ddocID string, rest []string) error {
	if len(rest) == 0 || rest[0] == "" {
		return errMissing
	}
	src, ddoc, err := g.designFn(rq, db, ddocID, "shows", rest[0])
	if err != nil {
		return err
	}
	var doc []byte
	var id any
	docRev := ""
	if len(rest) > 1 {
		docID := strings.Join(rest[1:], "/")
		id = docID
		doc = g.readDocFor(rq, db, docID, rq.q.Get("rev"))
		var r struct {
			Rev string `json:"_rev"`
		}
		_ = json.Unmarshal(doc, &r)
		docRev = r.Rev
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, textBody(body), id)
	if err != nil {
		return err
	}
	resp, err := ddoc.JS.Show(rq.ctx, src, doc, jreq)
	if err != nil {
		return renderErr(err)
	}
	// the answer varies with the doc, the design doc, the user and what
	// the client accepts (CouchDB's show ETag)
	h := rq.w.Header()
	h.Set("Vary", "Accept")
	h.Set("Etag", etagOf([]byte(docRev+"\x00"+string(ddoc.Body)+"\x00"+rq.r.Header.Get("Accept")+"\x00"+string(userCtxJSON(rq, db))+"\x00"+rq.r.URL.RawQuery)))
	return g.writeJSResponse(rq, resp, 200)
}

// textBody is a request body as req.body: the string, or "undefined"
// when the request had none (CouchDB's answer).
func textBody(body []byte) json.RawMessage {
	if body == nil {
		body = []byte("undefined")
	}
	b, _ := json.Marshal(string(body))
	return b
}

// handleUpdate is POST|PUT /db/_design/d/_update/name[/docid]: the
// function answers the doc to save (or null) and the response.
func (g *Gateway) handleUpdate(rq *req, db, ddocID string, rest []string) error {
	if rq.r.Method != http.MethodPost && rq.r.Method != http.MethodPut {
		return newErr(405, "method_not_allowed", "Update functions do not allow "+rq.r.Method)
	}
	if len(rest) == 0 || rest[0] == "" {
		return errMissing
	}
	src, ddoc, err := g.designFn(rq, db, ddocID, "updates", rest[0])
	if err != nil {
		return err
	}
	var doc []byte
	var id any
	if len(rest) > 1 {
		docID := strings.Join(rest[1:], "/")
		id = docID
		doc = g.readDocFor(rq, db, docID, "")
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, textBody(body), id)
	if err != nil {
		return err
	}
	newDoc, resp, err := ddoc.JS.Update(rq.ctx, src, doc, jreq)
	if err != nil {
		return renderErr(err)
	}
	code := 200
	if len(newDoc) > 0 && newDoc[0] == '{' {
		d, err := docjson.ParseDoc(newDoc)
		if err != nil {
			return err
		}
		if !d.HasID || d.ID == "" {
			return newErr(400, "illegal_docid", "Document id must not be empty")
		}
		if err := g.checkWriteID(rq, db, d.ID); err != nil {
			return err
		}
		rev, err := g.saveUpdated(rq, db, d)
		if err != nil {
			return err
		}
		rq.w.Header().Set("X-Couch-Id", url.PathEscape(d.ID))
		rq.w.Header().Set("X-Couch-Update-Newrev", rev)
		code = 201
	}
	return g.writeJSResponse(rq, resp, code)
}

// saveUpdated writes an update function's doc as a PUT would.
func (g *Gateway) saveUpdated(rq *req, db string, d *docjson.Doc) (string, error) {
	if err := g.requireMember(rq, db); err != nil {
		return "", err
	}
	if isDesign(d.ID) {
		if err := g.requireDBAdmin(rq, db); err != nil {
			return "", err
		}
		defer g.forgetDesigns(db)
	}
	u, err := docUpdate(0, d.ID, d, true)
	if err != nil {
		return "", err
	}
	out, err := g.writeDocs(rq, db, []*pb.DocUpdate{u}, true, 0)
	if err != nil {
		return "", err
	}
	if out[0].Err != nil {
		return "", out[0].Err
	}
	return out[0].Rev, nil
}

// handleList is /db/_design/d/_list/list/view or …/_list/list/ddoc/view:
// the list function pulls the view's rows with getRow() as the view
// streams them (a goroutine reads the view into a channel the function
// drains), and its chunks go out as couchjs flushes them.
func (g *Gateway) handleList(rq *req, db, ddocID string, rest []string) error {
	if len(rest) < 2 {
		return errMissing
	}
	src, ddoc, err := g.designFn(rq, db, ddocID, "lists", rest[0])
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
	vddoc, def, err := g.loadDesign(rq, db, viewDDoc)
	if err != nil {
		return err
	}
	if _, ok := def.View(view); !ok {
		return newErr(404, "not_found", "missing_named_view")
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, textBody(body), nil)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(rq.ctx)
	defer cancel()
	feed := &listFeed{ctx: ctx, head: make(chan []byte, 1), rows: make(chan []byte, 64)}
	viewDone := make(chan error, 1)
	vrq := *rq
	vrq.ctx = ctx
	go func() {
		err := g.runView(&vrq, db, viewDDoc, vddoc, def, view, a, feed, true)
		close(feed.rows)
		viewDone <- err
	}()
	// the head comes first, or the view's error (an ordinary answer)
	var head []byte
	select {
	case head = <-feed.head:
	case err := <-viewDone:
		if err != nil {
			return err
		}
		// a view that ended at once may have sent its head too: select
		// picks either ready case
		select {
		case head = <-feed.head:
		default:
			head = []byte("{}")
		}
		viewDone <- nil
	}
	next := func() ([]byte, bool) {
		b, ok := <-feed.rows
		return b, ok
	}
	// the status line waits for the first chunk with content: a function
	// that fails before sending anything is answered 500 (CouchDB's
	// answer too), with the headers start() gave
	lw := &listWriter{rq: rq, g: g}
	err = ddoc.JS.ListStream(ctx, src, head, jreq, next, lw.start, lw.send)
	cancel()
	verr := <-viewDone
	if err == nil && verr != nil && !errors.Is(verr, context.Canceled) {
		err = verr
	}
	if err != nil {
		if lw.resp == nil && !lw.sent {
			return renderErr(err)
		}
		// CouchDB ends the answer with the error as a last chunk
		ce := toCouch(renderErr(err))
		b, _ := json.Marshal(struct {
			Code   int    `json:"code"`
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}{ce.status, ce.code, ce.reason})
		if !lw.sent {
			lw.resp.Code = ce.status
		}
		_ = lw.send("\n" + string(b) + "\n")
		return nil
	}
	if !lw.sent {
		lw.commit()
	}
	return nil
}

// listFeed is a view's answer fed to a list function: its head (the
// object without rows: {total_rows, offset}, or {} for a reduce) and its
// rows, each copied (the writer reuses its buffer).
type listFeed struct {
	ctx  context.Context
	head chan []byte
	rows chan []byte
}

func (f *listFeed) open(head []byte) error {
	h := strings.TrimSuffix(string(head), `"rows":[`)
	h = strings.TrimSuffix(h, ",")
	if h == "{" {
		h = "{}"
	} else {
		h += "}"
	}
	f.head <- []byte(h)
	return nil
}

func (f *listFeed) row(b []byte) error {
	select {
	case f.rows <- append([]byte(nil), b...):
		return nil
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
}

// listWriter sends a list's answer: the status and headers of start()
// before the first chunk with content, the chunks as they come.
type listWriter struct {
	rq   *req
	g    *Gateway
	resp *couchjs.Response
	sent bool
}

func (w *listWriter) start(r *couchjs.Response) error {
	w.resp = r
	return nil
}

func (w *listWriter) commit() {
	rawAnswer(w.rq)
	h := w.rq.w.Header()
	code := 200
	if w.resp != nil {
		for k, v := range w.resp.Headers {
			h.Set(k, v)
		}
		if w.resp.Code != 0 {
			code = w.resp.Code
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	w.g.setShowListCSP(h)
	w.rq.w.WriteHeader(code)
	w.sent = true
}

func (w *listWriter) send(chunk string) error {
	if chunk == "" {
		return nil
	}
	if !w.sent {
		w.commit()
	}
	if w.rq.r.Method == http.MethodHead {
		return nil
	}
	if _, err := w.rq.w.Write([]byte(chunk)); err != nil {
		return err
	}
	if f, ok := w.rq.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}
