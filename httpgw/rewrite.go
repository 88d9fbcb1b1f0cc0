package httpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/settee/settee/policy"
)

// /db/_design/d/_rewrite/path…: the design doc's `rewrites` turns the
// request into another one, which is then served here as if a client had
// sent it (CouchDB's chttpd_rewrite, 3.5.2):
//
//   - a JavaScript function(req) (the form CouchDB 3.x documents) answers
//     {path, query, method, headers, body} (or a string path, or {code,
//     headers, body}: that response itself), or something false for
//     404 rewrite_error "Invalid path.";
//   - an array of rules {from, to, method, query, formats}, ":var" and "*"
//     bound from the path and put into `to` and `query` (the legacy form).
//
// A relative path resolves against /db/_design/d, "../../" reaches the
// database, and a function may go further up (another database, the
// server's own endpoints) as CouchDB's may; a rule's third "../" is 500
// insecure_rewrite_rule (chttpd/secure_rewrites, true by default). A
// request is rewritten at most chttpd/rewrite_limit times (100), then 400
// "Exceeded rewrite recursion limit".

// rewriteCountKey carries how often the client's request was rewritten
// (CouchDB's couch_rewrite_count, kept per request).
type rewriteCountKey struct{}

func rewriteCount(ctx context.Context) int {
	n, _ := ctx.Value(rewriteCountKey{}).(int)
	return n
}

// chttpdConfig is a chttpd key, httpd's as a fallback (CouchDB's
// chttpd_util:get_chttpd_config).
func (g *Gateway) chttpdConfig(key string) string {
	if g.cfg.Settings == nil {
		return ""
	}
	for _, s := range []string{"chttpd", "httpd"} {
		if v, err := g.cfg.Settings.ConfigValue(s, key); err == nil && v != "" {
			return v
		}
	}
	return ""
}

// maxRewriteLimit bounds chttpd/rewrite_limit: each rewrite serves the
// next request inside the last one, on the same goroutine's stack.
const maxRewriteLimit = 1000

func (g *Gateway) rewriteLimit() int {
	if n, err := strconv.Atoi(strings.TrimSpace(g.chttpdConfig("rewrite_limit"))); err == nil {
		return min(n, maxRewriteLimit)
	}
	return 100
}

func (g *Gateway) secureRewrites() bool {
	return strings.TrimSpace(g.chttpdConfig("secure_rewrites")) != "false"
}

var errInvalidRewritePath = newErr(404, "rewrite_error", "Invalid path.")

func rewriteErr(reason string) error { return newErr(500, "rewrite_error", reason) }

// handleRewrite is /db/_design/d/_rewrite[/path…].
func (g *Gateway) handleRewrite(rq *req, db, ddocID string, rest []string) error {
	n := rewriteCount(rq.ctx)
	if n >= g.rewriteLimit() {
		return badRequest("Exceeded rewrite recursion limit")
	}
	ddoc, err := g.pol.Design(rq.ctx, db, ddocID)
	if err == policy.ErrDesignDeleted {
		return errDeleted
	}
	if err != nil {
		return errMissing
	}
	raw := bytes.TrimSpace(ddoc.Members["rewrites"])
	switch {
	case len(raw) > 0 && raw[0] == '[':
		return g.rewriteRules(rq, db, ddocID, raw, rest, n)
	case len(raw) > 0 && raw[0] == '"':
		var src string
		if err := json.Unmarshal(raw, &src); err != nil {
			return errInvalidRewritePath
		}
		return g.rewriteFunction(rq, db, ddocID, ddoc, src, n)
	}
	return errInvalidRewritePath
}

// designPrefix is /db/_design/name, escaped as CouchDB's path_prefix.
func designPrefix(db, ddocID string) string {
	return "/" + quotePlus(db) + "/_design/" + quotePlus(strings.TrimPrefix(ddocID, "_design/"))
}

// --- dispatching ---------------------------------------------------------

