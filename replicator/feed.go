package replicator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// changeRow is one row of _changes, style=all_docs.
type changeRow struct {
	Seq     json.RawMessage `json:"seq"`
	ID      string          `json:"id"`
	Changes []struct {
		Rev string `json:"rev"`
	} `json:"changes"`
	Deleted bool `json:"deleted"`
}

// repChange checks a row and turns it into the pipeline's form.
func (r *changeRow) repChange() (*pb.RepChange, bool) {
	ch := &pb.RepChange{Id: r.ID, Deleted: r.Deleted, Seq: string(r.Seq), Revs: make([]string, 0, len(r.Changes))}
	for _, x := range r.Changes {
		ch.Revs = append(ch.Revs, x.Rev)
	}
	return ch, r.ID != "" && len(ch.Revs) > 0
}

// badAnswer is an answer of the wrong form: not retried.
type badAnswer struct{ err error }

func (b *badAnswer) Error() string { return b.err.Error() }
func (b *badAnswer) Unwrap() error { return b.err }

// hasSeq tells a seq that can be resumed from.
func hasSeq(seq string) bool { return seq != "" && seq != "null" }

// feedPager cuts a feed's rows into pages of size rows, each ending on a
// row with a seq, and counts the rows handed on against the pending count
// read at the start.
type feedPager struct {
	size    int
	pending uint64
	rows    []*pb.RepChange
	since   string // the seq after which rows are still to come
	page    func(*ChangesPage) error
}

func (f *feedPager) add(ch *pb.RepChange) error {
	f.rows = append(f.rows, ch)
	if len(f.rows) < f.size || !hasSeq(ch.Seq) {
		return nil
	}
	return f.flush(ch.Seq, false)
}

func (f *feedPager) flush(last string, end bool) error {
	n := uint64(len(f.rows))
	f.pending -= min(n, f.pending)
	if end {
		f.pending = 0
	}
	p := &ChangesPage{Rows: f.rows, LastSeq: last, Pending: f.pending, End: end}
	f.rows = nil
	f.since = last
	return f.page(p)
}

// Feed reads the changes after q.Since as one normal feed without a limit
// (the source counts nothing and answers one request, as CouchDB's
// replicator reads it) and hands them on in pages while it reads. A
// connection lost mid-feed is opened again after the last page handed on.
func (e *HTTPEndpoint) Feed(ctx context.Context, q ChangesQuery, size int, page func(*ChangesPage) error) error {
	f := &feedPager{size: max(size, 1), since: q.Since, page: page}
	// one count at the start for changes_pending (a source counts the
	// changes after since for every page that reaches its limit)
	f.pending = e.pendingAfter(ctx, q)
	wait, fails := e.backoff(), 0
	for {
		before := f.since
		err := e.feedOnce(ctx, q, f)
		var bad *badAnswer
		if err == nil || ctx.Err() != nil || errors.As(err, &bad) {
			return err
		}
		var no *notOpened
		if errors.As(err, &no) {
			if e.refusesSelector(q, no.err) {
				continue // read again, unfiltered
			}
			return no.err // open retried it already
		}
		if f.since != before {
			wait, fails = e.backoff(), 0
		}
		if fails++; fails > e.Retries {
			return err
		}
		if err := wait.next(ctx); err != nil {
			return err
		}
	}
}

// notOpened is a feed whose request failed before any answer came:
// request retried it already, as often as the endpoint retries a request.
type notOpened struct{ err error }

func (n *notOpened) Error() string { return n.err.Error() }
func (n *notOpened) Unwrap() error { return n.err }

