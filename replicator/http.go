package replicator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// transport is shared by every HTTP endpoint of the process: connections to
// a peer are pooled across jobs (CouchDB's http_connections is per job; a
// shared pool bounds the process instead).
var transport = &http.Transport{
	Proxy:               http.ProxyFromEnvironment,
	DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        200,
	MaxIdleConnsPerHost: 32,
	IdleConnTimeout:     90 * time.Second,
	// bodies are JSON and already compact; compression would cost more CPU
	// than it saves on a LAN
	DisableCompression: true,
}

// HTTPEndpoint is a database on a CouchDB-compatible server.
type HTTPEndpoint struct {
	base    string // scheme://host:port/db, no credentials, no trailing slash
	name    string
	headers http.Header
	client  *http.Client
	// Retries and Backoff bound how hard a request is retried on network
	// errors (timeouts included) and 5xx answers before the job sees the
	// error.
	Retries int
	Backoff time.Duration
	// Timeout is how long the peer may send nothing while a request waits
	// on it (CouchDB's connection_timeout, an inactivity timeout: a long
	// answer that keeps coming is never cut); 0: no limit.
	Timeout time.Duration

	// MultipartMin is the attachment data (decoded bytes) from which a
	// doc is written as its own multipart/related PUT new_edits=false
	// instead of base64 inside _bulk_docs; negative: never.
	MultipartMin int

	// Log tells of the peer's shortcomings the endpoint works around
	// (nil: nothing is logged).
	Log *slog.Logger

	mu          sync.Mutex
	localRevs   map[string]string // _rev of _local docs last read or written
	noBulkGet   bool
	noMultipart bool // the peer refused a multipart PUT: JSON from then on
	noSelector  bool // the peer refused filter=_selector: unfiltered from then on
}

// DefaultConnectionTimeout is connection_timeout when neither the
// replication nor the node sets one (CouchDB's default, 30 s).
const DefaultConnectionTimeout = 30 * time.Second

// maxBackoff caps the doubling delay between retries of a request.
const maxBackoff = 10 * time.Second

// DefaultMultipartMin is new endpoints' MultipartMin: below it one
// _bulk_docs for many docs costs less than a request per doc (see the
// measurements in DESIGN.md). A variable so benchmarks can move it.
var DefaultMultipartMin = 128 << 10

// NewHTTPEndpoint builds an endpoint from a parsed spec.
func NewHTTPEndpoint(s *Spec) *HTTPEndpoint {
	h := http.Header{}
	for k, v := range s.Headers {
		h.Set(k, v)
	}
	if s.User != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.User+":"+s.Password)))
	}
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "settee-replicator")
	return &HTTPEndpoint{
		base: strings.TrimSuffix(s.URL, "/"), name: s.Redacted(), headers: h,
		client:  &http.Client{Transport: transport},
		Retries: 4, Backoff: 200 * time.Millisecond, Timeout: DefaultConnectionTimeout, MultipartMin: DefaultMultipartMin,
		localRevs: map[string]string{},
	}
}

func (e *HTTPEndpoint) Name() string { return e.name }
func (e *HTTPEndpoint) Close()       {}

// HTTPError is a non-2xx answer.
type HTTPError struct {
	Status int
	Code   string
	Reason string
	URL    string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.URL, e.Status, e.Code, e.Reason)
}

// TimeoutError is a request whose peer sent nothing for the endpoint's
// Timeout: no headers, or no more of the body, while it was awaited.
type TimeoutError struct {
	URL   string // redacted
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timeout: no answer from %s for %v", e.URL, e.After)
}

// Timeout tells it apart as net.Error's timeouts are.
func (e *TimeoutError) Timeout() bool { return true }

// watchdog fails a request whose peer is silent for d. It runs while the
// request waits on the peer (dialling, sending the body, waiting for the
// headers, inside a Read of the answer) and is paused while the caller
// holds the answer unread, as a feed does under backpressure: that
// silence is ours, not the peer's. nil: no limit.
type watchdog struct {
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	err    *TimeoutError

	mu      sync.Mutex
	t       *time.Timer
	headers bool // the answer's headers came: sending no longer counts
}

