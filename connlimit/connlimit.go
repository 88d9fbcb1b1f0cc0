// Package connlimit caps the connections a server holds open: past the
// cap, a new connection is answered at once and closed, so a flood of
// connections costs the node a file descriptor and a write each, never a
// goroutine, buffers and a request parse per connection, and the clients
// already connected keep being served (a listener that stops accepting
// instead would leave new clients, the flood's and everyone else's alike,
// waiting in the kernel's queue with no answer).
package connlimit

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter counts the connections of the listeners it wraps, one count for
// all of them (a node's HTTP and HTTPS listeners share its file
// descriptors and memory).
type Limiter struct {
	// Max is the cap as it is now (read at each accept; <= 0: none).
	Max func() int

	open    atomic.Int64
	refused atomic.Int64
}

// Open is the number of connections open now.
func (l *Limiter) Open() int64 { return l.open.Load() }

// Refused is the number of connections refused past the cap so far.
func (l *Limiter) Refused() int64 { return l.refused.Load() }

// Listen wraps ln: its connections count against l, and one accepted past
// the cap gets busy (if any) and is closed, Accept going on to the next.
func (l *Limiter) Listen(ln net.Listener, busy []byte) net.Listener {
	return &listener{Listener: ln, l: l, busy: busy}
}

// BusyHTTP is an HTTP/1.1 503 answer in CouchDB's shape, for a plain
// HTTP listener's refused connections.
func BusyHTTP(reason string) []byte {
	body := `{"error":"service_unavailable","reason":"` + reason + `"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: application/json\r\n" +
		"Cache-Control: must-revalidate\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

type listener struct {
	net.Listener
	l    *Limiter
	busy []byte
}

// refuseWrite bounds the write of the busy answer: a client that does not
// read cannot hold the accept loop.
const refuseWrite = 100 * time.Millisecond

func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		n := ln.l.open.Add(1)
		if max := ln.l.max(); max <= 0 || n <= int64(max) {
			return &conn{Conn: c, l: ln.l}, nil
		}
		ln.l.open.Add(-1)
		ln.l.refused.Add(1)
		if ln.busy != nil {
			_ = c.SetWriteDeadline(time.Now().Add(refuseWrite))
			_, _ = c.Write(ln.busy)
		}
		_ = c.Close()
	}
}

func (l *Limiter) max() int {
	if l.Max == nil {
		return 0
	}
	return l.Max()
}

// conn gives its count back once, at its first Close.
type conn struct {
	net.Conn
	l    *Limiter
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
