package httpgw

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/policy"
)

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