// watch starts a watchdog over a request to be made with the returned
// context; done releases it.
func (e *HTTPEndpoint) watch(ctx context.Context, where string) (context.Context, *watchdog) {
	if e.Timeout <= 0 {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{d: e.Timeout, ctx: ctx, cancel: cancel, err: &TimeoutError{URL: where, After: e.Timeout}}
	w.t = time.AfterFunc(w.d, func() { cancel(w.err) })
	return ctx, w
}

// sent: the transport took more of the request body, so the peer reads.
func (w *watchdog) sent() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.headers {
		w.t.Reset(w.d)
	}
	w.mu.Unlock()
}

// answered: the headers came (or the request failed); the body's reads
// arm the watchdog from now on.
func (w *watchdog) answered() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.headers = true
	w.t.Stop()
	w.mu.Unlock()
}

// reading and idle bracket a Read of the answer (one reader at a time).
func (w *watchdog) reading() {
	if w != nil {
		w.t.Reset(w.d)
	}
}

func (w *watchdog) idle() {
	if w != nil {
		w.t.Stop()
	}
}

func (w *watchdog) done() {
	if w != nil {
		w.t.Stop()
		w.cancel(nil)
	}
}

// explain turns the error of a request the watchdog cancelled into the
// timeout it was.
func (w *watchdog) explain(err error) error {
	if w != nil && errors.Is(context.Cause(w.ctx), w.err) {
		return w.err
	}
	return err
}

// sending is a request body whose reads show the peer is taking it.
type sending struct {
	r  io.Reader
	wd *watchdog
}

func (s *sending) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.wd.sent()
	}
	return n, err
}

// receiving is an answer's body read under the watchdog.
type receiving struct {
	rc io.ReadCloser
	wd *watchdog
}

func (r *receiving) Read(p []byte) (int, error) {
	r.wd.reading()
	n, err := r.rc.Read(p)
	r.wd.idle()
	if err != nil && err != io.EOF {
		err = r.wd.explain(err)
	}
	return n, err
}

func (r *receiving) Close() error {
	err := r.rc.Close()
	r.wd.done()
	return err
}

// body is a request body that can be sent again on a retry.
type body struct {
	ctype string
	n     int64
	open  func() io.Reader
}

func jsonBody(b []byte) *body {
	if b == nil {
		return nil
	}
	return &body{ctype: "application/json", n: int64(len(b)), open: func() io.Reader { return bytes.NewReader(b) }}
}

func (e *HTTPEndpoint) do(ctx context.Context, method, path string, q url.Values, b []byte) ([]byte, error) {
	return e.doBody(ctx, method, path, q, jsonBody(b))
}

// doBody sends a request, retrying network errors, 5xx and 429 with
// doubling delays, and returns a 2xx answer's body or an *HTTPError (404
// wrapped in ErrNotFound).
func (e *HTTPEndpoint) doBody(ctx context.Context, method, path string, q url.Values, body *body) ([]byte, error) {
	_, b, err := e.request(ctx, method, path, q, body, false)
	return b, err
}

// open is doBody for an answer read as a stream: it returns the 2xx
// response with its body unread (the caller closes it).
func (e *HTTPEndpoint) open(ctx context.Context, method, path string, q url.Values, body *body) (*http.Response, error) {
	resp, _, err := e.request(ctx, method, path, q, body, true)
	return resp, err
}