func (e *HTTPEndpoint) feedOnce(ctx context.Context, q ChangesQuery, f *feedPager) error {
	q.Since, q.Limit, q.Wait = f.since, 0, false
	f.rows = nil
	method, v, body := e.changesRequest(q)
	resp, err := e.open(ctx, method, "/_changes", v, jsonBody(body))
	if err != nil {
		return &notOpened{err}
	}
	defer resp.Body.Close()
	bad := func(err error) error {
		return &badAnswer{fmt.Errorf("%s: bad _changes answer: %w", e.name, jsonProblem(err))}
	}
	r := &feedReader{r: resp.Body, buf: make([]byte, 0, 64<<10)}
	// a body cut short (the connection) is not a bad answer: it is read
	// again from the last page handed on
	short := func() error {
		if r.err != nil {
			return fmt.Errorf("%s: reading _changes: %w", e.name, r.err)
		}
		return fmt.Errorf("%s: reading _changes: %w", e.name, io.ErrUnexpectedEOF)
	}
	c, ok := r.next()
	if !ok {
		return short()
	}
	if c != '{' {
		// encoding/json says what it is
		r.pos--
		rest, _ := io.ReadAll(io.LimitReader(r.r, 1<<20))
		var x map[string]json.RawMessage
		err := json.Unmarshal(append(r.buf[r.pos:], rest...), &x)
		if err == nil {
			err = errors.New("not an object")
		}
		return bad(err)
	}
	// The feed's object is walked here a token at a time, not with
	// docjson.Object: it is the whole body, handed on in pages while it
	// arrives and never in memory at once. Each value in it is, and
	// docjson walks that.
	sawResults := false
	lastSeq := ""
	for first := true; ; first = false {
		c, ok := r.next()
		if !ok {
			return short()
		}
		if c == '}' && first {
			break
		}
		if !first {
			if c == '}' {
				break
			}
			if c != ',' {
				return bad(fmt.Errorf("invalid character %q after object key:value pair", c))
			}
			if c, ok = r.next(); !ok {
				return short()
			}
		}
		r.pos--
		ks, ke, ok := r.value()
		if !ok {
			return short()
		}
		key, ok := jsonString(r.buf[ks:ke])
		if c != '"' || !ok {
			return bad(errors.New("invalid object key"))
		}
		r.pos = ke
		if c, ok = r.next(); !ok {
			return short()
		} else if c != ':' {
			return bad(fmt.Errorf("invalid character %q after object key", c))
		}
		if key != "results" {
			vs, ve, ok := r.value()
			if !ok {
				return short()
			}
			if key == "last_seq" {
				lastSeq = string(r.buf[vs:ve])
			}
			r.pos = ve
			continue
		}
		if c, ok = r.next(); !ok {
			return short()
		} else if c != '[' {
			return bad(fmt.Errorf("results is %s, not an array", valueKind(c)))
		}
		sawResults = true
		for n := 0; ; n++ {
			c, ok := r.next()
			if !ok {
				return short()
			}
			if c == ']' && n == 0 {
				break
			}
			if n > 0 {
				if c == ']' {
					break
				}
				if c != ',' {
					return bad(fmt.Errorf("invalid character %q after array element", c))
				}
			} else {
				r.pos--
			}
			vs, ve, ok := r.value()
			if !ok {
				return short()
			}
			ch, err := parseChangeRow(r.buf[vs:ve])
			if err != nil {
				return bad(err)
			}
			r.pos = ve
			if err := f.add(ch); err != nil {
				return err
			}
		}
	}
	// an answer without results would read as "nothing changed": the job
	// would finish, or checkpoint, past changes it never saw
	if !sawResults {
		return bad(errors.New("no results"))
	}
	last := lastSeq
	if !hasSeq(last) {
		last = f.since
		if n := len(f.rows); n > 0 && hasSeq(f.rows[n-1].Seq) {
			last = f.rows[n-1].Seq
		}
	}
	return f.flush(last, true)
}

// parseChangeRow reads one row of a feed with docjson's walker; a row it
// does not take goes to encoding/json, which takes it or says what is
// wrong.
func parseChangeRow(b []byte) (*pb.RepChange, error) {
	ch := &pb.RepChange{}
	end := docjson.Object(b, 0, func(k []byte, vs int) int {
		if bytes.IndexByte(k, '\\') >= 0 {
			return -1 // an escaped key: encoding/json decodes it
		}
		switch string(k) {
		case `"changes"`:
			return docjson.Array(b, vs, func(es int) int {
				return docjson.Object(b, es, func(k []byte, vs int) int {
					if bytes.IndexByte(k, '\\') >= 0 {
						return -1
					}
					ve := docjson.SkipValue(b, vs)
					if string(k) == `"rev"` && ve > 0 {
						rev, ok := jsonString(b[vs:ve])
						if !ok {
							return -1
						}
						ch.Revs = append(ch.Revs, rev)
					}
					return ve
				})
			})
		}
		ve := docjson.SkipValue(b, vs)
		if ve < 0 {
			return -1
		}
		v := b[vs:ve]
		switch string(k) {
		case `"seq"`:
			ch.Seq = string(v)
		case `"id"`:
			id, ok := jsonString(v)
			if !ok {
				return -1
			}
			ch.Id = id
		case `"deleted"`:
			switch string(v) {
			case "true":
				ch.Deleted = true
			case "false", "null":
			default:
				return -1
			}
		}
		return ve
	})
	if end < 0 {
		var r changeRow
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, err
		}
		ch, ok := r.repChange()
		if !ok {
			return nil, errors.New("a row without an id or revs")
		}
		return ch, nil
	}
	if ch.Id == "" || len(ch.Revs) == 0 {
		return nil, errors.New("a row without an id or revs")
	}
	return ch, nil
}

// feedReader holds the part of a feed being parsed: values are read
// whole into buf (which grows for a big one) and walked there.
type feedReader struct {
	r   io.Reader
	buf []byte
	pos int   // what is parsed ends here
	eof bool  // the body is all read
	err error // how the read failed (nil: a clean end)
}

