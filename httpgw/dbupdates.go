package httpgw

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/settee/settee/docjson"
	"github.com/settee/settee/node"
)

// DBUpdates is the node's /_db_updates feed (node/dbupdates.go).
type DBUpdates interface {
	ParseDBUpdatesSince(since string) (string, error)
	DBUpdates(ctx context.Context, q node.DBUpdatesQuery, fn func(node.DBUpdate) error) (string, error)
	WaitDBUpdates(ctx context.Context, since string, d time.Duration) bool
}

type dbUpdatesReq struct {
	feed       string
	q          node.DBUpdatesQuery
	heartbeat  time.Duration
	timeout    time.Duration
	descending bool
}

// errInvalidInteger is CouchDB's answer to a limit, timeout or heartbeat
// that is not a non-negative integer (global_changes_httpd).
var errInvalidInteger = badRequest("invalid_integer")

func nonNegInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errInvalidInteger
	}
	return n, nil
}

// parseDBUpdates reads the query as CouchDB 3.5.2's
// global_changes_httpd: every value of a known key, in order (the last
// wins); unknown keys ignored; descending only when "true"; heartbeat
// "true" is 60 s and "false" none.
func parseDBUpdates(rq *req) (*dbUpdatesReq, error) {
	c := &dbUpdatesReq{feed: "normal", q: node.DBUpdatesQuery{Limit: -1}, timeout: DefaultChangesTimeout}
	for _, kv := range splitQuery(rq.r.URL.RawQuery) {
		k, v := kv[0], kv[1]
		switch k {
		case "feed":
			c.feed = v
		case "descending":
			if v == "true" {
				c.descending = true
			}
		case "since":
			c.q.Since = v
		case "limit":
			n, err := nonNegInt(v)
			if err != nil {
				return nil, err
			}
			c.q.Limit = n
		case "heartbeat":
			switch v {
			case "true":
				c.heartbeat = 60 * time.Second
			case "false":
			default:
				n, err := nonNegInt(v)
				if err != nil {
					return nil, err
				}
				c.heartbeat = time.Duration(max(n, 10)) * time.Millisecond
			}
		case "timeout":
			n, err := nonNegInt(v)
			if err != nil {
				return nil, err
			}
			c.timeout = time.Duration(n) * time.Millisecond
		}
	}
	c.q.Descending = c.descending
	switch c.feed {
	case "normal", "longpoll", "continuous", "eventsource":
	default:
		return nil, badRequest("Supported `feed` types: normal, continuous, longpoll, eventsource")
	}
	return c, nil
}