func (e *HTTPEndpoint) request(ctx context.Context, method, path string, q url.Values, body *body, stream bool) (*http.Response, []byte, error) {
	u := e.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	where := strings.TrimSuffix(e.name, "/") + path
	delay := e.Backoff
	for attempt := 0; ; attempt++ {
		resp, b, status, err := e.once(ctx, method, u, where, body, stream)
		retry := err != nil || status >= 500 || status == 429
		if err == nil && status < 300 {
			return resp, b, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if !retry || attempt >= e.Retries {
			var te *TimeoutError
			if errors.As(err, &te) {
				return nil, nil, err // it names the request
			}
			if err != nil {
				var ue *url.Error
				if errors.As(err, &ue) {
					err = ue.Err // its text repeats the URL
				}
				return nil, nil, fmt.Errorf("%s %s: %w", method, where, err)
			}
			he := &HTTPError{Status: status, URL: where}
			var eb struct{ Error, Reason string }
			if json.Unmarshal(b, &eb) == nil {
				he.Code, he.Reason = eb.Error, eb.Reason
			}
			if status == 404 {
				return nil, nil, fmt.Errorf("%w: %w", ErrNotFound, he)
			}
			return nil, nil, he
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, maxBackoff)
	}
}

// once sends a request and reads the answer, or with stream set returns a
// 2xx answer unread (its body keeps the watchdog until closed).
func (e *HTTPEndpoint) once(ctx context.Context, method, u, where string, body *body, stream bool) (*http.Response, []byte, int, error) {
	ctx, wd := e.watch(ctx, where)
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		wd.done()
		return nil, nil, 0, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	if body != nil {
		if body.n > 0 {
			// GetBody also lets the transport send it again on a
			// connection that turned out dead
			req.GetBody = func() (io.ReadCloser, error) {
				return io.NopCloser(&sending{r: body.open(), wd: wd}), nil
			}
			req.Body, _ = req.GetBody()
			req.ContentLength = body.n
		}
		req.Header.Set("Content-Type", body.ctype)
	}
	resp, err := e.client.Do(req)
	wd.answered()
	if err != nil {
		err = wd.explain(err)
		wd.done()
		return nil, nil, 0, err
	}
	resp.Body = &receiving{rc: resp.Body, wd: wd}
	if stream && resp.StatusCode < 300 {
		return resp, nil, resp.StatusCode, nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, nil, 0, err
	}
	return nil, buf.Bytes(), resp.StatusCode, nil
}

// jsonProblem says what was wrong with a peer's JSON in a user's words
// (encoding/json's type errors name Go types).
func jsonProblem(err error) error {
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) {
		return err
	}
	want := "something else"
	switch ute.Type.Kind() {
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Map, reflect.Struct:
		want = "an object"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "a boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		want = "a number"
	}
	if at := strings.TrimPrefix(ute.Field, "."); at != "" {
		return fmt.Errorf("%s is %s %s, not %s", at, article(ute.Value), ute.Value, want)
	}
	return fmt.Errorf("the answer is %s %s, not %s", article(ute.Value), ute.Value, want)
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an"
	}
	return "a"
}

func (e *HTTPEndpoint) Info(ctx context.Context) (*DBInfo, error) {
	b, err := e.do(ctx, http.MethodGet, "/", nil, nil)
	if err != nil {
		return nil, err
	}
	var v struct {
		UpdateSeq         json.RawMessage `json:"update_seq"`
		InstanceStartTime string          `json:"instance_start_time"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: bad database info: %w", e.name, jsonProblem(err))
	}
	return &DBInfo{UpdateSeq: string(v.UpdateSeq), InstanceStartTime: v.InstanceStartTime}, nil
}

func (e *HTTPEndpoint) Create(ctx context.Context) error {
	_, err := e.do(ctx, http.MethodPut, "/", nil, nil)
	var he *HTTPError
	if errors.As(err, &he) && he.Status == 412 {
		return nil
	}
	return err
}

// seqParam turns a raw JSON seq into a query parameter value.
func seqParam(raw string) string {
	if strings.HasPrefix(raw, `"`) {
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			return s
		}
	}
	return raw
}

type changesJSON struct {
	Results []changeRow     `json:"results"`
	LastSeq json.RawMessage `json:"last_seq"`
	Pending uint64          `json:"pending"`
}

// Changes reads one page of changes (a longpoll when q.Wait).
func (e *HTTPEndpoint) Changes(ctx context.Context, q ChangesQuery) (*ChangesPage, error) {
	method, v, body := e.changesRequest(q)
	b, err := e.do(ctx, method, "/_changes", v, body)
	if err != nil && e.refusesSelector(q, err) {
		method, v, body = e.changesRequest(q)
		b, err = e.do(ctx, method, "/_changes", v, body)
	}
	if err != nil {
		return nil, err
	}
	var c changesJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: bad _changes answer: %w", e.name, jsonProblem(err))
	}
	// an answer without results would read as "nothing changed": the
	// job would finish, or checkpoint, past changes it never saw
	if c.Results == nil {
		return nil, fmt.Errorf("%s: bad _changes answer: no results", e.name)
	}
	p := &ChangesPage{LastSeq: string(c.LastSeq), Pending: c.Pending, Rows: make([]*pb.RepChange, 0, len(c.Results))}
	for i := range c.Results {
		ch, ok := c.Results[i].repChange()
		if !ok {
			return nil, fmt.Errorf("%s: bad _changes answer: a row without an id or revs", e.name)
		}
		p.Rows = append(p.Rows, ch)
	}
	return p, nil
}