// more reads more of the body, keeping buf[pos:]; false at the end.
func (f *feedReader) more() bool {
	if f.eof {
		return false
	}
	if f.pos > 0 {
		f.buf = f.buf[:copy(f.buf, f.buf[f.pos:])]
		f.pos = 0
	}
	if cap(f.buf)-len(f.buf) < 16<<10 {
		f.buf = append(f.buf, make([]byte, cap(f.buf))...)[:len(f.buf)]
	}
	n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	if err != nil {
		f.eof = true
		if err != io.EOF {
			f.err = err
		}
	}
	return true
}

// next returns the next byte that is not white space and moves past it.
func (f *feedReader) next() (byte, bool) {
	for {
		if f.pos = docjson.SkipWS(f.buf, f.pos); f.pos < len(f.buf) {
			f.pos++
			return f.buf[f.pos-1], true
		}
		if !f.more() {
			return 0, false
		}
	}
}

// value returns the span in buf of the whole JSON value at pos (after
// white space), reading as much as it takes; pos is not moved. A value is
// whole when something follows it, or the body ended.
func (f *feedReader) value() (int, int, bool) {
	for {
		if i := docjson.SkipWS(f.buf, f.pos); i < len(f.buf) {
			if ve := docjson.SkipValue(f.buf, i); ve >= 0 && (ve < len(f.buf) || f.eof) {
				return i, ve, true
			}
		}
		if !f.more() {
			return 0, 0, false
		}
	}
}

// valueKind names the kind of the JSON value that starts with c.
func valueKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// changesRequest is the method, query and body of a _changes request.
func (e *HTTPEndpoint) changesRequest(q ChangesQuery) (string, url.Values, []byte) {
	v := url.Values{}
	v.Set("style", "all_docs")
	if q.Since != "" {
		v.Set("since", seqParam(q.Since))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.SeqInterval > 1 {
		v.Set("seq_interval", strconv.Itoa(q.SeqInterval))
	}
	if q.Wait {
		v.Set("feed", "longpoll")
		v.Set("timeout", strconv.Itoa(max(q.Timeout, 1)))
	} else {
		v.Set("feed", "normal")
	}
	switch {
	case q.DocIDs != nil:
		v.Set("filter", "_doc_ids")
		body, _ := json.Marshal(map[string]any{"doc_ids": q.DocIDs})
		return http.MethodPost, v, body
	case q.Selector != nil && !e.selectorRefused():
		// as CouchDB's replicator: the source matches the docs, and
		// sends only the changes the job wants
		v.Set("filter", "_selector")
		body, _ := json.Marshal(map[string]json.RawMessage{"selector": q.Selector})
		return http.MethodPost, v, body
	case q.Filter != "":
		// the source runs its design doc's filter; query_params go with
		// the query string, where the filter's req.query finds them
		for k, val := range q.QueryParams {
			if v.Get(k) == "" {
				v.Set(k, val)
			}
		}
		v.Set("filter", q.Filter)
	}
	return http.MethodGet, v, nil
}

func (e *HTTPEndpoint) selectorRefused() bool {
	return e.noSelector.Load()
}

// refusesSelector tells, after a _changes request for q failed with err,
// whether the source refused filter=_selector: a 400 (CouchDB before 2.0
// answers "`filter` must be of the form `designname/filtername`"), a 404
// that is not about the database, or a 405 (no POST). The endpoint then
// asks for its changes unfiltered from now on, and the worker's check of
// the fetched revs does the filtering; true means: ask again.
func (e *HTTPEndpoint) refusesSelector(q ChangesQuery, err error) bool {
	var he *HTTPError
	if q.Selector == nil || q.DocIDs != nil || !errors.As(err, &he) {
		return false
	}
	switch {
	case he.Status == 400, he.Status == 405, he.Status == 404 && !dbMissing(err):
	default:
		return false
	}
	if !e.noSelector.CompareAndSwap(false, true) {
		return false // it was asked unfiltered: the error is another one
	}
	if e.Log != nil {
		e.Log.Warn("replicator: source refuses filter=_selector, filtering fetched docs instead",
			"source", e.name, "status", he.Status, "error", he.Code, "reason", he.Reason)
	}
	return true
}

// pendingAfter asks how many changes follow q.Since (limit=0); 0 when the
// source does not say.
func (e *HTTPEndpoint) pendingAfter(ctx context.Context, q ChangesQuery) uint64 {
	q.Limit, q.Wait = 0, false
	b, err := e.askChanges(ctx, q, true)
	if err != nil {
		return 0
	}
	var c struct {
		Pending uint64 `json:"pending"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Pending
}
