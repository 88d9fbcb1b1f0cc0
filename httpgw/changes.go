package httpgw

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/mango"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// DefaultChangesTimeout ends an idle longpoll or continuous feed (CouchDB's
// changes_timeout).
const DefaultChangesTimeout = 60 * time.Second

type changesReq struct {
	// rule is the reader's (package policy; nil for most): what it may
	// see of a doc it includes
	rule        *policy.ReadRule
	feed        string
	since       string
	limit       int
	descending  bool
	includeDocs bool
	conflicts   bool
	allDocs     bool
	heartbeat   time.Duration
	timeout     time.Duration
	docIDs      map[string]bool
	// design: filter=_design, only design docs.
	design bool
	// selector: filter=_selector.
	selector *mango.Selector
	// jsFilter is filter=ddoc/name's source; viewFilter filter=_view's
	// map function (the design doc is read when the feed starts)
	jsFilter, viewFilter []string // ddoc id, name
	// body is the POST body a filter was read from (it picks the rows as
	// much as the query does, so it goes into the ETag).
	body        []byte
	seqInterval int
	// seqBase is where fabric's row countdown starts (the limit given,
	// else its default, 10^15); sent counts the rows of earlier passes
	seqBase int64
	sent    int
	doc     couchdoc.Options
}

func (g *Gateway) parseChanges(rq *req) (*changesReq, error) {
	c := &changesReq{feed: "normal", limit: -1, timeout: DefaultChangesTimeout, seqBase: 1e15}
	var err error
	if rq.r.Method == http.MethodPost {
		// a POST's body, when it has one, is a JSON object whatever the
		// filter, read before the query is (chttpd_db:handle_changes_req)
		if err := requireJSON(rq); err != nil {
			return nil, err
		}
		if c.body, err = readBody(rq, g.cfg.MaxRequestSize); err != nil {
			return nil, err
		}
		if len(c.body) > 0 {
			if err := decodeObject(c.body, &map[string]json.RawMessage{}); err != nil {
				return nil, err
			}
		}
	}
	if f := rq.q.Get("feed"); f != "" {
		switch f {
		case "normal", "longpoll", "continuous", "eventsource", "live":
			c.feed = f
		default:
			return nil, badRequest("Supported `feed` types: normal, continuous, live, longpoll, eventsource")
		}
	}
	if rq.q.Get("feed") == "live" {
		c.feed = "continuous"
	}
	c.since = rq.q.Get("since")
	if lei := rq.r.Header.Get("Last-Event-Id"); lei != "" && c.feed == "eventsource" {
		// an EventSource that reconnects resumes from the last event it
		// saw, whatever since its URL says (CouchDB 3.5.2)
		c.since = lei
	}
	if n := len(c.since); n >= 2 && c.since[0] == '"' && c.since[n-1] == '"' {
		// the seq as an event's id line has it, a JSON string: CouchDB
		// takes it quoted too
		c.since = c.since[1 : n-1]
	}
	if vs := rq.q["limit"]; len(vs) > 0 {
		// a negative limit is none (fabric's changes count down to
		// exactly 0), not a 400
		n, err := strconv.Atoi(vs[len(vs)-1])
		if err != nil {
			return nil, newErr(400, "query_parse_error", "Invalid value for integer: "+erlString(vs[len(vs)-1]))
		}
		c.limit = max(n, -1)
		c.seqBase = int64(n)
	}
	// CouchDB's _changes takes these as true when they say "true" and
	// ignores any other value (chttpd_db:parse_changes_query): no 400
	c.descending = anyTrue(rq, "descending")
	c.includeDocs = anyTrue(rq, "include_docs")
	c.conflicts = anyTrue(rq, "conflicts")
	c.doc.Attachments = anyTrue(rq, "attachments")
	c.doc.AttEncodingInfo = anyTrue(rq, "att_encoding_info")
	c.doc.Conflicts = c.conflicts
	switch s := rq.q.Get("style"); s {
	case "", "main_only":
	case "all_docs":
		c.allDocs = true
	default:
		return nil, badRequest("Supported `style` values: main_only, all_docs")
	}
	if hb := rq.q.Get("heartbeat"); hb != "" {
		if hb == "true" {
			c.heartbeat = 60 * time.Second
		} else {
			n, err := strconv.Atoi(hb)
			if err != nil || n < 0 {
				return nil, badRequest("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
			}
			c.heartbeat = time.Duration(max(n, 10)) * time.Millisecond
		}
	}
	if t := rq.q.Get("timeout"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return nil, badRequest("Invalid timeout value. Expecting a positive integer value (in milliseconds).")
		}
		c.timeout = time.Duration(n) * time.Millisecond
	}
	if c.seqInterval, err = intParam(rq, "seq_interval", 0); err != nil {
		return nil, err
	}
	f := rq.q.Get("filter")
	if !strings.HasPrefix(f, "_") && len(strings.FieldsFunc(f, isSlash)) == 0 {
		f = "" // CouchDB reads a name of slashes alone as no filter
	}
	switch f {
	case "":
	case "_doc_ids":
		// a POST's doc_ids are its body's (the query's are not read), a
		// GET's the parameter's; either way a list of strings, or this
		// reason (couch_changes:get_doc_ids)
		const reason = "`doc_ids` filter parameter is not a list of doc ids."
		var ids []string
		if rq.r.Method == http.MethodPost {
			var body struct {
				DocIDs []string "json:\"doc_ids\" reason:\"`doc_ids` filter parameter is not a list of doc ids.\""
			}
			if err := decodeObject(c.body, &body); err != nil {
				return nil, err
			}
			if ids = body.DocIDs; ids == nil {
				return nil, badRequest(reason)
			}
		} else {
			raw := []byte("null")
			if vs := rq.q["doc_ids"]; len(vs) > 0 {
				raw = []byte(vs[len(vs)-1])
			}
			if !docjson.Valid(raw) {
				return nil, errInvalidJSON
			}
			if err := decodeMember(raw, &ids, reason); err != nil {
				return nil, err
			}
		}
		c.docIDs = make(map[string]bool, len(ids))
		for _, id := range ids {
			c.docIDs[id] = true
		}
	case "_selector":
		if err := g.parseSelector(rq, c); err != nil {
			return nil, err
		}
	case "_design":
		c.design = true
	case "_view":
		v := rq.q.Get("view")
		if v == "" {
			return nil, badRequest("`view` filter parameter is not provided.")
		}
		parts := strings.FieldsFunc(v, isSlash)
		if len(parts) != 2 {
			return nil, badRequest("`view` must be of the form `designname/viewname`")
		}
		c.viewFilter = parts
	default:
		// CouchDB's answers for the names it refuses before it looks for
		// a design doc (couch_changes:configure_filter); settee has no
		// JavaScript filters (ddoc/fname)
		if strings.HasPrefix(f, "_") {
			return nil, badRequest("unknown builtin filter name")
		}
		parts := strings.FieldsFunc(f, isSlash)
		if len(parts) != 2 {
			return nil, badRequest("`filter` must be of the form `designname/filtername`")
		}
		c.jsFilter = parts
	}
	return c, nil
}