func (e *HTTPEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]RevDiff, error) {
	body := make([]byte, 0, 64*len(revs)+2)
	body = append(body, '{')
	for id, rs := range revs {
		if len(body) > 1 {
			body = append(body, ',')
		}
		body = docjson.AppendString(body, id)
		body = append(body, ":["...)
		for j, r := range rs {
			if j > 0 {
				body = append(body, ',')
			}
			body = docjson.AppendString(body, r)
		}
		body = append(body, ']')
	}
	body = append(body, '}')
	b, err := e.do(ctx, http.MethodPost, "/_revs_diff", nil, body)
	if err != nil {
		return nil, err
	}
	if out, ok := parseRevsDiff(b); ok {
		return out, nil
	}
	// what the walker did not take, encoding/json takes or explains
	out := map[string]RevDiff{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: bad _revs_diff answer: %w", e.name, jsonProblem(err))
	}
	return out, nil
}

// parseRevsDiff reads a _revs_diff answer with couchdoc's walker (a
// tenth of encoding/json's cost); false when it is not of the plain form.
func parseRevsDiff(b []byte) (map[string]RevDiff, bool) {
	out := map[string]RevDiff{}
	ok := couchdoc.WalkObject(b, 0, func(key []byte, vs, _ int) bool {
		id, ok := jsonString(key)
		if !ok {
			return false
		}
		var d RevDiff
		ok = couchdoc.WalkObject(b, vs, func(k []byte, vs, _ int) bool {
			if bytes.IndexByte(k, '\\') >= 0 {
				return false // an escaped key: encoding/json decodes it
			}
			switch string(k) {
			case `"missing"`:
				return stringList(b, vs, &d.Missing)
			case `"possible_ancestors"`:
				return stringList(b, vs, &d.Ancestors)
			}
			return true
		})
		out[id] = d
		return ok
	})
	return out, ok
}

// stringList appends the strings of the JSON array at b[i] to l.
func stringList(b []byte, i int, l *[]string) bool {
	return couchdoc.WalkArray(b, i, func(vs, ve int) bool {
		s, ok := jsonString(b[vs:ve])
		*l = append(*l, s)
		return ok
	})
}

// jsonString decodes a JSON string token.
func jsonString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

type bulkGetJSON struct {
	Results []struct {
		ID   string      `json:"id"`
		Docs []revResult `json:"docs"`
	} `json:"results"`
}

