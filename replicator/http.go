package replicator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// errors and 5xx answers before the job sees the error.
	Retries int
	Backoff time.Duration

	mu        sync.Mutex
	localRevs map[string]string // _rev of _local docs last read or written
	noBulkGet bool
}

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
		Retries: 4, Backoff: 200 * time.Millisecond,
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

func (e *HTTPEndpoint) do(ctx context.Context, method, path string, q url.Values, body []byte) ([]byte, error) {
	u := e.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	delay := e.Backoff
	for attempt := 0; ; attempt++ {
		b, status, err := e.once(ctx, method, u, body)
		retry := err != nil || status >= 500 || status == 429
		if err == nil && status < 300 {
			return b, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !retry || attempt >= e.Retries {
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, e.name+path, err)
			}
			he := &HTTPError{Status: status, URL: e.name + path}
			var eb struct{ Error, Reason string }
			if json.Unmarshal(b, &eb) == nil {
				he.Code, he.Reason = eb.Error, eb.Reason
			}
			if status == 404 {
				return nil, fmt.Errorf("%w: %w", ErrNotFound, he)
			}
			return nil, he
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 10*time.Second)
	}
}

func (e *HTTPEndpoint) once(ctx context.Context, method, u string, body []byte) ([]byte, int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), resp.StatusCode, nil
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
		return nil, fmt.Errorf("%s: bad database info: %w", e.name, err)
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
	Results []struct {
		Seq     json.RawMessage `json:"seq"`
		ID      string          `json:"id"`
		Changes []struct {
			Rev string `json:"rev"`
		} `json:"changes"`
		Deleted bool `json:"deleted"`
	} `json:"results"`
	LastSeq json.RawMessage `json:"last_seq"`
	Pending uint64          `json:"pending"`
}

func (e *HTTPEndpoint) Changes(ctx context.Context, q ChangesQuery) (*ChangesPage, error) {
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
	method, body := http.MethodGet, []byte(nil)
	if q.DocIDs != nil {
		v.Set("filter", "_doc_ids")
		method = http.MethodPost
		body, _ = json.Marshal(map[string]any{"doc_ids": q.DocIDs})
	}
	b, err := e.do(ctx, method, "/_changes", v, body)
	if err != nil {
		return nil, err
	}
	var c changesJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: bad _changes answer: %w", e.name, err)
	}
	p := &ChangesPage{LastSeq: string(c.LastSeq), Pending: c.Pending, Rows: make([]*pb.RepChange, 0, len(c.Results))}
	for _, r := range c.Results {
		ch := &pb.RepChange{Id: r.ID, Deleted: r.Deleted, Seq: string(r.Seq)}
		for _, x := range r.Changes {
			ch.Revs = append(ch.Revs, x.Rev)
		}
		p.Rows = append(p.Rows, ch)
	}
	return p, nil
}

func (e *HTTPEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]RevDiff, error) {
	body, err := json.Marshal(revs)
	if err != nil {
		return nil, err
	}
	b, err := e.do(ctx, http.MethodPost, "/_revs_diff", nil, body)
	if err != nil {
		return nil, err
	}
	out := map[string]RevDiff{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: bad _revs_diff answer: %w", e.name, err)
	}
	return out, nil
}

type bulkGetJSON struct {
	Results []struct {
		ID   string `json:"id"`
		Docs []struct {
			OK json.RawMessage `json:"ok"`
		} `json:"docs"`
	} `json:"results"`
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
	var res bulkGetJSON
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: bad _bulk_get answer: %w", e.name, err)
	}
	for _, r := range res.Results {
		for _, d := range r.Docs {
			if len(d.OK) > 0 {
				emit(r.ID, d.OK)
			}
		}
	}
	return nil
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
		return he.Reason != "Database does not exist." && he.Reason != "no_db_file"
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
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var res []struct {
		OK json.RawMessage `json:"ok"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: bad open_revs answer: %w", e.name, err)
	}
	for _, r := range res {
		if len(r.OK) > 0 {
			emit(it.ID, r.OK)
		}
	}
	return nil
}

func (e *HTTPEndpoint) BulkDocs(ctx context.Context, docs [][]byte) (int, error) {
	n := 32
	for _, d := range docs {
		n += len(d) + 1
	}
	body := make([]byte, 0, n)
	body = append(body, `{"new_edits":false,"docs":[`...)
	for i, d := range docs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, d...)
	}
	body = append(body, "]}"...)
	b, err := e.do(ctx, http.MethodPost, "/_bulk_docs", nil, body)
	if err != nil {
		return 0, err
	}
	var res []struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return 0, fmt.Errorf("%s: bad _bulk_docs answer: %w", e.name, err)
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