func isSlash(r rune) bool { return r == '/' }

// anyTrue is a boolean parameter as CouchDB's _changes and _bulk_get
// read theirs: set by any value "true", whatever the others say.
func anyTrue(rq *req, name string) bool {
	for _, v := range rq.q[name] {
		if v == "true" {
			return true
		}
	}
	return false
}

// parseSelector reads filter=_selector's body, {"selector": {...}}, with
// CouchDB's answers (couch_changes:get_selector_and_fields): the selector
// only in a POST body, a JSON object; a selector that does not compile is
// a 400 bad_request with mango's reason.
func (g *Gateway) parseSelector(rq *req, c *changesReq) error {
	if rq.r.Method != http.MethodPost {
		return badRequest("Selector must be specified in POST payload")
	}
	var body map[string]json.RawMessage
	if err := decodeObject(c.body, &body); err != nil {
		return err
	}
	raw := bytes.TrimSpace(body["selector"])
	if len(raw) == 0 || raw[0] != '{' {
		return badRequest("Selector error: expected a JSON object")
	}
	sel, err := mango.Parse(raw)
	if err != nil {
		return err // a *mango.Error (errors.go)
	}
	c.selector = sel
	return nil
}

// handleChanges serves _changes in all four feed styles. Rows are written
// as the coordinator merges them from the shards' by-seq indexes.
func (g *Gateway) handleChanges(rq *req, db string) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead && rq.r.Method != http.MethodPost {
		return methodNotAllowed("GET,POST,HEAD") // CouchDB's order
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	c, err := g.parseChanges(rq)
	if err != nil {
		return err
	}
	c.rule = g.pol.ReadRule(rq.ctx, rq.who(), db)
	since := c.since
	if c.descending {
		// fabric reads a descending feed from the end and never parses
		// since (a malformed one too)
		since = ""
	}
	if since == "now" {
		if since, err = g.c.Now(rq.ctx, db); err != nil {
			return err
		}
	}
	q := coordinator.ChangesQuery{Since: since, Descending: c.descending, Limit: c.limit, IncludeDocs: c.includeDocs,
		Selector: c.selector, AllLeaves: c.allDocs,
		// a row shows the winner alone unless style=all_docs or a doc
		WinnerOnly: !c.allDocs && !c.includeDocs}
	switch {
	case c.docIDs != nil:
		ids := c.docIDs
		q.Filter = func(i *pb.FullDocInfo) bool { return ids[i.Id] }
	case c.design:
		q.Filter = func(i *pb.FullDocInfo) bool { return strings.HasPrefix(i.Id, "_design/") }
	}
	if c.jsFilter != nil || c.viewFilter != nil {
		if q.DocFilter, err = g.changesDocFilter(rq, db, c); err != nil {
			return err
		}
	}
	// validate since before the status line goes out
	if _, err := g.c.Changes(rq.ctx, db, coordinator.ChangesQuery{Since: since, Limit: 0}, func(*coordinator.ChangeRow) error { return nil }); err != nil {
		return err
	}
	w := newRowWriter(rq)
	h := rq.w.Header()
	feedHeaders(h, c.feed)
	if c.feed == "normal" {
		// the answer depends on the request and the database's current
		// sequence, which is known before any row is read
		now, err := g.c.Now(rq.ctx, db)
		if err != nil {
			return err
		}
		h.Set("Etag", etagOf([]byte(rq.r.URL.RawQuery+"\x00"+now+"\x00"+string(c.body))))
	}
	if c.feed != "normal" || q.DocFilter == nil {
		rq.w.WriteHeader(200)
	}
	// else the status waits for the first bytes: a JavaScript filter that
	// fails before any went out is an error answer (CouchDB's 500)

	switch c.feed {
	case "normal", "longpoll":
		// CouchDB's framing, byte for byte: the rows between
		// "{"results":[\n" and "\n],\n", a newline when a longpoll starts
		// to wait with nothing sent, and one after the end
		w.raw("{\"results\":[\n")
		if c.feed == "longpoll" {
			w.flush()
		}
		n, last, pending, err := g.changesPass(rq, db, c, q, w, "normal")
		if err != nil && c.feed == "normal" && q.DocFilter != nil && !w.wrote {
			h.Del("Etag")
			return err
		}
		if c.feed == "longpoll" && !c.descending {
			if err == nil && n == 0 {
				w.raw("\n")
				w.flush()
			}
			// a filter may drop the changes that woke it: wait on, up
			// to the timeout from the start, for one that it keeps
			// (CouchDB waits again too)
			deadline := g.waitDeadline(c)
			for err == nil && n == 0 && g.waitChange(rq, db, last, c, w, deadline) {
				q.Since = last
				n, last, pending, err = g.changesPass(rq, db, c, q, w, "normal")
			}
		}
		if err != nil {
			g.log.Warn("changes feed ended early", "db", db, "err", err)
		}
		w.raw("\n],\n\"last_seq\":")
		w.line(docjson.AppendString(nil, last))
		w.raw(",\"pending\":" + strconv.FormatUint(pending, 10) + "}\n\n")
		w.flush()
	default:
		// continuous and eventsource: rows until limit or timeout
		remaining := c.limit
		last := since
		var pending uint64
		// silent: nothing sent yet (CouchDB's chunks_sent is 0)
		silent, byLimit := true, false
		for {
			q.Since, q.Limit = last, remaining
			n, l, p, err := g.changesPass(rq, db, c, q, w, c.feed)
			if err != nil {
				g.log.Warn("changes feed ended early", "db", db, "err", err)
				break
			}
			last, pending = l, p
			silent = silent && n == 0
			w.flush()
			if remaining >= 0 {
				remaining -= n
				if remaining <= 0 {
					byLimit = c.limit > 0
					break
				}
			}
			if c.descending {
				byLimit = true
				break
			}
			if silent {
				// CouchDB sends a newline when a feed that has sent
				// nothing yet starts to wait (continuous and
				// eventsource; longpoll's is above)
				w.raw("\n")
				w.flush()
				silent = false
			}
			if !g.waitChange(rq, db, last, c, w, g.waitDeadline(c)) {
				break
			}
		}
		switch {
		case c.feed == "continuous":
			w.raw(`{"last_seq":`)
			w.line(docjson.AppendString(nil, last))
			w.raw(",\"pending\":" + strconv.FormatUint(pending, 10) + "}\n\n")
		case byLimit:
			// an event stream that ends at its limit (or, descending, at
			// the start) ends with a newline; one that times out does not
			// (CouchDB 3.5.2 sends that newline after the last chunk)
			w.raw("\n")
		}
		w.flush()
	}
	return nil
}

