package httpgw

import (
	"compress/gzip"
	"errors"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"
)

// Request bodies are read as they arrive, never into a buffer sized by the
// Content-Length a client announces: eight connections announcing 4 GiB
// and sending one byte once held 8 GB of this node's memory. Every byte a
// handler reads (after gzip inflation, so a zip bomb is counted as what it
// inflates to) is charged to the node's body budget until its request
// ends; past the budget a request is answered 503 and the node keeps its
// memory for the requests it is serving. A read that waits longer than the
// I/O timeout for the client's next byte ends the connection (a client
// that stops sending holds a goroutine and its buffer for that long, no
// longer). docs/security.md, "What limits protect the node".

// Endpoints that take small bodies read no more than these, whatever
// chttpd/max_http_request_size allows: their bodies are a login, a config
// value, a security object, an index definition.
const (
	// smallBody: _session, _config values, _cluster_setup, _nodes docs
	smallBody = 64 << 10
	// mediumBody: _security, _index, _replicate, _purge-sized requests
	mediumBody = 1 << 20
)

var errBodyBudget = newErr(503, "service_unavailable",
	"the node holds as many request bodies as its memory allows (settee/max_request_memory_mb); try again")

// bodyMeter counts the body bytes held by the requests in flight.
type bodyMeter struct{ held atomic.Int64 }

// body is a request's body as its handler reads it: at most limit bytes
// (of the inflated stream when it is gzipped), each byte charged to the
// node's budget, each read bounded by the I/O timeout.
type body struct {
	rq   *req
	src  io.Reader
	left int64 // bytes the limit still allows
	err  error // sticky: the limit, the budget or the client's failure
	// byCap: readAll charges its buffer's capacity, Read charges nothing
	byCap bool
	// gz: src inflates a gzipped body, whose reads of the connection
	// (sentBytes) set the deadline themselves
	gz bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.left < 0 {
		b.err = errTooLarge
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	if !b.gz {
		b.rq.readDeadline(time.Now().Add(b.rq.g.ioTimeout()))
	}
	n, err := b.src.Read(p)
	b.left -= int64(n)
	if n > 0 && !b.byCap {
		if err := b.rq.charge(int64(n)); err != nil {
			b.err = err
			return 0, err
		}
	}
	if b.left < 0 {
		b.err = errTooLarge
		return n, b.err
	}
	switch {
	case err == io.EOF:
		// net/http reads the connection in the background once the body is
		// done, to notice a client that goes: that read must not inherit
		// the body's deadline (a feed would be cancelled a minute in)
		b.rq.bodyDone = true
		b.rq.readDeadline(time.Time{})
	case err != nil:
		// the deadline stays: net/http's discard of the rest is bounded too
		err = bodyErr(err)
		b.err = err
	}
	return n, err
}

var errBodyRead = badRequest("could not read request body")

// bodyErr is what a failed read answers: the limit, the budget, a gzip
// stream that is not one, or a client that stopped sending.
func bodyErr(err error) error {
	var ce *couchError
	if errors.As(err, &ce) {
		return err
	}
	return errBodyRead
}

// charge counts n more body bytes held by rq: a 413 when this body alone
// passes the node's budget, a 503 when the bodies in flight do (the bytes
// are counted anyway, and given back with the rest when the request ends).
func (rq *req) charge(n int64) error {
	rq.held += n
	used := rq.g.bodies.held.Add(n)
	budget := rq.g.bodyBudget()
	switch {
	case rq.held > budget:
		// this body alone is more than the node holds: it can never be
		// taken, waiting or not
		return errTooLarge
	case used > budget:
		return errBodyBudget
	}
	return nil
}

// release gives back what rq's body held; the handler has ended. A body
// it did not read to its end is what net/http reads next (up to 256 KB,
// to reuse the connection): that read waits io_timeout at most, so a
// client refused before its body was read cannot hold the connection by
// never sending it.
func (rq *req) release() {
	if rq.held != 0 {
		rq.g.bodies.held.Add(-rq.held)
		rq.held = 0
	}
	if !rq.bodyDone && rq.r.Body != nil && rq.r.Body != http.NoBody {
		rq.readDeadline(time.Now().Add(rq.g.ioTimeout()))
	}
}

// readDeadline sets the connection's read deadline (zero: none); a writer
// that cannot (a test's recorder) has none.
func (rq *req) readDeadline(t time.Time) {
	if rq.rc == nil {
		rq.rc = http.NewResponseController(rq.w)
	}
	_ = rq.rc.SetReadDeadline(t)
}

// bodyBudget is settee/max_request_memory_mb in bytes.
func (g *Gateway) bodyBudget() int64 {
	if g.cfg.Settings != nil {
		if n := g.cfg.Settings.MaxRequestMemory(); n > 0 {
			return n
		}
	}
	return defaultBodyBudget
}

// defaultBodyBudget is the budget of a gateway built without settings.
const defaultBodyBudget = 256 << 20

// ioTimeout is settee/io_timeout: the longest a body read or an answer's
// write waits for the client.
func (g *Gateway) ioTimeout() time.Duration {
	if g.cfg.Settings != nil {
		if d := g.cfg.Settings.IOTimeout(); d > 0 {
			return d
		}
	}
	return defaultIOTimeout
}

const defaultIOTimeout = 60 * time.Second

// requestLimit is chttpd/max_http_request_size as it is now.
func (g *Gateway) requestLimit() int64 {
	if g.cfg.Settings != nil {
		if n := g.cfg.Settings.MaxRequestSize(); n > 0 {
			return n
		}
	}
	if g.cfg.MaxRequestSize > 0 {
		return g.cfg.MaxRequestSize
	}
	return math.MaxInt64
}

// rawBody is rq's body as sent (not inflated), at most limit bytes.
func rawBody(rq *req, limit int64) (io.Reader, error) {
	limit = min(limit, rq.g.requestLimit())
	if rq.r.ContentLength > limit {
		return nil, errTooLarge
	}
	return &body{rq: rq, src: rq.r.Body, left: limit}, nil
}

// bodyReader is the request body as a handler reads it: at most limit
// bytes, of the decompressed body when it is gzipped, so that a small body
// that inflates past the limit (a zip bomb) is a 413 after limit bytes,
// never more memory than a plain body of the limit's size.
func bodyReader(rq *req, limit int64) (*body, error) {
	gz, err := gzipped(rq)
	if err != nil {
		return nil, err
	}
	limit = min(limit, rq.g.requestLimit())
	if rq.r.ContentLength > limit {
		return nil, errTooLarge
	}
	if !gz {
		return &body{rq: rq, src: rq.r.Body, left: limit}, nil
	}
	// the compressed bytes are bounded by the limit too; the inflated ones
	// are what is charged
	zr, err := gzip.NewReader(&sentBytes{rq: rq, r: rq.r.Body, left: limit})
	if err != nil {
		return nil, gzipErr(err)
	}
	return &body{rq: rq, src: gzipStream{zr}, left: limit, gz: true}, nil
}

// sentBytes bounds the compressed bytes of a gzipped body.
type sentBytes struct {
	rq   *req
	r    io.Reader
	left int64
}

func (s *sentBytes) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	s.rq.readDeadline(time.Now().Add(s.rq.g.ioTimeout()))
	n, err := s.r.Read(p)
	s.left -= int64(n)
	return n, err
}

