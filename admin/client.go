package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client talks to one node, with the credentials of its URL.
type client struct {
	base *url.URL
	hc   *http.Client
}

func newClient(raw string) (*client, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("bad URL %q: want http://user:password@host:port", raw)
	}
	return &client{base: u, hc: &http.Client{Timeout: 60 * time.Second}}, nil
}

// do sends a request and decodes a JSON answer into out; a CouchDB error
// becomes a one-line error.
func (c *client) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := *c.base
	p, q, _ := strings.Cut(path, "?")
	u.Path, u.RawQuery = p, q
	if up, err := url.PathUnescape(p); err == nil && up != p {
		// a path escaped by the caller (url.PathEscape of a name with
		// "/" or spaces) is sent as it is
		u.Path, u.RawPath = up, p
	}
	u.User = nil
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if c.base.User != nil {
		pw, _ := c.base.User.Password()
		req.SetBasicAuth(c.base.User.Username(), pw)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s unreachable: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s: %s", method, p, e.Error, e.Reason)
		}
		return fmt.Errorf("%s %s: %s", method, p, resp.Status)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: unexpected answer: %w", method, p, err)
		}
	}
	return nil
}
