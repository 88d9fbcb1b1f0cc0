package couchjs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The protocol between a Pool and its worker processes: frames over the
// worker's stdin (parent to worker) and stdout (worker to parent). A
// frame is a 4-byte little-endian length, a type byte and a body; a body
// is uvarints and length-prefixed byte strings in a fixed order per type.
// Doc JSON passes through as bytes: the parent copies it into the frame,
// the worker reads it in place (lazydoc.go), nothing is decoded and
// encoded again. One call at a time per worker: the parent sends a call,
// the worker answers with log, beat, chunk and row-request frames and
// ends with one result; the parent answers a row request with a row.
const (
	// parent to worker
	fCall      byte = 1 // a call: request
	fRow       byte = 2 // the answer to fGetRow: rowEnd, rowOK or rowAbort, then the row
	fInterrupt byte = 3 // stop call seq (its caller gave up)

	// worker to parent
	fHello  byte = 10 // the worker is ready: its protocol version
	fResult byte = 11 // the call's answer: result
	fLog    byte = 12 // a log() line
	fBeat   byte = 13 // a batch call is making progress (restarts the parent's deadline)
	fChunks byte = 14 // a list's chunks: label, chunks, start response or none
	fGetRow byte = 15 // a list wants its next row
)

// protoVersion 2: a reduce call carries groups (runReduce).
const protoVersion = 2

// row answers (fRow)
const (
	rowEnd   = 0
	rowOK    = 1
	rowAbort = 2 // the parent's writer failed: stop the list
)

// call kinds
const (
	kCompile byte = 1 + iota
	kMapSet       // make a MapSet's functions in the sandbox (NewMapSet)
	kMap
	kReduce // groups: values and keys of group g as JSON arrays in a[g] and b[g]
	kValidate
	kFilter
	kShow
	kUpdate
	kList
)

// result statuses
const (
	rOK      = 0
	rError   = 1 // a *Error: code, reason
	rFail    = 2 // another error: its text
	rMissing = 3 // the worker holds no runtime of the sandbox with its doc: send the doc
	rCut     = 4 // interrupted by fInterrupt
)

// maxRequestFrame bounds what a worker accepts; the parent never sends
// more than its callers give it (a view batch is about 1 MB).
const maxRequestFrame = 1 << 30

// request is one call.
type request struct {
	seq   uint64
	kind  byte
	key   string // sandbox key
	once  bool   // a runtime of its own, dropped after
	bound bool   // the key determines ddoc (DDoc)
	ddoc  []byte // nil when the worker holds the sandbox's runtime
	evict []string
	srcs  []string // the function sources (a map set's, or one)
	set   uint64   // map set id
	lib   []byte   // a map set's {"views":{"lib":...}}
	a, b  [][]byte // arguments: docs, values and keys, ...
	flag  bool     // rereduce
}

// result is a call's answer.
type result struct {
	status  byte
	dropped bool // the sandbox's runtime is gone from the worker
	code    string
	reason  string
	out     [][]byte
}

// enc builds a frame; the first 5 bytes are the header, set by frame.
type enc struct{ b []byte }

func newEnc(buf []byte, typ byte) enc {
	return enc{b: append(buf[:0], 0, 0, 0, 0, typ)}
}

func (e *enc) u(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *enc) bytes(p []byte) { e.u(uint64(len(p))); e.b = append(e.b, p...) }
func (e *enc) str(s string)   { e.u(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) list(ps [][]byte) {
	e.u(uint64(len(ps)))
	for _, p := range ps {
		e.bytes(p)
	}
}
func (e *enc) strs(ss []string) {
	e.u(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// frame sets the length and returns the frame's bytes.
func (e *enc) frame() []byte {
	binary.LittleEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

var errShort = errors.New("couchjs: short frame")

// dec reads a frame body; the first error sticks and later reads answer
// zero values.
type dec struct {
	b   []byte
	err error
}

func (d *dec) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) bool() bool { return d.u() != 0 }

// bytes answers a slice of the body, not a copy.
func (d *dec) bytes() []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) str() string { return string(d.bytes()) }

func (d *dec) list() [][]byte {
	n := d.u()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = d.bytes()
	}
	return ps
}

func (d *dec) strs() []string {
	n := d.u()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// encode builds the call's frame. With shm (the worker's shared region)
// a batch of docs that fits goes there, and the frame carries where.
func (r *request) encode(buf, shm []byte) []byte {
	e := newEnc(buf, fCall)
	e.u(r.seq)
	e.b = append(e.b, r.kind)
	e.str(r.key)
	e.bool(r.once)
	e.bool(r.bound)
	e.bool(r.ddoc != nil)
	e.bytes(r.ddoc)
	e.strs(r.evict)
	e.strs(r.srcs)
	e.u(r.set)
	e.bytes(r.lib)
	n := 0
	for _, p := range r.a {
		n += len(p)
	}
	if shm != nil && r.kind == kMap && n <= len(shm) {
		e.bool(true)
		e.u(uint64(len(r.a)))
		off := 0
		for _, p := range r.a {
			copy(shm[off:], p)
			e.u(uint64(off))
			e.u(uint64(len(p)))
			off += len(p)
		}
	} else {
		e.bool(false)
		e.list(r.a)
	}
	e.list(r.b)
	e.bool(r.flag)
	return e.frame()
}

func decodeRequest(body, shm []byte) (*request, error) {
	d := dec{b: body}
	r := &request{seq: d.u()}
	if len(d.b) == 0 {
		return nil, errShort
	}
	r.kind, d.b = d.b[0], d.b[1:]
	r.key = d.str()
	r.once = d.bool()
	r.bound = d.bool()
	hasDDoc := d.bool()
	r.ddoc = d.bytes()
	if !hasDDoc {
		r.ddoc = nil
	} else if r.ddoc == nil {
		r.ddoc = []byte{}
	}
	r.evict = d.strs()
	r.srcs = d.strs()
	r.set = d.u()
	r.lib = d.bytes()
	if d.bool() {
		n := d.u()
		if d.err != nil || n > uint64(len(d.b)) {
			return nil, errShort
		}
		r.a = make([][]byte, n)
		for i := range r.a {
			off, l := d.u(), d.u()
			if d.err != nil || off > uint64(len(shm)) || l > uint64(len(shm))-off {
				return nil, errShort
			}
			r.a[i] = shm[off : off+l : off+l]
		}
	} else {
		r.a = d.list()
	}
	r.b = d.list()
	r.flag = d.bool()
	return r, d.err
}

func (r *result) encode(buf []byte) []byte {
	e := newEnc(buf, fResult)
	e.b = append(e.b, r.status)
	e.bool(r.dropped)
	e.str(r.code)
	e.str(r.reason)
	e.list(r.out)
	return e.frame()
}

func decodeResult(body []byte) (*result, error) {
	d := dec{b: body}
	if len(d.b) == 0 {
		return nil, errShort
	}
	r := &result{status: d.b[0]}
	d.b = d.b[1:]
	r.dropped = d.bool()
	r.code = d.str()
	r.reason = d.str()
	r.out = d.list()
	return r, d.err
}

// readFrame reads one frame; a frame longer than max is an error (the
// caller treats the peer as broken).
func readFrame(r *bufio.Reader, max int) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:4]))
	if n < 1 || n-1 > max {
		return 0, nil, &frameSizeError{n - 1, max}
	}
	body := make([]byte, n-1)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[4], body, nil
}

type frameSizeError struct{ n, max int }

func (e *frameSizeError) Error() string {
	return fmt.Sprintf("couchjs: frame of %d bytes, over the bound of %d", e.n, e.max)
}
