package couchjs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Response is what a show, list or update function answered, as CouchDB
// sends it: Code (200 when the function gave none), Headers (with
// CouchDB's default Content-Type), Body (the body string, the json member
// encoded, or the base64 member decoded).
type Response struct {
	Code    int
	Headers map[string]string
	Body    []byte
	// JSON: the body is the response's json member (CouchDB sends it as
	// JSON, without the sandbox CSP of rendered bodies)
	JSON bool
}

// Compile checks a function source as CouchDB does when a design doc with
// it is saved: a syntax error, or a source that does not evaluate to a
// function, is a *Error with Code "compilation_error". The source's top
// level runs in a sandbox of its own, dropped after.
func (p *Pool) Compile(src string) error { return p.oneOff().Compile(src) }

// Compile is Pool.Compile in this sandbox (with the design doc's require).
func (d *DDoc) Compile(src string) error {
	_, err := d.p.call(context.Background(), d, &request{kind: kCompile, srcs: []string{src}}, nil)
	return err
}

// Reduce runs a JavaScript reduce function. keys[i] is the [key, docid]
// JSON of values[i] (keys is ignored on rereduce, where the function gets
// null). A function that throws answers null (logged), as in CouchDB,
// unless it threw a fatal error.
// It runs in a sandbox of its own, dropped after.
func (p *Pool) Reduce(ctx context.Context, src string, keys, values [][]byte, rereduce bool) ([]byte, error) {
	return p.oneOff().Reduce(ctx, src, keys, values, rereduce)
}