// splitQuery splits a raw query into its pairs, in order, unescaped.
func splitQuery(raw string) [][2]string {
	var out [][2]string
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

// handleDBUpdates serves /_db_updates in CouchDB's four feed styles
// (global_changes_httpd): server admins only; rows
// {"db_name","type","seq"} (eventsource shows _global_changes' own change
// rows, {"seq","id":"<type>:<db>","changes":[{"rev"}]}, as CouchDB does).
func (g *Gateway) handleDBUpdates(rq *req) error {
	if err := requireAdmin(rq); err != nil {
		return err
	}
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET")
	}
	if g.cfg.DBUpdates == nil {
		return errDBNotFound
	}
	c, err := parseDBUpdates(rq)
	if err != nil {
		return err
	}
	since, err := g.cfg.DBUpdates.ParseDBUpdatesSince(c.q.Since)
	if err != nil {
		return err
	}
	c.q.Since = since
	h := rq.w.Header()
	feedHeaders(h, c.feed)
	if c.feed == "normal" {
		now, _ := g.cfg.DBUpdates.ParseDBUpdatesSince("now")
		h.Set("Etag", etagOf([]byte(rq.r.URL.RawQuery+"\x00"+now)))
	}
	rq.w.WriteHeader(200)
	w := newRowWriter(rq)
	up := g.cfg.DBUpdates
	switch c.feed {
	case "normal", "longpoll":
		w.raw("{\"results\":[\n")
		if c.feed == "longpoll" {
			w.flush()
		}
		n := 0
		row := func(u node.DBUpdate) error {
			if n > 0 {
				w.raw(",\r\n")
			}
			n++
			w.line(appendDBUpdate(nil, u))
			return w.err
		}
		last, err := up.DBUpdates(rq.ctx, c.q, row)
		if c.feed == "longpoll" && !c.descending && c.q.Limit != 0 {
			deadline := dbUpdatesDeadline(c)
			for err == nil && n == 0 && g.waitDBUpdate(rq, last, c, w, deadline) {
				q := c.q
				q.Since = last
				last, err = up.DBUpdates(rq.ctx, q, row)
			}
		}
		if err != nil {
			g.log.Warn("db updates feed ended early", "err", err)
		}
		w.raw("\n],\n\"last_seq\":")
		w.line(docjson.AppendString(nil, last))
		w.raw("}\n\n") // the second newline ends every feed CouchDB closes
		w.flush()
	default:
		remaining := c.q.Limit
		last := c.q.Since
		for {
			q := c.q
			q.Since, q.Limit = last, remaining
			n := 0
			l, err := up.DBUpdates(rq.ctx, q, func(u node.DBUpdate) error {
				n++
				if c.feed == "eventsource" {
					w.raw("data: ")
					w.line(appendDBUpdateChange(nil, u))
					w.raw("\nid: ")
					w.line(docjson.AppendString(nil, u.Seq))
					w.raw("\n\n")
				} else {
					w.line(appendDBUpdate(nil, u))
					w.raw("\n")
				}
				return w.err
			})
			if err != nil {
				g.log.Warn("db updates feed ended early", "err", err)
				break
			}
			last = l
			w.flush()
			if remaining >= 0 {
				remaining -= n
				if remaining <= 0 {
					break
				}
			}
			if c.descending || !g.waitDBUpdate(rq, last, c, w, dbUpdatesDeadline(c)) {
				break
			}
		}
		if c.feed == "continuous" {
			w.raw(`{"last_seq":`)
			w.line(docjson.AppendString(nil, last))
			w.raw("}\n")
		}
		// CouchDB ends every feed it closes with a newline of its own
		w.raw("\n")
		w.flush()
	}
	return nil
}

func appendDBUpdate(buf []byte, u node.DBUpdate) []byte {
	buf = append(buf, `{"db_name":`...)
	buf = docjson.AppendString(buf, u.DB)
	buf = append(buf, `,"type":`...)
	buf = docjson.AppendString(buf, u.Type)
	buf = append(buf, `,"seq":`...)
	buf = docjson.AppendString(buf, u.Seq)
	return append(buf, '}')
}

// appendDBUpdateChange is the row of _global_changes' _changes that
// CouchDB's eventsource feed shows unconverted.
func appendDBUpdateChange(buf []byte, u node.DBUpdate) []byte {
	buf = append(buf, `{"seq":`...)
	buf = docjson.AppendString(buf, u.Seq)
	buf = append(buf, `,"id":`...)
	buf = docjson.AppendString(buf, u.Type+":"+u.DB)
	buf = append(buf, `,"changes":[{"rev":`...)
	buf = docjson.AppendString(buf, u.Rev)
	return append(buf, "}]}"...)
}

// dbUpdatesDeadline: a feed with heartbeats runs until the client goes
// (CouchDB ignores timeout then), else it ends after timeout idle.
func dbUpdatesDeadline(c *dbUpdatesReq) time.Time {
	if c.heartbeat > 0 {
		return time.Now().Add(24 * time.Hour * 365)
	}
	return time.Now().Add(c.timeout)
}

// waitDBUpdate waits until deadline for an event after since, sending
// heartbeats ("\n"; eventsource: an event of its own); false means the
// feed ends.
func (g *Gateway) waitDBUpdate(rq *req, since string, c *dbUpdatesReq, w *rowWriter, deadline time.Time) bool {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		step := left
		if c.heartbeat > 0 && c.heartbeat < step {
			step = c.heartbeat
		}
		if g.cfg.DBUpdates.WaitDBUpdates(rq.ctx, since, step) {
			return true
		}
		if rq.ctx.Err() != nil {
			return false
		}
		if c.heartbeat > 0 {
			if c.feed == "eventsource" {
				w.raw("event: heartbeat\ndata: \n\n")
			} else {
				w.raw("\n")
			}
			w.flush()
			if w.err != nil {
				return false
			}
		}
	}
}