// dispatchRewrite serves the rewritten request: a new request on the same
// connection, authenticated again when the rewrite gave headers, its
// timeout by its own path.
func (g *Gateway) dispatchRewrite(rq *req, method, target string, hdr http.Header, body []byte, hasBody, newHeaders bool, n int) error {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return badRequest("invalid path")
	}
	segs, err := splitPath(u.EscapedPath())
	if err != nil {
		return badRequest("invalid path")
	}
	ctx := context.WithValue(rq.r.Context(), rewriteCountKey{}, n+1)
	timeout := g.cfg.RequestTimeout
	if g.cfg.Settings != nil {
		timeout = g.cfg.Settings.RequestTimeout()
	}
	r2 := rq.r.Clone(ctx)
	r2.Method = method
	r2.URL = u
	r2.RequestURI = target
	r2.Header = hdr
	if hasBody {
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		r2.Header.Set("Content-Length", strconv.Itoa(len(body)))
		r2.Header.Del("Content-Encoding")
	}
	if timeout > 0 && !longRequest(r2) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		r2 = r2.WithContext(ctx)
	}
	nrq := &req{w: rq.w, r: r2, ctx: ctx, g: g, user: rq.user, segs: segs, q: u.Query()}
	// what the rewritten request's reads were charged goes back with it
	defer nrq.release()
	if newHeaders {
		user, err := g.auth.authenticate(nrq)
		if err != nil {
			return err
		}
		nrq.user = user
	}
	return g.route(nrq)
}

// --- paths and JSON --------------------------------------------------------

// normalizePath drops empty and "." segments and resolves "..", as
// CouchDB's normalize_path (a ".." above the root stays).
func normalizePath(p string) string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(out) == 0 || out[len(out)-1] == ".." {
				out = append(out, s)
			} else {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// quotePlus is mochiweb's quote_plus: letters, digits and "~_.-" kept,
// space as "+", every other byte %XX.
func quotePlus(s string) string {
	return url.QueryEscape(s)
}

// quotePath escapes a path segment: quote_plus, but a space as %20 (this
// server reads a "+" in a path as itself).
func quotePath(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// qpair is a query string parameter, decoded, in the request's order.
type qpair struct{ k, s string }

func requestQuery(raw string) []qpair {
	var out []qpair
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		ku, err1 := url.QueryUnescape(k)
		vu, err2 := url.QueryUnescape(v)
		if err1 != nil {
			ku = k
		}
		if err2 != nil {
			vu = v
		}
		out = append(out, qpair{ku, vu})
	}
	return out
}

// kv is a member of a JSON object, in the object's order.
type kv struct {
	k string
	v json.RawMessage
}

// orderedObject reads a JSON object's members in order; false when b is
// no object.
func orderedObject(b json.RawMessage) ([]kv, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []kv
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, kv{k, v})
	}
	return out, true
}

// erlTerm prints a JSON value as Erlang's ~p prints CouchDB's decoding of
// it (strings as binaries, objects as {[{K,V}]}), for the reasons that
// quote a value.
func erlTerm(b json.RawMessage) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "undefined"
	}
	switch b[0] {
	case '"':
		var s string
		_ = json.Unmarshal(b, &s)
		q, _ := json.Marshal(s)
		return "<<" + string(q) + ">>"
	case '{':
		fields, _ := orderedObject(b)
		var parts []string
		for _, f := range fields {
			parts = append(parts, "{"+erlTerm([]byte(strconv.Quote(f.k)))+","+erlTerm(f.v)+"}")
		}
		return "{[" + strings.Join(parts, ",") + "]}"
	case '[':
		var arr []json.RawMessage
		_ = json.Unmarshal(b, &arr)
		parts := make([]string, len(arr))
		for i, e := range arr {
			parts[i] = erlTerm(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	var f float64
	if json.Unmarshal(b, &f) == nil && !bytes.ContainsAny(b, ".eE") {
		return string(b)
	} else if err := json.Unmarshal(b, &f); err == nil {
		return fmt.Sprint(f)
	}
	return string(b) // true, false, null: atoms
}