// Reduce is Pool.Reduce in this sandbox.
func (d *DDoc) Reduce(ctx context.Context, src string, keys, values [][]byte, rereduce bool) ([]byte, error) {
	out, err := d.ReduceBatch(ctx, src, []ReduceGroup{{Keys: keys, Values: values}}, rereduce)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ReduceGroup is one group's rows for ReduceBatch: Keys[i] is the
// [key, docid] JSON of Values[i]; a rereduce reads Values alone.
type ReduceGroup struct{ Keys, Values [][]byte }

// ReduceBatch is Reduce over many groups in one call to one worker (a
// query with group=true or group_level reduces a page of groups so, not
// paying a round trip per group): out[g] is group g's reduction, exactly
// what Reduce answers for it. A group whose function throws answers null
// (logged) and the others go on, as CouchDB reduces each group apart; a
// fatal error (a thrown "fatal_error" or ["fatal", code, reason]), a
// timeout or a worker that died fails the batch as a whole, as it fails
// CouchDB's query. Timeout bounds each group (as MapDocs each doc), and
// the answers together are bounded by MaxOutput. The caller bounds the
// batch (the views package sends a page of groups at most, up to a
// byte budget).
func (p *Pool) ReduceBatch(ctx context.Context, src string, groups []ReduceGroup, rereduce bool) ([][]byte, error) {
	return p.oneOff().ReduceBatch(ctx, src, groups, rereduce)
}

// ReduceBatch is Pool.ReduceBatch in this sandbox.
func (d *DDoc) ReduceBatch(ctx context.Context, src string, groups []ReduceGroup, rereduce bool) ([][]byte, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	// each group's values (and keys) as one JSON array, slices of one
	// buffer: the worker parses an array per group
	n := 0
	for _, g := range groups {
		n += jsonArraySize(g.Values)
		if !rereduce {
			n += jsonArraySize(g.Keys)
		}
	}
	buf := make([]byte, 0, n)
	req := &request{kind: kReduce, srcs: []string{src}, a: make([][]byte, len(groups)), flag: rereduce}
	if !rereduce {
		req.b = make([][]byte, len(groups))
	}
	for i, g := range groups {
		at := len(buf)
		buf = appendJSONArray(buf, g.Values)
		req.a[i] = buf[at:len(buf):len(buf)]
		if !rereduce {
			at = len(buf)
			buf = appendJSONArray(buf, g.Keys)
			req.b[i] = buf[at:len(buf):len(buf)]
		}
	}
	res, err := d.p.call(ctx, d, req, nil)
	if err != nil {
		return nil, err
	}
	if len(res.out) != len(groups) {
		return nil, errBadAnswer
	}
	return res.out, nil
}

var errBadAnswer = errors.New("couchjs: malformed answer from a worker")

// ValidateDocUpdate runs validate_doc_update(newDoc, oldDoc, userCtx,
// secObj) (oldDoc nil: null). It answers nil, or a *Error: "forbidden" or
// "unauthorized" for a thrown {forbidden: msg} or {unauthorized: msg};
// other throws as CouchDB answers them. Like every Pool method of a DDoc
// name, it runs in a sandbox of its own, dropped after the call; the
// server calls through DDoc.
func (p *Pool) ValidateDocUpdate(ctx context.Context, src string, newDoc, oldDoc, userCtx, secObj []byte) error {
	return p.oneOff().ValidateDocUpdate(ctx, src, newDoc, oldDoc, userCtx, secObj)
}

// ValidateDocUpdate is Pool.ValidateDocUpdate in this sandbox.
func (d *DDoc) ValidateDocUpdate(ctx context.Context, src string, newDoc, oldDoc, userCtx, secObj []byte) error {
	_, err := d.p.call(ctx, d, &request{kind: kValidate, srcs: []string{src}, a: [][]byte{newDoc, oldDoc, userCtx, secObj}}, nil)
	return err
}

// Filter runs a _changes filter(doc, req) over docs; true keeps a doc
// (the function's answer made boolean, as couchjs does).
func (p *Pool) Filter(ctx context.Context, src string, docs [][]byte, req []byte) ([]bool, error) {
	return p.oneOff().Filter(ctx, src, docs, req)
}

// Filter is Pool.Filter in this sandbox.
func (d *DDoc) Filter(ctx context.Context, src string, docs [][]byte, req []byte) ([]bool, error) {
	res, err := d.p.call(ctx, d, &request{kind: kFilter, srcs: []string{src}, a: docs, b: [][]byte{req}}, nil)
	if err != nil {
		return nil, err
	}
	if len(res.out) != 1 {
		return nil, errBadAnswer
	}
	out := make([]bool, len(res.out[0]))
	for i, b := range res.out[0] {
		out[i] = b != 0
	}
	return out, nil
}

// Show runs a show function on doc (nil: null, no such doc) and req.
func (p *Pool) Show(ctx context.Context, src string, doc, req []byte) (*Response, error) {
	return p.oneOff().Show(ctx, src, doc, req)
}

// Show is Pool.Show in this sandbox.
func (d *DDoc) Show(ctx context.Context, src string, doc, req []byte) (*Response, error) {
	res, err := d.p.call(ctx, d, &request{kind: kShow, srcs: []string{src}, a: [][]byte{doc, req}}, nil)
	if err != nil {
		return nil, err
	}
	if len(res.out) != 1 {
		return nil, errBadAnswer
	}
	return parseResponse(res.out[0])
}

// Update runs an update function on doc (nil: null) and req; it answers
// the doc to save (nil: none) and the response.
func (p *Pool) Update(ctx context.Context, src string, doc, req []byte) (newDoc []byte, resp *Response, err error) {
	return p.oneOff().Update(ctx, src, doc, req)
}

// Update is Pool.Update in this sandbox.
func (d *DDoc) Update(ctx context.Context, src string, doc, req []byte) (newDoc []byte, resp *Response, err error) {
	res, err := d.p.call(ctx, d, &request{kind: kUpdate, srcs: []string{src}, a: [][]byte{doc, req}}, nil)
	if err != nil {
		return nil, nil, err
	}
	if len(res.out) != 2 {
		return nil, nil, errBadAnswer
	}
	if len(res.out[0]) > 0 {
		newDoc = res.out[0]
	}
	resp, err = parseResponse(res.out[1])
	if err == nil && newDoc != nil && !hasCode(res.out[1]) {
		// CouchDB's answer for an update that saves a doc.
		resp.Code = 201
	}
	return newDoc, resp, err
}

// List runs a list function over head and req, pulling rows (each a view
// row's JSON) with rows until it answers false. Chunks go to send as
// couchjs flushes them (at the first getRow with what was sent before,
// at each later getRow, and at the end); the returned Response carries
// the code and headers of start() (and the provides() content type),
// which are fixed before the first chunk: ListStream hands them over
// before it.
func (p *Pool) List(ctx context.Context, src string, head, req []byte, rows func() ([]byte, bool), send func(chunk string) error) (*Response, error) {
	var resp *Response
	err := p.oneOff().ListStream(ctx, src, head, req, rows, func(r *Response) error {
		resp = r
		return nil
	}, send)
	return resp, err
}

// ListStream is List in this sandbox, calling start with the
// response's code and headers before the first chunk. The worker asks
// for rows and sends chunks within the call; a failed start or send
// stops the function at its next getRow and is the call's answer.
func (d *DDoc) ListStream(ctx context.Context, src string, head, req []byte, rows func() ([]byte, bool), start func(*Response) error, send func(chunk string) error) error {
	var sendErr error
	onFrame := func(w *worker, typ byte, body []byte) error {
		switch typ {
		case fGetRow:
			status := byte(rowEnd)
			var row []byte
			if sendErr != nil {
				status = rowAbort
			} else if r, ok := rows(); ok {
				status, row = rowOK, r
			}
			return w.reply(status, row)
		case fChunks:
			if sendErr != nil {
				return nil
			}
			dd := dec{b: body}
			label := dd.str()
			n := dd.u()
			if dd.err != nil || n > uint64(len(dd.b)) {
				return errBadAnswer
			}
			chunks := make([]string, n)
			for i := range chunks {
				chunks[i] = dd.str()
			}
			hasStart := dd.bool()
			var st []byte
			if hasStart {
				st = dd.bytes()
			}
			if dd.err != nil {
				return errBadAnswer
			}
			if label == "start" {
				r := &Response{Code: 200, Headers: map[string]string{}}
				if hasStart {
					var err error
					if r, err = parseResponse(st); err != nil {
						sendErr = err
						return nil
					}
					r.Body = nil
				}
				if !hasHeader(r.Headers, "Content-Type") {
					r.Headers["Content-Type"] = "application/json"
				}
				if err := start(r); err != nil {
					sendErr = err
					return nil
				}
			}
			for _, ch := range chunks {
				if err := send(ch); err != nil {
					sendErr = err
					return nil
				}
			}
		}
		return nil
	}
	_, err := d.p.call(ctx, d, &request{kind: kList, srcs: []string{src}, a: [][]byte{head, req}}, onFrame)
	if sendErr != nil {
		return sendErr
	}
	return err
}

// parseResponse reads a response object as CouchDB's external-response
// code does: json wins over base64 over body, with the Content-Type
// defaults CouchDB gives each.
func parseResponse(b []byte) (*Response, error) {
	var r struct {
		Code    *float64        `json:"code"`
		Headers map[string]any  `json:"headers"`
		Body    *string         `json:"body"`
		Base64  *string         `json:"base64"`
		JSON    json.RawMessage `json:"json"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("couchjs: response object: %w", err)
	}
	resp := &Response{Code: 200, Headers: map[string]string{}}
	if r.Code != nil {
		resp.Code = int(*r.Code)
	}
	for k, h := range r.Headers {
		if s, ok := h.(string); ok {
			resp.Headers[k] = s
		} else {
			hb, _ := json.Marshal(h)
			resp.Headers[k] = string(hb)
		}
	}
	ctype := ""
	switch {
	case r.JSON != nil:
		// CouchDB's encoder, then a newline, as CouchDB sends it.
		resp.Body = append(couchNumbers(r.JSON), '\n')
		resp.JSON = true
		ctype = "application/json"
	case r.Base64 != nil:
		dec, err := base64.StdEncoding.DecodeString(*r.Base64)
		if err != nil {
			return nil, &Error{Code: "render_error", Reason: "invalid base64 body"}
		}
		resp.Body = dec
		ctype = "application/binary"
	case r.Body != nil:
		resp.Body = []byte(*r.Body)
		ctype = "text/html; charset=utf-8"
	default:
		// No body at all: CouchDB still labels it JSON.
		ctype = "application/json"
	}
	if ctype != "" && !hasHeader(resp.Headers, "Content-Type") {
		resp.Headers["Content-Type"] = ctype
	}
	return resp, nil
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if http.CanonicalHeaderKey(k) == name {
			return true
		}
	}
	return false
}

func hasCode(resp []byte) bool {
	var r struct {
		Code *float64 `json:"code"`
	}
	return json.Unmarshal(resp, &r) == nil && r.Code != nil
}