// waitDeadline is when a feed waiting from now for changes ends: after
// its timeout, or never while it sends heartbeats.
func (g *Gateway) waitDeadline(c *changesReq) time.Time {
	if c.heartbeat > 0 {
		return time.Now().Add(24 * time.Hour * 365)
	}
	return time.Now().Add(c.timeout)
}

// waitChange waits until deadline for a change after since, sending
// heartbeats; false means the feed should end (timeout or client gone).
func (g *Gateway) waitChange(rq *req, db, since string, c *changesReq, w *rowWriter, deadline time.Time) bool {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		step := left
		if c.heartbeat > 0 && c.heartbeat < step {
			step = c.heartbeat
		}
		got, err := g.c.Wait(rq.ctx, db, since, step)
		if err != nil || rq.ctx.Err() != nil {
			return false
		}
		if got || c.heartbeat > 0 {
			// a heartbeat each interval, and one when a change wakes
			// the feed, before its rows, heartbeat or not: CouchDB's
			// feed calls back with timeout each time it wakes
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
		if got {
			return true
		}
	}
}

// changesPass writes one pass of rows and returns how many it wrote, the
// last seq and the pending count.
func (g *Gateway) changesPass(rq *req, db string, c *changesReq, q coordinator.ChangesQuery, w *rowWriter, style string) (int, string, uint64, error) {
	n, consumed := 0, 0
	// seq_interval: only some rows carry a sequence (the replicator asks
	// for this to save work on big batches): those where fabric's
	// countdown from the limit (10^15 without one) is a multiple of the
	// interval; an event's id is its seq, always
	var shown func(int) bool
	if c.seqInterval > 1 && style != "eventsource" {
		base, every := c.seqBase-int64(c.sent), int64(c.seqInterval)
		shown = func(i int) bool { return (base-int64(i))%every == 0 }
		q.SeqShown = shown // the coordinator encodes only those
	}
	base := q.Filter
	// a feed that shows each change's winner and nothing else, unfiltered,
	// is written from the rows the shards rendered (every row read is sent)
	jsonRows := base == nil && q.Selector == nil && q.DocFilter == nil && !c.allDocs && !c.includeDocs
	if jsonRows {
		q.JSONRows = true
	} else {
		q.Filter = func(i *pb.FullDocInfo) bool {
			consumed++
			return base == nil || base(i)
		}
	}
	var buf []byte // one change's JSON, reused: the writer copies it out
	last, err := g.c.Changes(rq.ctx, db, q, func(r *coordinator.ChangeRow) error {
		seq := r.Seq
		if shown != nil && !shown(n) {
			seq = ""
		}
		var data [][]byte
		if c.includeDocs && r.Json != nil {
			var err error
			if data, err = g.attData(rq, db, r.Info.Id, r.Info.Winner, r.Atts, &c.doc); err != nil {
				return err
			}
		}
		buf = g.appendChange(buf[:0], r, seq, c, data)
		switch style {
		case "normal":
			if n > 0 {
				w.raw(",\n")
			}
			w.line(buf)
		case "continuous":
			w.line(buf)
			w.raw("\n")
		case "eventsource":
			w.raw("data: ")
			w.line(buf)
			w.raw("\nid: ")
			buf = docjson.AppendString(buf[:0], r.Seq)
			w.line(buf)
			w.raw("\n\n")
		}
		n++
		return w.err
	})
	c.sent += n
	if jsonRows {
		consumed = n
	}
	if err != nil {
		return n, q.Since, 0, err
	}
	var pending uint64
	switch {
	case q.Limit >= 0 && n >= q.Limit && !c.descending:
		// rows beyond the limit are pending
		if rest, err := g.c.PendingAfter(rq.ctx, db, last); err == nil {
			pending = rest
		}
	case q.Limit >= 0 && n >= q.Limit:
		// descending, the rows the scan did not reach: fabric's shards
		// count down from all their changes, one a row read
		if all, err := g.c.PendingAfter(rq.ctx, db, "0"); err == nil && all > uint64(consumed) {
			pending = all - uint64(consumed)
		}
	}
	if consumed > n && c.selector == nil && c.jsFilter == nil && c.viewFilter == nil {
		// doc_ids and _design: CouchDB looks their docs up instead of
		// reading the feed, and counts every change it did not send as
		// pending; for a selector, a filter function or a view it reads
		// the feed, and counts only the changes after the last one read
		pending += uint64(consumed - n)
	}
	return n, last, pending, nil
}

