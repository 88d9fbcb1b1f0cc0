package couchjs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dop251/goja"
)

// The calls as a worker runs them, on a runtime of the call's sandbox.

// exec runs req on v and fills res.out.
func (e *engine) exec(v *vm, req *request, res *result) error {
	switch req.kind {
	case kCompile:
		c, err := e.program(req.srcs[0])
		if err != nil {
			return err
		}
		_, _, err = v.bind(c, req)
		return err
	case kMapSet:
		_, err := v.mapState(req)
		return err
	case kMap:
		return v.mapDocs(req, res)
	case kReduce:
		return v.runReduce(req, res)
	case kValidate:
		return v.runValidate(req)
	case kFilter:
		return v.runFilter(req, res)
	case kShow:
		return v.runShow(req, res)
	case kUpdate:
		return v.runUpdate(req, res)
	case kList:
		return v.runList(req)
	}
	return fmt.Errorf("couchjs: unknown call kind %d", req.kind)
}

func (v *vm) src(req *request) (*compiled, error) {
	if len(req.srcs) != 1 {
		return nil, fmt.Errorf("couchjs: %d sources for one function", len(req.srcs))
	}
	return v.e.program(req.srcs[0])
}

// bind returns the user's function of c and the design doc object it
// runs with (an empty object in a sandbox without a doc). A runtime of a
// DDoc sandbox parses the doc and makes its require once; the parent
// sends the doc only to a worker it does not know to hold the runtime.
func (v *vm) bind(c *compiled, req *request) (goja.Value, goja.Value, error) {
	if !req.bound {
		f, err := v.function(c, nil)
		return f, v.rt.NewObject(), err
	}
	if v.ddoc != nil {
		f, err := v.function(c, v.ddocReq)
		return f, v.ddoc, err
	}
	if req.ddoc == nil {
		return nil, nil, errNeedDDoc
	}
	obj, err := v.parse(goja.Undefined(), v.rt.ToValue(string(req.ddoc)))
	if err != nil {
		return nil, nil, v.exception(err)
	}
	// require reads a copy of its own (frozen by makeRequire): code that
	// changes `this` cannot make require evaluate a string of its making
	root, err := v.parse(goja.Undefined(), v.rt.ToValue(string(req.ddoc)))
	if err != nil {
		return nil, nil, v.exception(err)
	}
	reqFn, err := v.makeRequire(goja.Undefined(), root, v.rt.NewObject())
	if err != nil {
		return nil, nil, v.exception(err)
	}
	v.ddoc, v.ddocReq, v.ddocFns = obj, reqFn, map[*goja.Program]goja.Value{}
	f, err := v.function(c, reqFn)
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

// arg is req.a[i], nil when absent.
func arg(req *request, i int) []byte {
	if i < len(req.a) {
		return req.a[i]
	}
	return nil
}

// runReduce reduces (or, with req.flag, rereduces) groups: req.a[g] is
// group g's values as one JSON array, req.b[g] its [key, docid] keys
// (none on rereduce); out[g] is its reduction. Timeout bounds each group,
// as CouchDB's os_process_timeout bounds each reduce command, and the
// answers together stay within MaxOutput: a batch that would pass it
// stops there.
func (v *vm) runReduce(req *request, res *result) error {
	c, err := v.src(req)
	if err != nil {
		return err
	}
	f, err := v.function(c, nil)
	if err != nil {
		return err
	}
	if !req.flag && len(req.b) != len(req.a) {
		return fmt.Errorf("couchjs: %d key lists for %d groups", len(req.b), len(req.a))
	}
	res.out = make([][]byte, len(req.a))
	re := v.rt.ToValue(req.flag)
	size := 0
	for g, vals := range req.a {
		v.e.beat()
		ks := goja.Null()
		if !req.flag {
			if ks, err = v.json(req.b[g]); err != nil {
				return err
			}
		}
		vs, err := v.json(vals)
		if err != nil {
			return err
		}
		r, err := v.reduce(goja.Undefined(), f, ks, vs, re)
		if err != nil {
			return v.exception(err)
		}
		out := couchNumbers([]byte(r.String()))
		if size += len(out) + 10; v.e.cfg.maxOutput > 0 && size > v.e.cfg.maxOutput {
			return errOutput(size, v.e.cfg.maxOutput)
		}
		res.out[g] = out
	}
	return nil
}

// joinJSON is items as one JSON array.
func joinJSON(items [][]byte) []byte {
	return appendJSONArray(make([]byte, 0, jsonArraySize(items)), items)
}

func jsonArraySize(items [][]byte) int {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	return n
}

func appendJSONArray(b []byte, items [][]byte) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// runValidate: args newDoc, oldDoc, userCtx, secObj.
func (v *vm) runValidate(req *request) error {
	c, err := v.src(req)
	if err != nil {
		return err
	}
	f, this, err := v.bind(c, req)
	if err != nil {
		return err
	}
	args, err := v.jsonArgs(arg(req, 0), arg(req, 1), arg(req, 2), arg(req, 3))
	if err != nil {
		return err
	}
	r, err := v.validate(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
	if err != nil {
		return v.exception(err)
	}
	return validateAnswer(v, r)
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

// runFilter: docs in req.a, the request in req.b[0]; out[0] one byte per
// doc.
func (v *vm) runFilter(req *request, res *result) error {
	c, err := v.src(req)
	if err != nil {
		return err
	}
	f, this, err := v.bind(c, req)
	if err != nil {
		return err
	}
	ds, err := v.json(joinJSON(req.a))
	if err != nil {
		return err
	}
	var rqb []byte
	if len(req.b) > 0 {
		rqb = req.b[0]
	}
	rq, err := v.json(rqb)
	if err != nil {
		return err
	}
	r, err := v.filter(goja.Undefined(), f, this, ds, rq)
	if err != nil {
		return v.exception(err)
	}
	var keep []bool
	if err := v.rt.ExportTo(r, &keep); err != nil {
		return err
	}
	out := make([]byte, len(keep))
	for i, k := range keep {
		if k {
			out[i] = 1
		}
	}
	res.out = [][]byte{out}
	return nil
}

// runShow: doc, req; out[0] the response object's JSON.
func (v *vm) runShow(req *request, res *result) error {
	c, err := v.src(req)
	if err != nil {
		return err
	}
	f, this, err := v.bind(c, req)
	if err != nil {
		return err
	}
	args, err := v.jsonArgs(arg(req, 0), arg(req, 1))
	if err != nil {
		return err
	}
	r, err := v.show(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
	if err != nil {
		return v.exception(err)
	}
	res.out = [][]byte{[]byte(r.String())}
	return nil
}

// runUpdate: doc, req; out the doc to save (empty: none) and the
// response object's JSON.
func (v *vm) runUpdate(req *request, res *result) error {
	c, err := v.src(req)
	if err != nil {
		return err
	}
	f, this, err := v.bind(c, req)
	if err != nil {
		return err
	}
	args, err := v.jsonArgs(arg(req, 0), arg(req, 1))
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
	var doc []byte
	if pair[0] != nil && strings.HasPrefix(*pair[0], "{") {
		// only an object is a doc to save (CouchDB ignores the rest)
		doc = []byte(*pair[0])
	}
	if pair[1] == nil {
		return &Error{Code: "render_error", Reason: "undefined response from update function"}
	}
	res.out = [][]byte{doc, []byte(*pair[1])}
	return nil
}

// errListAborted stops a list whose parent could not send its chunks.
var errListAborted = errors.New("couchjs: list output failed")

// runList: head, req; rows come from the parent on request (fGetRow,
// answered by fRow) and chunks go to it (fChunks) as couchjs flushes
// them.
func (v *vm) runList(req *request) error {
	c, err := v.src(req)
	if err != nil {
		return err
	}
	f, this, err := v.bind(c, req)
	if err != nil {
		return err
	}
	args, err := v.jsonArgs(arg(req, 0), arg(req, 1))
	if err != nil {
		return err
	}
	e := v.e
	aborted := false
	v.nextRow = func() ([]byte, bool) {
		if aborted {
			return nil, false
		}
		g := newEnc(e.lbuf, fGetRow)
		e.send(g.frame())
		e.lbuf = g.b[:0]
		typ, body, err := readFrame(e.in, maxRequestFrame)
		if err != nil {
			os.Exit(0) // the parent is gone
		}
		if typ != fRow || len(body) == 0 || body[0] == rowAbort {
			aborted = true
			v.rt.Interrupt(errListAborted)
			return nil, false
		}
		if body[0] == rowEnd {
			return nil, false
		}
		d := dec{b: body[1:]}
		return d.bytes(), true
	}
	v.chunks = func(label string, chunks []string, st goja.Value) error {
		g := newEnc(e.lbuf, fChunks)
		g.str(label)
		g.u(uint64(len(chunks)))
		for _, ch := range chunks {
			g.str(ch)
		}
		if st != nil && !goja.IsUndefined(st) && !goja.IsNull(st) {
			b, err := v.stringify(goja.Undefined(), st)
			if err == nil && !goja.IsUndefined(b) {
				g.bool(true)
				g.str(b.String())
			} else {
				g.bool(false)
			}
		} else {
			g.bool(false)
		}
		e.send(g.frame())
		e.lbuf = g.b[:0]
		return nil
	}
	defer func() { v.nextRow, v.chunks = nil, nil }()
	_, err = v.list(goja.Undefined(), f, this, v.rt.NewArray(anys(args)...))
	if aborted {
		return errListAborted
	}
	if err != nil {
		return v.exception(err)
	}
	return nil
}

// mapDocs runs a map set over req.a; out[d] is doc d's emits, per
// function: uvarint 0 (the function threw) or 1+count, then each key and
// value as length-prefixed JSON.
func (v *vm) mapDocs(req *request, res *result) error {
	st, err := v.mapState(req)
	if err != nil {
		return err
	}
	n := len(req.srcs)
	res.out = make([][]byte, len(req.a))
	var buf []byte
	// the docs are the call's (see lazydoc.go): detached before the
	// answer lets the parent reuse their bytes
	src := &lazySrc{}
	defer func() { src.detached = true }()
	for d, doc := range req.a {
		v.e.beat()
		r, err := v.mapDoc(goja.Undefined(), st.fns, newLazy(v.rt, src, trimJSON(doc)))
		if err != nil {
			return v.exception(err)
		}
		start := len(buf)
		if buf, err = appendEmits(buf, r.(*goja.Object), n); err != nil {
			return err
		}
		res.out[d] = buf[start:len(buf):len(buf)]
	}
	return nil
}

// appendEmits encodes mapDoc's answer: per function null, or an array of
// "[key,value]" JSON strings.
func appendEmits(buf []byte, r *goja.Object, n int) ([]byte, error) {
	for i := range n {
		kvs, ok := r.Get(itoa(i)).(*goja.Object)
		if !ok {
			buf = binary.AppendUvarint(buf, 0)
			continue
		}
		l := int(kvs.Get("length").ToInteger())
		buf = binary.AppendUvarint(buf, uint64(l)+1)
		for j := range l {
			pair := couchNumbers([]byte(kvs.Get(itoa(j)).String()))
			k, val, err := splitPair(pair)
			if err != nil {
				return nil, err
			}
			buf = binary.AppendUvarint(buf, uint64(len(k)))
			buf = append(buf, k...)
			buf = binary.AppendUvarint(buf, uint64(len(val)))
			buf = append(buf, val...)
		}
	}
	return buf, nil
}

// decodeEmits reads appendEmits's encoding of n functions' emits; the
// keys and values are slices of b.
func decodeEmits(b []byte, n int) ([][]Emit, error) {
	d := dec{b: b}
	out := make([][]Emit, n)
	for i := range n {
		c := d.u()
		if c == 0 || d.err != nil {
			continue
		}
		if c-1 > uint64(len(d.b)) {
			return nil, errShort
		}
		emits := make([]Emit, c-1)
		for j := range emits {
			emits[j] = Emit{Key: d.bytes(), Value: d.bytes()}
		}
		out[i] = emits
	}
	if d.err != nil {
		return nil, d.err
	}
	return out, nil
}