// revResult is one rev of a _bulk_get result or of an open_revs answer.
type revResult struct {
	OK      json.RawMessage `json:"ok"`
	Missing string          `json:"missing"` // open_revs
	Error   *struct {
		Rev    string `json:"rev"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	} `json:"error"` // _bulk_get
}

// emitRev passes a found rev on. A rev the source no longer has is
// skipped (CouchDB's replicator skips it too: it was stemmed or purged
// since _changes listed it); any other answer fails the fetch rather than
// let the checkpoint pass a rev that was never written.
func (e *HTTPEndpoint) emitRev(what, id string, r *revResult, emit func(string, []byte)) error {
	switch {
	case len(r.OK) > 0 && r.OK[0] == '{':
		emit(id, r.OK)
		return nil
	case r.Missing != "":
		return nil
	case r.Error != nil && r.Error.Error == "not_found":
		return nil
	case r.Error != nil:
		return fmt.Errorf("%s: %s of %s rev %s: %s: %s", e.name, what, id, r.Error.Rev, r.Error.Error, r.Error.Reason)
	}
	return fmt.Errorf("%s: bad %s answer: a result for %s that is neither a doc nor an error", e.name, what, id)
}

func (e *HTTPEndpoint) Fetch(ctx context.Context, items []FetchItem, emit func(string, []byte)) error {
	e.mu.Lock()
	noBulk := e.noBulkGet
	e.mu.Unlock()
	if !noBulk {
		err := e.bulkGet(ctx, items, emit)
		if err == nil || !bulkGetUnsupported(err) {
			return err
		}
		// an old peer without _bulk_get (CouchDB < 2.3): open_revs per doc
		e.mu.Lock()
		e.noBulkGet = true
		e.mu.Unlock()
	}
	for _, it := range items {
		if err := e.openRevs(ctx, it, emit); err != nil {
			return err
		}
	}
	return nil
}

func (e *HTTPEndpoint) bulkGet(ctx context.Context, items []FetchItem, emit func(string, []byte)) error {
	type item struct {
		ID        string   `json:"id"`
		Rev       string   `json:"rev"`
		AttsSince []string `json:"atts_since,omitempty"`
	}
	req := struct {
		Docs []item `json:"docs"`
	}{Docs: make([]item, len(items))}
	for i, it := range items {
		req.Docs[i] = item{ID: it.ID, Rev: it.Rev, AttsSince: it.AttsSince}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	v := url.Values{"revs": {"true"}, "latest": {"true"}, "attachments": {"true"}}
	b, err := e.do(ctx, http.MethodPost, "/_bulk_get", v, body)
	if err != nil {
		return err
	}
	return e.splitBulkGet(b, items, emit)
}

// splitBulkGet passes on the docs of a _bulk_get answer as slices of it
// (no copy). It reads the answer with couchdoc's walker in one pass, each
// doc scanned once to find its end: encoding/json scanned megabytes of
// base64 a byte at a time and was most of the fetch's cost
// (replicator/DESIGN.md, measurements).
func (e *HTTPEndpoint) splitBulkGet(b []byte, items []FetchItem, emit func(string, []byte)) error {
	type result struct {
		id   string
		docs []revResult
		bad  bool // a doc that is neither a doc nor an error
	}
	var results []result
	sawResults := false
	end := couchdoc.ObjectAt(b, 0, func(key []byte, vs int) int {
		if string(key) != `"results"` {
			return couchdoc.SkipValue(b, vs)
		}
		sawResults = true
		return couchdoc.ArrayAt(b, vs, func(rs int) int {
			var r result
			re := couchdoc.ObjectAt(b, rs, func(k []byte, vs int) int {
				if string(k) != `"docs"` {
					ve := couchdoc.SkipValue(b, vs)
					if string(k) == `"id"` && (ve < 0 || json.Unmarshal(b[vs:ve], &r.id) != nil) {
						return -1
					}
					return ve
				}
				return couchdoc.ArrayAt(b, vs, func(ds int) int {
					var rr revResult
					de := couchdoc.ObjectAt(b, ds, func(k []byte, vs int) int {
						ve := couchdoc.SkipValue(b, vs)
						switch {
						case ve < 0:
						case string(k) == `"ok"`:
							rr.OK = b[vs:ve:ve]
						case string(k) == `"error"`:
							if json.Unmarshal(b[vs:ve], &rr.Error) != nil {
								return -1
							}
						}
						return ve
					})
					if de < 0 {
						// not an object: the result is wrong, not the answer
						de = couchdoc.SkipValue(b, ds)
						r.bad = true
					}
					r.docs = append(r.docs, rr)
					return de
				})
			})
			results = append(results, r)
			return re
		})
	})
	if end < 0 {
		// the slow parser says what is wrong
		var v bulkGetJSON
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("%s: bad _bulk_get answer: %w", e.name, jsonProblem(err))
		}
		return fmt.Errorf("%s: bad _bulk_get answer: not the shape of one", e.name)
	}
	if !sawResults {
		return fmt.Errorf("%s: bad _bulk_get answer: no results", e.name)
	}
	answered := make(map[string]bool, len(results))
	for _, r := range results {
		answered[r.id] = true
	}
	for _, it := range items {
		if !answered[it.ID] {
			return fmt.Errorf("%s: bad _bulk_get answer: no result for %s", e.name, it.ID)
		}
	}
	for _, r := range results {
		if r.bad {
			return fmt.Errorf("%s: bad _bulk_get answer: a result for %s that is neither a doc nor an error", e.name, r.id)
		}
		for i := range r.docs {
			if err := e.emitRev("_bulk_get", r.id, &r.docs[i], emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// dbMissing tells a 404 about the database (CouchDB's "Database does not
// exist.", or "no_db_file" from 1.x) from one about a doc or a path.
func dbMissing(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == 404 && (he.Reason == "Database does not exist." || he.Reason == "no_db_file")
}

// bulkGetUnsupported recognises a peer without _bulk_get: 405, 400, or a
// 404 that is not about the database.
func bulkGetUnsupported(err error) bool {
	var he *HTTPError
	if !errors.As(err, &he) {
		return false
	}
	switch he.Status {
	case 400, 405:
		return true
	case 404:
		return !dbMissing(err)
	}
	return false
}

func docPath(id string) string {
	if rest, ok := strings.CutPrefix(id, "_design/"); ok {
		return "/_design/" + url.PathEscape(rest)
	}
	return "/" + url.PathEscape(id)
}

func (e *HTTPEndpoint) openRevs(ctx context.Context, it FetchItem, emit func(string, []byte)) error {
	revs, _ := json.Marshal([]string{it.Rev})
	v := url.Values{"revs": {"true"}, "latest": {"true"}, "attachments": {"true"}, "open_revs": {string(revs)}}
	if len(it.AttsSince) > 0 {
		s, _ := json.Marshal(it.AttsSince)
		v.Set("atts_since", string(s))
	}
	b, err := e.do(ctx, http.MethodGet, docPath(it.ID), v, nil)
	if errors.Is(err, ErrNotFound) && !dbMissing(err) {
		// a peer that answers a missing doc 404 rather than 200 with
		// "missing" entries (CouchDB's way): the rev is gone, skipped
		return nil
	}
	if err != nil {
		// a missing database is not a missing rev: skipping every doc
		// would let the checkpoint pass changes never written
		return err
	}
	var res []revResult
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: bad open_revs answer: %w", e.name, jsonProblem(err))
	}
	for i := range res {
		if err := e.emitRev("open_revs", it.ID, &res[i], emit); err != nil {
			return err
		}
	}
	return nil
}

// BulkDocs writes docs with new_edits=false: a doc carrying at least
// MultipartMin bytes of attachment data goes as its own multipart/related
// PUT (no base64 on the wire or in the target's parser, as CouchDB's
// replicator writes docs with attachments), the others in one _bulk_docs.
func (e *HTTPEndpoint) BulkDocs(ctx context.Context, docs [][]byte) (int, error) {
	failures := 0
	rest := docs[:0:0]
	for _, d := range docs {
		fd := e.multipartDoc(d)
		if fd == nil {
			rest = append(rest, d)
			continue
		}
		failed, err := e.putMultipart(ctx, fd)
		if errors.Is(err, errNoMultipart) {
			rest = append(rest, d)
			continue
		}
		if err != nil {
			return 0, err
		}
		failures += failed
	}
	if len(rest) == 0 {
		return failures, nil
	}
	failed, err := e.bulkDocs(ctx, rest)
	return failures + failed, err
}

// multipartDoc returns d in follows form when it goes as a multipart PUT.
func (e *HTTPEndpoint) multipartDoc(d []byte) *couchdoc.FollowsDoc {
	if e.MultipartMin < 0 || len(d) < e.MultipartMin || !bytes.Contains(d, []byte(`"data":"`)) {
		return nil
	}
	e.mu.Lock()
	no := e.noMultipart
	e.mu.Unlock()
	if no {
		return nil
	}
	fd, ok := couchdoc.InlineToFollows(d)
	if !ok || fd.DataLen < e.MultipartMin {
		return nil
	}
	return fd
}

