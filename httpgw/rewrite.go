package httpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/settee/settee/couchjs"
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

// --- the function form ---------------------------------------------------

// rewriteRunner wraps the rewrite function as a show function: couchjs
// runs it with the design doc as `this` and its modules for require(),
// and what it answered comes back as the show's JSON, tagged as CouchDB's
// query server tags it (["no_dispatch_rule"] or ["ok", rewrite]). The
// source starts on the wrapper's first line, so the function's line
// numbers are its own.
func rewriteRunner(src string) string {
	s := strings.TrimRight(src, " \t\r\n;")
	// names of its own, so that the function sees none of them
	return "function (__rwDoc, __rwReq) { var __rwFun = (" + s + "\n);\n" +
		"var __rw = __rwFun.call(this, __rwReq);\n" +
		"if (!__rw) return {json: ['no_dispatch_rule']};\n" +
		"if (typeof __rw === 'string') __rw = {path: __rw, method: __rwReq.method};\n" +
		"return {json: ['ok', __rw]};\n}"
}

func (g *Gateway) rewriteFunction(rq *req, db, ddocID string, ddoc *policy.Design, src string, n int) error {
	if g.cfg.JS == nil {
		return newErr(500, "internal_error", "no JavaScript here")
	}
	if err := ddoc.JS.Compile(src); err != nil {
		// at run time a function that does not compile is 500 (400 is
		// the answer to saving it)
		var je *couchjs.Error
		if errors.As(err, &je) {
			return newErr(500, je.Code, je.Reason)
		}
		return err
	}
	body, err := g.renderBody(rq)
	if err != nil {
		return err
	}
	jreq, err := g.jsReq(rq, db, textBody(body), nil)
	if err != nil {
		return err
	}
	// CouchDB's rewrite request object has no info, form, uuid or id
	var m map[string]json.RawMessage
	if err := json.Unmarshal(jreq, &m); err != nil {
		return err
	}
	for _, k := range []string{"info", "form", "uuid", "id"} {
		delete(m, k)
	}
	if rq.r.Method == http.MethodHead {
		m["method"] = json.RawMessage(`"GET"`) // CouchDB's handlers see HEAD as GET
	}
	if jreq, err = json.Marshal(m); err != nil {
		return err
	}
	resp, err := ddoc.JS.Show(rq.ctx, rewriteRunner(src), []byte("{}"), jreq)
	if err != nil {
		var je *couchjs.Error
		if errors.As(err, &je) && je.Code == "render_error" && strings.HasPrefix(je.Reason, "function raised error: ") {
			return rewriteErr(je.Reason)
		}
		if errors.As(err, &je) && je.Code == "compilation_error" {
			// the wrapper did not take a source that compiles alone
			return newErr(500, "compilation_error", "Expression does not eval to a function. ("+src+")")
		}
		return renderErr(err)
	}
	var answer []json.RawMessage
	if resp == nil || json.Unmarshal(resp.Body, &answer) != nil || len(answer) == 0 {
		return rewriteErr("bad rewrite")
	}
	if string(answer[0]) == `"no_dispatch_rule"` {
		return errInvalidRewritePath
	}
	if len(answer) < 2 {
		return rewriteErr("bad rewrite")
	}
	fields, ok := orderedObject(answer[1])
	if !ok {
		return rewriteErr("bad rewrite")
	}
	if err := validateRewrite(fields); err != nil {
		return err
	}
	get := func(k string) (json.RawMessage, bool) {
		for _, f := range fields {
			if f.k == k {
				return f.v, true
			}
		}
		return nil, false
	}
	str := func(k string) (string, bool) {
		v, ok := get(k)
		var s string
		if !ok || json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	headers := func() []kv {
		v, _ := get("headers")
		h, _ := orderedObject(v)
		return h
	}
	newBody, hasBody := str("body")
	if !hasBody && body != nil {
		newBody, hasBody = string(body), true
	}
	if code, ok := get("code"); ok {
		var c float64
		_ = json.Unmarshal(code, &c) // checked: an integer in [200, 600)
		return writeRewriteResponse(rq, int(c), headers(), newBody)
	}
	method := rq.r.Method
	if s, ok := str("method"); ok {
		method = s
	}
	path, ok := str("path")
	if !ok {
		return rewriteErr("Rewrite result must produce a new path.")
	}
	target := normalizePath(designPrefix(db, ddocID) + "/" + path)
	var qs []string
	if q, ok := get("query"); ok {
		pairs, _ := orderedObject(q)
		for _, p := range pairs {
			var s string
			_ = json.Unmarshal(p.v, &s)
			qs = append(qs, quotePlus(p.k)+"="+quotePlus(s))
		}
	} else {
		for _, p := range requestQuery(rq.r.URL.RawQuery) {
			qs = append(qs, quotePlus(p.k)+"="+quotePlus(p.s))
		}
	}
	if len(qs) > 0 {
		target += "?" + strings.Join(qs, "&")
	}
	hdr := rq.r.Header.Clone()
	h := headers()
	for _, p := range h {
		var s string
		_ = json.Unmarshal(p.v, &s)
		hdr.Set(p.k, s)
	}
	var b []byte
	if hasBody {
		b = []byte(newBody)
	}
	// CouchDB hands its handlers HEAD as GET; a rewrite that names HEAD
	// is served (and answered) as a GET
	if method == http.MethodHead && rq.r.Method != http.MethodHead {
		method = http.MethodGet
	}
	return g.dispatchRewrite(rq, method, target, hdr, b, hasBody, len(h) > 0, n)
}

// validateRewrite checks a function's answer as couch_query_servers does,
// member by member in the order the function wrote them.
func validateRewrite(fields []kv) error {
	isString := func(v json.RawMessage) bool { return len(v) > 0 && v[0] == '"' }
	for _, f := range fields {
		switch f.k {
		case "method", "path", "body":
			if !isString(f.v) {
				return rewriteErr("bad " + f.k)
			}
		case "headers", "query":
			obj, ok := orderedObject(f.v)
			if !ok {
				return rewriteErr("bad " + f.k)
			}
			for _, p := range obj {
				if !isString(p.v) {
					return rewriteErr("object key/value must be strings " + erlTerm([]byte(strconv.Quote(p.k))) + "=" + erlTerm(p.v))
				}
			}
		case "code":
			var c float64
			if json.Unmarshal(f.v, &c) != nil || c != math.Trunc(c) || c < 200 || c >= 600 {
				return rewriteErr("bad code")
			}
		}
	}
	return nil
}

// writeRewriteResponse sends a function's {code, headers, body} as
// CouchDB's send_response does: those headers only (no Content-Type of
// its own).
func writeRewriteResponse(rq *req, code int, headers []kv, body string) error {
	rawAnswer(rq)
	h := rq.w.Header()
	h["Content-Type"] = nil // no sniffing: CouchDB sends none
	for _, p := range headers {
		var s string
		_ = json.Unmarshal(p.v, &s)
		h.Set(p.k, s)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rq.w.WriteHeader(code)
	if rq.r.Method != http.MethodHead {
		_, _ = io.WriteString(rq.w, body)
	}
	return nil
}

// --- the rules form ------------------------------------------------------

// rwPart is a segment of a rule's from or to: a literal, a ":var" binding
// or "*".
type rwPart struct {
	lit  string
	bind bool // lit is the variable's name
	all  bool
}

type rwRule struct {
	from, to []rwPart
	method   string // "" any
	query    []kv
	formats  map[string]string
}

// rwVal is a bound value: a string from the path or the query string, or
// (for key-like parameters, and values a format or the rule's query made)
// any JSON value.
type rwVal struct {
	s    string
	json json.RawMessage // set: the value is this JSON, not s
}

type binding struct {
	k string
	v rwVal
}

// rwJSONParam: the query parameters CouchDB decodes from JSON before
// binding and encodes again after.
func rwJSONParam(k string) bool {
	switch k {
	case "key", "startkey", "start_key", "endkey", "end_key", "keys":
		return true
	}
	return false
}

// parseRulePath reads a rule's from or to; its third ".." is refused
// (chttpd/secure_rewrites).
func (g *Gateway) parseRulePath(p string) ([]rwPart, error) {
	var out []rwPart
	dots := 0
	for _, s := range strings.Split(p, "/") {
		switch {
		case s == "":
		case s == "*":
			out = append(out, rwPart{all: true})
		case s == "..":
			if dots == 2 && g.secureRewrites() {
				return nil, newErr(500, "insecure_rewrite_rule", "too many ../.. segments")
			}
			dots++
			out = append(out, rwPart{lit: s})
		case s[0] == ':':
			out = append(out, rwPart{lit: s[1:], bind: true})
		default:
			out = append(out, rwPart{lit: s})
		}
	}
	return out, nil
}

func (g *Gateway) rewriteRules(rq *req, db, ddocID string, raw json.RawMessage, rest []string, n int) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return errInvalidRewritePath
	}
	// every rule is read before any is matched (CouchDB's dispatch
	// list): a bad rule refuses every path
	var rules []rwRule
	for _, it := range items {
		fields, ok := orderedObject(it)
		if !ok {
			continue // CouchDB's comprehension skips what is no object
		}
		var rl rwRule
		var from, to *string
		methodSet := false
		for _, f := range fields {
			var s string
			isStr := json.Unmarshal(f.v, &s) == nil
			switch f.k {
			case "method":
				if !methodSet {
					methodSet = true
					// a method that is no string matches no request
					rl.method = "\x00"
					if isStr {
						rl.method = s
					}
				}
			case "query":
				if rl.query == nil {
					rl.query, _ = orderedObject(f.v)
				}
			case "from", "to":
				p := &from
				if f.k == "to" {
					p = &to
				}
				if *p == nil {
					if !isStr {
						return errBadarg // CouchDB's re:split of a non-string
					}
					*p = &s
				}
			case "formats":
				if rl.formats == nil {
					rl.formats = map[string]string{}
					fm, _ := orderedObject(f.v)
					for _, p := range fm {
						var fs string
						if json.Unmarshal(p.v, &fs) == nil {
							if _, seen := rl.formats[p.k]; !seen {
								rl.formats[p.k] = fs
							}
						}
					}
				}
			}
		}
		if from == nil {
			rl.from = []rwPart{{all: true}}
		} else {
			var err error
			if rl.from, err = g.parseRulePath(*from); err != nil {
				return err
			}
		}
		if to == nil {
			return newErr(500, "error", "invalid_rewrite_target")
		}
		var err error
		if rl.to, err = g.parseRulePath(*to); err != nil {
			return err
		}
		rules = append(rules, rl)
	}
	var parts []string
	for _, s := range rest {
		if s != "" {
			parts = append(parts, s)
		}
	}
	var query []binding
	for _, p := range requestQuery(rq.r.URL.RawQuery) {
		v := rwVal{s: p.s}
		if rwJSONParam(p.k) {
			if !json.Valid([]byte(p.s)) {
				return badRequest("invalid UTF-8 JSON")
			}
			v = rwVal{json: json.RawMessage(p.s)}
		}
		query = append(query, binding{p.k, v})
	}
	for _, rl := range rules {
		if rl.method != "" && rl.method != "*" && rl.method != rq.r.Method {
			continue
		}
		remaining, bound, ok := bindPath(rl.from, parts)
		if !ok {
			continue
		}
		target, err := rl.target(remaining, append(bound, query...))
		if err != nil {
			return err
		}
		target = normalizePath(designPrefix(db, ddocID) + "/" + target)
		return g.dispatchRewrite(rq, rq.r.Method, target, rq.r.Header, nil, false, false, n)
	}
	return errMissing
}