// gzipStream maps a gzip reader's failures to CouchDB's answers.
type gzipStream struct{ zr *gzip.Reader }

func (g gzipStream) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = gzipErr(err)
	}
	return n, err
}

// firstChunk is the buffer a body of unknown or large length starts in;
// it doubles as bytes arrive, so memory follows what was sent, not what
// was announced.
const firstChunk = 64 << 10

// readAll reads the body into a buffer that grows with what arrives, to
// at most twice the bytes read, whatever the client announced. The buffer's capacity is what is charged to the node's
// budget, before it is allocated: the largest allocation a body can cause
// is within the budget.
func (b *body) readAll() ([]byte, error) {
	b.byCap = true
	// the announced length bounds the last growth (a gzipped body's says
	// nothing of what it inflates to)
	hint := b.rq.r.ContentLength
	if b.gz {
		hint = -1
	}
	c := int64(firstChunk)
	if hint > 0 && hint < c {
		c = hint + 1 // +1: the EOF read needs no growth
	}
	if err := b.rq.charge(c); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, c)
	for {
		if len(buf) == cap(buf) {
			n := int64(cap(buf)) * 2
			if hint > 0 && n > hint+1 && int64(len(buf)) <= hint {
				n = hint + 1
			}
			if n > b.left+1+int64(len(buf)) {
				n = b.left + 1 + int64(len(buf)) // one past the limit tells it
			}
			if err := b.rq.charge(n - int64(cap(buf))); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := b.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