// errNoMultipart: the peer does not take multipart PUTs (an old settee
// answers 400, a server that wants JSON 415); the doc goes as JSON.
var errNoMultipart = errors.New("replicator: the target does not take multipart documents")

// putMultipart writes one doc as PUT /db/doc?new_edits=false with a
// multipart/related body, decoding the base64 data as it is sent (the
// body is never held decoded). A refusal of the doc itself (403, 409,
// 412, 413) is a write failure, as CouchDB's replicator counts it.
func (e *HTTPEndpoint) putMultipart(ctx context.Context, fd *couchdoc.FollowsDoc) (int, error) {
	boundary := couchdoc.NewBoundary()
	head := couchdoc.RelatedHead(nil, boundary)
	heads := make([][]byte, len(fd.Atts))
	n := int64(len(head) + len(fd.JSON))
	for i, a := range fd.Atts {
		heads[i] = couchdoc.AttPartHead(nil, boundary, a.Name, a.ContentType, "", a.Len)
		n += int64(len(heads[i]) + a.Len)
	}
	tail := couchdoc.RelatedTail(nil, boundary)
	n += int64(len(tail))
	b := &body{ctype: `multipart/related; boundary="` + boundary + `"`, n: n, open: func() io.Reader {
		rs := make([]io.Reader, 0, 3+2*len(fd.Atts))
		rs = append(rs, bytes.NewReader(head), bytes.NewReader(fd.JSON))
		for i, a := range fd.Atts {
			rs = append(rs, bytes.NewReader(heads[i]), couchdoc.NewBase64Reader(a.B64))
		}
		return io.MultiReader(append(rs, bytes.NewReader(tail))...)
	}}
	_, err := e.doBody(ctx, http.MethodPut, docPath(fd.ID), url.Values{"new_edits": {"false"}}, b)
	var he *HTTPError
	if err == nil {
		return 0, nil
	}
	if !errors.As(err, &he) || errors.Is(err, ErrNotFound) {
		return 0, err
	}
	switch he.Status {
	case 400, 415:
		e.mu.Lock()
		e.noMultipart = true
		e.mu.Unlock()
		return 0, errNoMultipart
	case 403, 409, 412, 413:
		return 1, nil
	}
	// 401 included: credentials that stopped working crash the job (as a
	// _bulk_docs would) rather than skip the doc past the checkpoint
	return 0, err
}

