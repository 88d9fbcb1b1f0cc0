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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settee/settee/internal/couchpath"
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

	mu        sync.Mutex
	localRevs map[string]string // _rev of _local docs last read or written

	// what the peer turned out not to take, remembered for the rest of
	// the job (set once, read by every worker)
	noBulkGet   atomic.Bool // no _bulk_get: open_revs per doc
	noMultipart atomic.Bool // a multipart PUT refused: JSON from then on
	noSelector  atomic.Bool // filter=_selector refused: unfiltered from then on
}

// DefaultConnectionTimeout is connection_timeout when neither the
// replication nor the node sets one (CouchDB's default, 30 s).
const DefaultConnectionTimeout = 30 * time.Second

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
	_, b, err := e.request(ctx, method, path, q, body, false, nil)
	return b, err
}

// open is doBody for an answer read as a stream: it returns the 2xx
// response with its body unread (the caller closes it).
func (e *HTTPEndpoint) open(ctx context.Context, method, path string, q url.Values, body *body) (*http.Response, error) {
	resp, _, err := e.request(ctx, method, path, q, body, true, nil)
	return resp, err
}

// request sends a request, with the endpoint's headers and hdr's, retried
// on network errors and 5xx answers; with stream set a 2xx answer is
// returned unread.
func (e *HTTPEndpoint) request(ctx context.Context, method, path string, q url.Values, body *body, stream bool, hdr http.Header) (*http.Response, []byte, error) {
	u := e.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	where := strings.TrimSuffix(e.name, "/") + path
	wait := e.backoff()
	for attempt := 0; ; attempt++ {
		resp, b, status, err := e.once(ctx, method, u, where, body, stream, hdr)
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
		if err := wait.next(ctx); err != nil {
			return nil, nil, err
		}
	}
}

// once sends a request and reads the answer, or with stream set returns a
// 2xx answer unread (its body keeps the watchdog until closed).
func (e *HTTPEndpoint) once(ctx context.Context, method, u, where string, body *body, stream bool, hdr http.Header) (*http.Response, []byte, int, error) {
	ctx, wd := e.watch(ctx, where)
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		wd.done()
		return nil, nil, 0, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	for k, v := range hdr {
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

// dbMissing tells a 404 about the database (CouchDB's "Database does not
// exist.", or "no_db_file" from 1.x) from one about a doc or a path.
func dbMissing(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == 404 && (he.Reason == "Database does not exist." || he.Reason == "no_db_file")
}

func docPath(id string) string {
	if rest, ok := strings.CutPrefix(id, "_design/"); ok {
		return "/_design/" + couchpath.Escape(rest)
	}
	return "/" + couchpath.Escape(id)
}
