package httpgw

import (
	"encoding/json"
	"strings"
)

// viewOut is where a view's answer goes: the whole response, or one
// result of …/queries.
type viewOut interface {
	open(head []byte) error
	row(b []byte) error
}

// viewWriter streams a view's answer: nothing is sent before its head
// (an error before it is an ordinary error answer), then the rows as
// CouchDB writes them, "\r\n" before each.
type viewWriter struct {
	rw     *rowWriter
	rq     *req
	opened bool
	rows   int
}

func (w *viewWriter) openResponse(head []byte) error {
	h := w.rq.w.Header()
	h.Set("Content-Type", "application/json")
	w.rq.w.WriteHeader(200)
	w.opened = true
	w.rw.line(head)
	return w.rw.err
}

func (w *viewWriter) open(head []byte) error { return w.openResponse(head) }

func (w *viewWriter) row(b []byte) error {
	if w.rows > 0 {
		w.rw.raw(",\r\n")
	} else {
		w.rw.raw("\r\n")
	}
	w.rows++
	w.rw.line(b)
	return w.rw.err
}

// finish ends the answer; err before the head is the request's error.
func (w *viewWriter) finish(err error, tail string) error {
	if !w.opened {
		return err
	}
	if err != nil {
		// the status is sent: CouchDB ends such an answer with an error row
		ce := toCouch(err)
		b, _ := json.Marshal(map[string]string{"error": ce.code, "reason": ce.reason})
		w.rw.raw("\r\n")
		w.rw.line(b)
	}
	if w.rows == 0 {
		tail = strings.TrimPrefix(tail, "\r\n")
	}
	w.rw.raw(tail)
	w.rw.flush()
	return nil
}

// subWriter is one result of …/_view/v/queries.
type subWriter struct {
	w     *viewWriter
	first bool
	rows  int
}

func (s *subWriter) open(head []byte) error {
	if !s.first {
		s.w.rw.raw(",")
	}
	s.w.rw.raw("\r\n")
	s.w.rw.line(head)
	return s.w.rw.err
}

func (s *subWriter) row(b []byte) error {
	if s.rows > 0 {
		s.w.rw.raw(",")
	}
	s.w.rw.raw("\r\n")
	s.rows++
	s.w.rw.line(b)
	return s.w.rw.err
}