var (
	bulkDocsHead = []byte(`{"new_edits":false,"docs":[`)
	bulkDocsTail = []byte("]}")
	comma        = []byte(",")
)

func (e *HTTPEndpoint) bulkDocs(ctx context.Context, docs [][]byte) (int, error) {
	// the body is sent from the docs where they are (slices of the
	// _bulk_get answers), not copied into one buffer first
	n := int64(len(bulkDocsHead) + len(bulkDocsTail))
	for i, d := range docs {
		n += int64(len(d))
		if i > 0 {
			n++
		}
	}
	body := &body{ctype: "application/json", n: n, open: func() io.Reader {
		bufs := make(net.Buffers, 0, 2*len(docs)+1)
		bufs = append(bufs, bulkDocsHead)
		for i, d := range docs {
			if i > 0 {
				bufs = append(bufs, comma)
			}
			bufs = append(bufs, d)
		}
		bufs = append(bufs, bulkDocsTail)
		return &bufs
	}}
	b, err := e.doBody(ctx, http.MethodPost, "/_bulk_docs", nil, body)
	if err != nil {
		return 0, err
	}
	var res []struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return 0, fmt.Errorf("%s: bad _bulk_docs answer: %w", e.name, jsonProblem(err))
	}
	failures := 0
	for _, r := range res {
		if r.Error != "" {
			failures++
		}
	}
	return failures, nil
}

func (e *HTTPEndpoint) GetLocal(ctx context.Context, id string) ([]byte, error) {
	b, err := e.do(ctx, http.MethodGet, "/_local/"+url.PathEscape(id), nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v struct {
		Rev string `json:"_rev"`
	}
	_ = json.Unmarshal(b, &v)
	e.mu.Lock()
	e.localRevs[id] = v.Rev
	e.mu.Unlock()
	return b, nil
}

func (e *HTTPEndpoint) PutLocal(ctx context.Context, id string, body []byte) error {
	e.mu.Lock()
	rev := e.localRevs[id]
	e.mu.Unlock()
	if rev != "" && len(body) > 1 {
		// CouchDB checks _local revs
		withRev := append([]byte(`{"_rev":`), strconv.Quote(rev)...)
		if len(body) > 2 {
			withRev = append(withRev, ',')
		}
		body = append(withRev, body[1:]...)
	}
	b, err := e.do(ctx, http.MethodPut, "/_local/"+url.PathEscape(id), nil, body)
	if err != nil {
		return err
	}
	var v struct {
		Rev string `json:"rev"`
	}
	if json.Unmarshal(b, &v) == nil && v.Rev != "" {
		e.mu.Lock()
		e.localRevs[id] = v.Rev
		e.mu.Unlock()
	}
	return nil
}