// bindPath matches a rule's from against the path: the path left for a
// trailing "*", the bindings (the last bound first, as CouchDB keeps them).
func bindPath(from []rwPart, path []string) ([]string, []binding, bool) {
	var bound []binding
	for i, p := range from {
		if p.all && i == len(from)-1 {
			return path, bound, true
		}
		if len(path) == 0 {
			return nil, nil, false
		}
		switch {
		case p.all:
			// a "*" before the end binds the segment to "*"
			bound = append([]binding{{"*", rwVal{s: path[0]}}}, bound...)
		case p.bind:
			bound = append([]binding{{p.lit, rwVal{s: path[0]}}}, bound...)
		case p.lit != path[0]:
			return nil, nil, false
		}
		path = path[1:]
	}
	if len(path) > 0 {
		return nil, nil, false
	}
	return nil, bound, true
}

func lookup(bs []binding, k string) (rwVal, bool) {
	for _, b := range bs {
		if b.k == k {
			return b.v, true
		}
	}
	return rwVal{}, false
}

// target is the rule's to with the bindings put in, and its query string.
func (rl rwRule) target(remaining []string, bindings []binding) (string, error) {
	getVar := func(name string, dflt rwVal) rwVal {
		v, ok := lookup(bindings, name)
		if !ok {
			v = dflt
		}
		return format(rl.formats[name], v)
	}
	replace := func(s string) rwVal {
		switch {
		case s == "*":
			return getVar("*", rwVal{s: s})
		case strings.HasPrefix(s, ":"):
			return getVar(s[1:], rwVal{s: s})
		}
		return rwVal{s: s}
	}
	// the rule's query, in reverse as CouchDB accumulates it
	var qargs []binding
	for _, q := range rl.query {
		var v rwVal
		var s string
		var arr []json.RawMessage
		switch {
		case json.Unmarshal(q.v, &s) == nil:
			v = replace(s)
		case json.Unmarshal(q.v, &arr) == nil:
			out := make([]json.RawMessage, len(arr))
			for i, e := range arr {
				out[i] = e
				if json.Unmarshal(e, &s) == nil && strings.HasPrefix(s, ":") {
					out[i] = getVar(s[1:], rwVal{s: s}).asJSON()
				}
			}
			v.json, _ = json.Marshal(out)
		default:
			v.json = q.v
		}
		qargs = append([]binding{{q.k, v}}, qargs...)
	}
	var final []binding
	for _, b := range bindings {
		if _, ok := lookup(qargs, b.k); !ok {
			final = append(final, b)
		}
	}
	final = append(final, qargs...)

	var segs []string
	for _, p := range rl.to {
		if p.all {
			segs = append(segs, remaining...)
			break
		}
		if !p.bind {
			segs = append(segs, p.lit)
			continue
		}
		v, ok := lookup(final, p.lit)
		if !ok {
			segs = append(segs, "undefined")
			continue
		}
		s, err := v.iolist()
		if err != nil {
			return "", err
		}
		segs = append(segs, s)
	}
	for i, s := range segs {
		segs[i] = quotePath(s)
	}
	path := strings.Join(segs, "/")
	var qs []string
	for i := len(final) - 1; i >= 0; i-- {
		b := final[i]
		if b.k == "*" {
			continue
		}
		var s string
		if rwJSONParam(b.k) {
			s = string(b.v.asJSON())
		} else {
			var err error
			if s, err = b.v.iolist(); err != nil {
				return "", err
			}
		}
		qs = append(qs, quotePlus(b.k)+"="+quotePlus(s))
	}
	if len(qs) > 0 {
		path += "?" + strings.Join(qs, "&")
	}
	return path, nil
}

