package httpgw

import (
	"net/http"
)

// rowWriter buffers streamed rows and hands them to the connection in
// chunks, so rows go out as they are read without a syscall per row.
type rowWriter struct {
	rq    *req
	buf   []byte
	err   error
	wrote bool // bytes went to the client
}

const flushAt = 32 << 10

func newRowWriter(rq *req) *rowWriter {
	return &rowWriter{rq: rq, buf: make([]byte, 0, flushAt+4096)}
}

func (w *rowWriter) raw(s string) {
	w.buf = append(w.buf, s...)
	if len(w.buf) >= flushAt {
		w.write()
	}
}

func (w *rowWriter) line(b []byte) {
	if len(w.buf)+len(b) > cap(w.buf) {
		// a long row (a _find's doc) is not worth growing the
		// buffer for: what is buffered goes first, then the row, by
		// itself when it would not fit either
		w.write()
		if len(b) > cap(w.buf) {
			w.writeRaw(b)
			return
		}
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) >= flushAt {
		w.write()
	}
}

// writeRaw sends b to the client as it is (nothing for a HEAD).
func (w *rowWriter) writeRaw(b []byte) {
	if w.err == nil && len(b) > 0 && w.rq.r.Method != http.MethodHead {
		_, w.err = w.rq.w.Write(b)
		w.wrote = true
	}
}

func (w *rowWriter) write() {
	w.writeRaw(w.buf)
	w.buf = w.buf[:0]
}

// flush writes what is buffered and pushes it to the client now.
func (w *rowWriter) flush() {
	w.write()
	if f, ok := w.rq.w.(http.Flusher); ok && w.err == nil {
		f.Flush()
	}
}
