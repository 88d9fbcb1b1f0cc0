package couchjs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/dop251/goja"
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

// bind returns the user's function of c and the design doc object it
// runs with (an empty object when d has no doc). A runtime of a DDoc
// sandbox parses the doc and makes its require once.
func (v *vm) bind(c *compiled, d *DDoc) (goja.Value, goja.Value, error) {
	if d.ddoc == nil {
		f, err := v.function(c, nil)
		return f, v.rt.NewObject(), err
	}
	if d.bound && v.ddoc != nil {
		f, err := v.function(c, v.ddocReq)
		return f, v.ddoc, err
	}
	obj, err := v.parse(goja.Undefined(), v.rt.ToValue(string(d.ddoc)))
	if err != nil {
		return nil, nil, v.exception(err)
	}
	// require reads a copy of its own (frozen by makeRequire): code that
	// changes `this` cannot make require evaluate a string of its making
	root, err := v.parse(goja.Undefined(), v.rt.ToValue(string(d.ddoc)))
	if err != nil {
		return nil, nil, v.exception(err)
	}
	req, err := v.makeRequire(goja.Undefined(), root, v.rt.NewObject())
	if err != nil {
		return nil, nil, v.exception(err)
	}
	if d.bound {
		v.ddoc, v.ddocReq, v.ddocFns = obj, req, map[*goja.Program]goja.Value{}
	}
	f, err := v.function(c, req)
	return f, obj, err
}

// json parses JSON bytes into a fresh (mutable) JS value; nil or empty is
// null.
func (v *vm) json(b []byte) (goja.Value, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return goja.Null(), nil
	}
	val, err := v.parse(goja.Undefined(), v.rt.ToValue(string(b)))
	if err != nil {
		return nil, fmt.Errorf("couchjs: bad JSON argument: %w", err)
	}
	return val, nil
}

func (v *vm) jsonArgs(bs ...[]byte) ([]goja.Value, error) {
	out := make([]goja.Value, len(bs))
	for i, b := range bs {
		val, err := v.json(b)
		if err != nil {
			return nil, err
		}
		out[i] = val
	}
	return out, nil
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
	c, err := d.p.program(src)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = d.p.with(ctx, d, func(v *vm) error {
		f, err := v.function(c, nil)
		if err != nil {
			return err
		}
		ks := goja.Null()
		if !rereduce {
			if ks, err = v.json(joinJSON(keys)); err != nil {
				return err
			}
		}
		vs, err := v.json(joinJSON(values))
		if err != nil {
			return err
		}
		r, err := v.reduce(goja.Undefined(), f, ks, vs, v.rt.ToValue(rereduce))
		if err != nil {
			return v.exception(err)
		}
		out = couchNumbers([]byte(r.String()))
		return nil
	})
	return out, err
}

func joinJSON(items [][]byte) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

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
	c, err := d.p.program(src)
	if err != nil {
		return err
	}
	return d.p.with(ctx, d, func(v *vm) error {
		f, this, err := v.bind(c, d)
		if err != nil {
			return err
		}
		args, err := v.jsonArgs(newDoc, oldDoc, userCtx, secObj)
		if err != nil {
			return err
		}
		r, err := v.validate(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
		if err != nil {
			return v.exception(err)
		}
		return validateAnswer(v, r)
	})
}

// validateAnswer reads what validate returned: 1, or the thrown value.
// CouchDB knows {forbidden: reason} (403) and {unauthorized: reason}
// (401); ["error", code, reason] keeps its code; anything else thrown is
// a 500 unknown_error whose reason is the string, or an object's first
// member (TestCouchDBSideBySide/validate records these on CouchDB).
func validateAnswer(v *vm, r goja.Value) error {
	if n, ok := r.Export().(int64); ok && n == 1 {
		return nil
	}
	obj, ok := r.(*goja.Object)
	if !ok {
		return &Error{Code: "unknown_error", Reason: reasonString(v, r)}
	}
	if obj.ClassName() == "Array" {
		return v.thrown(r)
	}
	for _, code := range []string{"forbidden", "unauthorized"} {
		if m := obj.Get(code); m != nil {
			return &Error{Code: code, Reason: reasonString(v, m)}
		}
	}
	if keys := obj.Keys(); len(keys) > 0 {
		return &Error{Code: "unknown_error", Reason: reasonString(v, obj.Get(keys[0]))}
	}
	return &Error{Code: "unknown_error", Reason: reasonString(v, r)}
}

func reasonString(v *vm, m goja.Value) string {
	if s, ok := m.Export().(string); ok {
		return s
	}
	b, err := v.stringify(goja.Undefined(), m)
	if err != nil || goja.IsUndefined(b) {
		return m.String()
	}
	return b.String()
}

