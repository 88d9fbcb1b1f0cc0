package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client talks to one CouchDB-compatible server. Credentials from the URL's
// userinfo are sent as a precomputed Basic Authorization header.
type client struct {
	hc      *http.Client
	scheme  string
	host    string
	prefix  string // URL path prefix without trailing slash ("" or "/couch")
	auth    string // Authorization header value or ""
	display string // URL without credentials, for reports
}

func newClient(rawURL string, conns int) (*client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: url: %w", ErrConfig, err)
	}
	c := &client{scheme: u.Scheme, host: u.Host, prefix: strings.TrimSuffix(u.Path, "/")}
	if u.User != nil {
		pw, _ := u.User.Password()
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
	}
	shown := *u
	shown.User = nil
	c.display = shown.String()
	tr := &http.Transport{
		// Direct: a benchmark through an environment proxy measures the proxy.
		Proxy:       nil,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// Keep every worker's connection alive between requests.
		MaxIdleConns:        conns + 4,
		MaxIdleConnsPerHost: conns + 4,
		IdleConnTimeout:     90 * time.Second,
		// No gzip: CouchDB does not compress and decoding would cost client CPU.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
		// Fewer, larger syscalls for multi-MB _bulk_docs bodies and streams.
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// request builds a request for path (already escaped, starting with "/")
// under the URL prefix. body may be nil.
func (c *client) request(ctx context.Context, method, path, rawQuery string, body []byte) (*http.Request, error) {
	u := &url.URL{Scheme: c.scheme, Host: c.host, Path: c.prefix + path, RawQuery: rawQuery}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	return req, nil
}

// do sends a request and returns the response; the caller closes its body.
func (c *client) do(ctx context.Context, method, path, rawQuery string, body []byte) (*http.Response, error) {
	req, err := c.request(ctx, method, path, rawQuery, body)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// roundTrip sends a request, reads the whole response into buf (reset
// first) and returns the status. Reading to the end keeps the connection
// reusable.
func (c *client) roundTrip(ctx context.Context, method, path, rawQuery string, body []byte, buf *bytes.Buffer) (int, error) {
	resp, err := c.do(ctx, method, path, rawQuery, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: reading response: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

// getJSON GETs path and decodes a 200 response into v.
func (c *client) getJSON(ctx context.Context, path, rawQuery string, v any) error {
	var buf bytes.Buffer
	st, err := c.roundTrip(ctx, http.MethodGet, path, rawQuery, nil, &buf)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return statusError(http.MethodGet, path, st, buf.Bytes())
	}
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrResponse, path, err)
	}
	return nil
}

// statusError wraps ErrStatus with the request and the start of the body.
func statusError(method, path string, status int, body []byte) error {
	const max = 300
	if len(body) > max {
		body = append(body[:max:max], "..."...)
	}
	hint := ""
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		hint = " (put admin credentials in the URL: http://user:password@host:port)"
	}
	return fmt.Errorf("%w: %s %s: %d %s%s", ErrStatus, method, path, status, bytes.TrimSpace(body), hint)
}

// drain reads what is left of a response body so the connection can be
// reused, then closes it.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, rc)
	_ = rc.Close()
}
