package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

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
	delay, fails := e.Backoff, 0
	for {
		before := f.since
		err := e.feedOnce(ctx, q, f)
		var bad *badAnswer
		if err == nil || ctx.Err() != nil || errors.As(err, &bad) {
			return err
		}
		var he *HTTPError
		if errors.As(err, &he) {
			return err // open retried it already
		}
		if f.since != before {
			delay, fails = e.Backoff, 0
		}
		if fails++; fails > e.Retries {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 10*time.Second)
	}
}

func (e *HTTPEndpoint) feedOnce(ctx context.Context, q ChangesQuery, f *feedPager) error {
	q.Since, q.Limit, q.Wait = f.since, 0, false
	f.rows = nil
	method, v, body := e.changesRequest(q)
	resp, err := e.open(ctx, method, "/_changes", v, jsonBody(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	bad := func(err error) error {
		return &badAnswer{fmt.Errorf("%s: bad _changes answer: %w", e.name, jsonProblem(err))}
	}
	// a JSON error is a bad answer; a read error (the connection) is not
	readErr := func(err error) error {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) {
			return bad(err)
		}
		return fmt.Errorf("%s: reading _changes: %w", e.name, err)
	}
	dec := json.NewDecoder(resp.Body)
	t, err := dec.Token()
	if err != nil {
		return readErr(err)
	}
	if t != json.Delim('{') {
		return bad(fmt.Errorf("the answer is %s, not an object", tokenKind(t)))
	}
	sawResults := false
	var lastSeq json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return readErr(err)
		}
		switch t {
		case "results":
			t, err := dec.Token()
			if err != nil {
				return readErr(err)
			}
			if t != json.Delim('[') {
				return bad(fmt.Errorf("results is %s, not an array", tokenKind(t)))
			}
			sawResults = true
			for dec.More() {
				var r changeRow
				if err := dec.Decode(&r); err != nil {
					return readErr(err)
				}
				ch, ok := r.repChange()
				if !ok {
					return bad(errors.New("a row without an id or revs"))
				}
				if err := f.add(ch); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return readErr(err)
			}
		case "last_seq":
			if err := dec.Decode(&lastSeq); err != nil {
				return readErr(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return readErr(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return readErr(err)
	}
	// an answer without results would read as "nothing changed": the job
	// would finish, or checkpoint, past changes it never saw
	if !sawResults {
		return bad(errors.New("no results"))
	}
	last := string(lastSeq)
	if !hasSeq(last) {
		last = f.since
		if n := len(f.rows); n > 0 && hasSeq(f.rows[n-1].Seq) {
			last = f.rows[n-1].Seq
		}
	}
	return f.flush(last, true)
}

// tokenKind names a JSON token's kind for an error.
func tokenKind(t json.Token) string {
	switch t := t.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
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
	if q.Wait {
		v.Set("feed", "longpoll")
		v.Set("timeout", strconv.Itoa(max(q.Timeout, 1)))
	} else {
		v.Set("feed", "normal")
	}
	if q.DocIDs == nil {
		return http.MethodGet, v, nil
	}
	v.Set("filter", "_doc_ids")
	body, _ := json.Marshal(map[string]any{"doc_ids": q.DocIDs})
	return http.MethodPost, v, body
}

// pendingAfter asks how many changes follow q.Since (limit=0); 0 when the
// source does not say.
func (e *HTTPEndpoint) pendingAfter(ctx context.Context, q ChangesQuery) uint64 {
	q.Limit, q.Wait = 0, false
	method, v, body := e.changesRequest(q)
	v.Set("limit", "0")
	b, err := e.do(ctx, method, "/_changes", v, body)
	if err != nil {
		return 0
	}
	var c struct {
		Pending uint64 `json:"pending"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Pending
}