func anys(vs []goja.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// Filter runs a _changes filter(doc, req) over docs; true keeps a doc
// (the function's answer made boolean, as couchjs does).
func (p *Pool) Filter(ctx context.Context, src string, docs [][]byte, req []byte) ([]bool, error) {
	return p.oneOff().Filter(ctx, src, docs, req)
}

// Filter is Pool.Filter in this sandbox.
func (d *DDoc) Filter(ctx context.Context, src string, docs [][]byte, req []byte) ([]bool, error) {
	c, err := d.p.program(src)
	if err != nil {
		return nil, err
	}
	var out []bool
	err = d.p.with(ctx, d, func(v *vm) error {
		f, this, err := v.bind(c, d)
		if err != nil {
			return err
		}
		ds, err := v.json(joinJSON(docs))
		if err != nil {
			return err
		}
		rq, err := v.json(req)
		if err != nil {
			return err
		}
		r, err := v.filter(goja.Undefined(), f, this, ds, rq)
		if err != nil {
			return v.exception(err)
		}
		return v.rt.ExportTo(r, &out)
	})
	return out, err
}

// Show runs a show function on doc (nil: null, no such doc) and req.
func (p *Pool) Show(ctx context.Context, src string, doc, req []byte) (*Response, error) {
	return p.oneOff().Show(ctx, src, doc, req)
}

// Show is Pool.Show in this sandbox.
func (d *DDoc) Show(ctx context.Context, src string, doc, req []byte) (*Response, error) {
	c, err := d.p.program(src)
	if err != nil {
		return nil, err
	}
	var resp *Response
	err = d.p.with(ctx, d, func(v *vm) error {
		f, this, err := v.bind(c, d)
		if err != nil {
			return err
		}
		args, err := v.jsonArgs(doc, req)
		if err != nil {
			return err
		}
		r, err := v.show(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
		if err != nil {
			return v.exception(err)
		}
		resp, err = parseResponse([]byte(r.String()))
		return err
	})
	return resp, err
}

// Update runs an update function on doc (nil: null) and req; it answers
// the doc to save (nil: none) and the response.
func (p *Pool) Update(ctx context.Context, src string, doc, req []byte) (newDoc []byte, resp *Response, err error) {
	return p.oneOff().Update(ctx, src, doc, req)
}

// Update is Pool.Update in this sandbox.
func (d *DDoc) Update(ctx context.Context, src string, doc, req []byte) (newDoc []byte, resp *Response, err error) {
	c, err := d.p.program(src)
	if err != nil {
		return nil, nil, err
	}
	err = d.p.with(ctx, d, func(v *vm) error {
		f, this, err := v.bind(c, d)
		if err != nil {
			return err
		}
		args, err := v.jsonArgs(doc, req)
		if err != nil {
			return err
		}
		r, err := v.update(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
		if err != nil {
			return v.exception(err)
		}
		var pair [2]*string
		if err := v.rt.ExportTo(r, &pair); err != nil {
			return fmt.Errorf("couchjs: update answer: %w", err)
		}
		if pair[0] != nil && strings.HasPrefix(*pair[0], "{") {
			// only an object is a doc to save (CouchDB ignores the rest)
			newDoc = []byte(*pair[0])
		}
		if pair[1] == nil {
			return &Error{Code: "render_error", Reason: "undefined response from update function"}
		}
		resp, err = parseResponse([]byte(*pair[1]))
		if err == nil && newDoc != nil && !hasCode([]byte(*pair[1])) {
			// CouchDB's answer for an update that saves a doc.
			resp.Code = 201
		}
		return err
	})
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
// response's code and headers before the first chunk.
func (d *DDoc) ListStream(ctx context.Context, src string, head, req []byte, rows func() ([]byte, bool), start func(*Response) error, send func(chunk string) error) error {
	c, err := d.p.program(src)
	if err != nil {
		return err
	}
	return d.p.with(ctx, d, func(v *vm) error {
		f, this, err := v.bind(c, d)
		if err != nil {
			return err
		}
		args, err := v.jsonArgs(head, req)
		if err != nil {
			return err
		}
		var sendErr error
		v.nextRow = rows
		v.chunks = func(label string, chunks []string, st goja.Value) error {
			if label == "start" {
				r := &Response{Code: 200, Headers: map[string]string{}}
				if st != nil && !goja.IsUndefined(st) && !goja.IsNull(st) {
					b, err := v.stringify(goja.Undefined(), st)
					if err == nil {
						if r, err = parseResponse([]byte(b.String())); err != nil {
							sendErr = err
							return err
						}
						r.Body = nil
					}
				}
				if !hasHeader(r.Headers, "Content-Type") {
					r.Headers["Content-Type"] = "application/json"
				}
				if err := start(r); err != nil {
					sendErr = err
					return err
				}
			}
			for _, ch := range chunks {
				if err := send(ch); err != nil {
					sendErr = err
					return err
				}
			}
			return nil
		}
		defer func() { v.nextRow, v.chunks = nil, nil }()
		_, err = v.list(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
		if sendErr != nil {
			return sendErr
		}
		if err != nil {
			return v.exception(err)
		}
		return nil
	})
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