// appendChange renders one change; data (nil, or parallel to r.Atts) is
// the attachments' data the doc inlines.
func (g *Gateway) appendChange(buf []byte, r *coordinator.ChangeRow, seq string, c *changesReq, data [][]byte) []byte {
	info := r.Info
	buf = append(buf, `{"seq":`...)
	switch {
	case seq == "":
		buf = append(buf, "null"...)
	case r.Fragment != nil:
		// a seq is digits, '-' and base64url (coordinator.EncodeSeq):
		// nothing to escape, and scanning it was a tenth of a feed's CPU
		buf = append(append(append(buf, '"'), seq...), '"')
	default:
		buf = docjson.AppendString(buf, seq)
	}
	if r.Fragment != nil {
		buf = append(append(buf, ','), r.Fragment...)
		return append(buf, '}')
	}
	buf = append(buf, `,"id":`...)
	buf = docjson.AppendString(buf, info.Id)
	buf = append(buf, `,"changes":[`...)
	if r.Revs != nil {
		// the leaves a selector kept (style=all_docs)
		for i, rev := range r.Revs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"rev":`...)
			buf = docjson.AppendString(buf, rev)
			buf = append(buf, '}')
		}
	} else if c.allDocs {
		for i, l := range revtree.Leaves(info) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"rev":`...)
			buf = docjson.AppendString(buf, l.Rev.String())
			buf = append(buf, '}')
		}
	} else {
		buf = append(buf, `{"rev":`...)
		buf = docjson.AppendString(buf, info.Winner)
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	if info.Deleted {
		buf = append(buf, `,"deleted":true`...)
	}
	if c.includeDocs {
		buf = append(buf, `,"doc":`...)
		if r.Json == nil {
			buf = append(buf, "null"...)
		} else {
			buf = couchdoc.Append(buf, info.Id, info, &pb.RevBody{Rev: info.Winner, Deleted: info.Deleted, Json: c.rule.Doc(r.Json), Atts: r.Atts, AttData: data}, &c.doc)
		}
	}
	return append(buf, '}')
}

// feedHeaders types a feed's answer (_changes, _db_updates): an event
// stream for eventsource, uncached as CouchDB sends it, else JSON.
func feedHeaders(h http.Header, feed string) {
	if feed == "eventsource" {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		return
	}
	h.Set("Content-Type", "application/json")
}
