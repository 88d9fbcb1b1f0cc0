// Package onewrite lets an HTTP/1 handler send a response whose bytes it
// has in hand in one write to the socket.
//
// net/http puts a response's header and the start of its body into the
// connection's 4 KB buffer and writes that, then writes the rest of the
// body: a doc of 15 KB leaves in two writes, and a client on loopback is
// woken for each (each wakeup costs both ends a trip through the
// scheduler). A handler that holds its connection (Hold), writes the
// whole response, flushes it and sends (the returned func) puts it on
// the wire with one write: on this project's machine a bare net/http
// server answering the same 14.5 KB to one client went from 5,400–6,300
// to 5,700–7,500 answers/s that way (docs/benchmarks.md, issue 20).
//
// Listen wraps the server's listener so that its connections can hold
// writes; ConnContext, the server's ConnContext, makes a request's
// connection known to Hold. Anything else (TLS, whose records are made
// above the socket; a handler called in-process) gets no hold and writes
// as before.
package onewrite

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
)

// Listen wraps ln so that the connections it accepts can hold writes.
func Listen(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c}, nil
}

type connKey struct{}

// ConnContext is an http.Server's ConnContext: it puts the connection of
// Listen's in the context of every request that comes on it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if oc, ok := c.(*conn); ok {
		return context.WithValue(ctx, connKey{}, oc)
	}
	return ctx
}

// MaxHold is the most Hold keeps in memory for one response: a bigger one
// is sent as it is written (its writes are large enough to amortize the
// wakeups, and a held copy of it would cost more than they do).
const MaxHold = 256 << 10

// Hold makes the writes on r's connection wait in memory until the
// returned send is called, which writes them all in one go. The handler
// must flush the response (http.Flusher) before send for the response
// to be in it, and must call send before it returns (a deferred send is
// safe: bytes are never reordered, and what comes after send is written
// as usual). size is what the handler means to write; nil when r's
// connection cannot hold or size is over MaxHold.
func Hold(r *http.Request, size int) (send func() error) {
	c, _ := r.Context().Value(connKey{}).(*conn)
	if c == nil || size > MaxHold {
		return nil
	}
	c.hold(size)
	return c.send
}

// bufs reuses the held bytes' buffers between responses and connections:
// a connection keeps none while idle.
var bufs = sync.Pool{New: func() any { return new([]byte) }}

// conn is a connection from Listen. Its writes come from the goroutine
// serving it (net/http's HTTP/1 server writes nowhere else), the mutex
// only guards against a misuse turning into a data race.
type conn struct {
	net.Conn
	mu   sync.Mutex
	held *[]byte // nil: writes go straight through
}

func (c *conn) hold(size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		return
	}
	b := bufs.Get().(*[]byte)
	if cap(*b) < size+1024 {
		// the header comes before the body: room for it too
		*b = make([]byte, 0, size+1024)
	}
	c.held = b
}

// send writes what was held, in one write, and stops holding.
func (c *conn) send() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.held
	if b == nil {
		return nil
	}
	c.held = nil
	var err error
	if len(*b) > 0 {
		_, err = c.Conn.Write(*b)
	}
	*b = (*b)[:0]
	bufs.Put(b)
	return err
}

func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.held != nil && len(*c.held)+len(p) <= MaxHold+64<<10 {
		*c.held = append(*c.held, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()
	if err := c.send(); err != nil {
		// what was held never left: nothing after it may
		return 0, err
	}
	return c.Conn.Write(p)
}

// ReadFrom keeps net/http's copy of a response from a reader going to the
// socket's own (sendfile, splice) when nothing is held.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	c.mu.Lock()
	held := c.held != nil
	c.mu.Unlock()
	if rf, ok := c.Conn.(io.ReaderFrom); ok && !held {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c}, r)
}

// CloseWrite lets net/http half-close the connection before it closes it,
// as it does a TCP connection's (the client then reads the whole answer
// before it sees the reset).
func (c *conn) CloseWrite() error {
	if err := c.send(); err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close drops what is held: a handler sends before it returns, so bytes
// still held belong to an answer cut short by the server's shutdown.
func (c *conn) Close() error {
	c.mu.Lock()
	if b := c.held; b != nil {
		c.held = nil
		*b = (*b)[:0]
		bufs.Put(b)
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