// format applies a rule's formats member: "int" and "bool" turn a string
// into a number or a boolean when it is one.
func format(f string, v rwVal) rwVal {
	if v.json != nil {
		return v
	}
	switch f {
	case "int":
		if i, err := strconv.ParseInt(v.s, 10, 64); err == nil {
			return rwVal{json: json.RawMessage(strconv.FormatInt(i, 10))}
		}
	case "bool":
		switch strings.ToLower(v.s) {
		case "true":
			return rwVal{json: json.RawMessage("true")}
		case "false":
			return rwVal{json: json.RawMessage("false")}
		}
	}
	return v
}

func (v rwVal) asJSON() json.RawMessage {
	if v.json != nil {
		return v.json
	}
	b, _ := json.Marshal(v.s)
	return b
}

// iolist is a value put into a path or a plain query parameter: a
// string, or an array of strings joined; anything else is Erlang's
// badarg, as CouchDB answers it.
func (v rwVal) iolist() (string, error) {
	if v.json == nil {
		return v.s, nil
	}
	var s string
	if json.Unmarshal(v.json, &s) == nil {
		return s, nil
	}
	var arr []string
	if json.Unmarshal(v.json, &arr) == nil {
		return strings.Join(arr, ""), nil
	}
	return "", errBadarg
}

// errBadarg is Erlang's badarg as CouchDB answers it (without the "ref"
// of its stack hash).
var errBadarg = newErr(500, "unknown_error", "badarg")

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
