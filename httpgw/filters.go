package httpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/settee/settee/couchjs"
)

// jsReq is the request object CouchDB hands a design-doc function (its
// chttpd_external:json_req_obj): info (the database's), uuid, id, method,
// requested_path (the raw URI split on "/", the query in its last part),
// path, raw_path, query, headers, body (a JSON value: the body as a
// string, "undefined" without one, the parsed object for _changes), peer,
// form (a urlencoded body's fields), cookie, userCtx and secObj.
func (g *Gateway) jsReq(rq *req, db string, body json.RawMessage, id any) ([]byte, error) {
	query := map[string]string{}
	for k, v := range rq.q {
		query[k] = v[len(v)-1]
	}
	headers := map[string]string{}
	for k, v := range rq.r.Header {
		if len(v) > 0 {
			headers[k] = v[0]
		}
	}
	if rq.r.Host != "" {
		headers["Host"] = rq.r.Host // net/http keeps it out of Header
	}
	cookies := map[string]string{}
	for _, c := range rq.r.Cookies() {
		cookies[c.Name] = c.Value
	}
	form := map[string]string{}
	if ct, _, _ := strings.Cut(rq.r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) == "application/x-www-form-urlencoded" {
		var s string
		if json.Unmarshal(body, &s) == nil {
			if vs, err := url.ParseQuery(s); err == nil {
				for k, v := range vs {
					form[k] = v[len(v)-1]
				}
			}
		}
	}
	peer, _, _ := net.SplitHostPort(rq.r.RemoteAddr)
	var info json.RawMessage = []byte("{}")
	if b, err := g.dbInfo(rq, db); err == nil {
		info = b
	}
	path := strings.Split(strings.Trim(rq.r.URL.Path, "/"), "/")
	raw := rq.r.URL.RequestURI()
	return json.Marshal(map[string]any{
		"info": info, "uuid": uuids.next(), "id": id, "method": rq.r.Method,
		"requested_path": strings.Split(strings.Trim(raw, "/"), "/"), "path": path, "raw_path": raw,
		"query": query, "headers": headers, "body": body, "peer": peer, "form": form,
		"cookie": cookies, "userCtx": json.RawMessage(userCtxJSON(rq, db)), "secObj": json.RawMessage(g.secObj(rq, db)),
	})
}

// changesDocFilter is the row filter of filter=ddoc/name (the design doc's
// JavaScript filter with the request) or filter=_view (a doc passes when
// the view's map function emits for it).
func (g *Gateway) changesDocFilter(rq *req, db string, c *changesReq) (func(context.Context, []byte) (bool, error), error) {
	if g.cfg.JS == nil {
		return nil, newErr(500, "internal_error", "no JavaScript here")
	}
	names := c.jsFilter
	member := "filters"
	if c.viewFilter != nil {
		names, member = c.viewFilter, "views"
	}
	ddoc, err := g.pol.Design(rq.ctx, db, "_design/"+names[0])
	if err != nil {
		return nil, errMissing
	}
	raw, ok := ddoc.Func(member, names[1])
	if !ok {
		return nil, newErr(404, "not_found", "missing json key: "+names[1])
	}
	if c.viewFilter != nil {
		var v struct {
			Map string `json:"map"`
		}
		if err := json.Unmarshal(raw, &v); err != nil || v.Map == "" {
			return nil, newErr(404, "not_found", "missing json key: map")
		}
		var lib map[string]any
		if raw, ok := ddoc.Func("views", "lib"); ok {
			_ = json.Unmarshal(raw, &lib)
		}
		ms, err := ddoc.JS.NewMapSet([]string{v.Map}, lib)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, doc []byte) (bool, error) {
			out, err := ms.MapDocs(ctx, [][]byte{doc})
			if err != nil {
				return false, err
			}
			return len(out) > 0 && len(out[0]) > 0 && len(out[0][0]) > 0, nil
		}, nil
	}
	var src string
	if err := json.Unmarshal(raw, &src); err != nil {
		return nil, badRequest("filter " + names[1] + " is not a string")
	}
	// a POST's body is req.body as the parsed JSON (CouchDB 3.5.2); it
	// picks the rows as much as the query does, so it goes into the ETag
	body := json.RawMessage(`"undefined"`)
	if rq.r.Method == http.MethodPost && len(c.body) > 0 {
		body = c.body // an object: parseChanges checked it
	}
	jreq, err := g.jsReq(rq, db, body, nil)
	if err != nil {
		return nil, err
	}
	fd := ddoc.JS
	return func(ctx context.Context, doc []byte) (bool, error) {
		out, err := fd.Filter(ctx, src, [][]byte{doc}, jreq)
		if err != nil {
			return false, filterErr(err)
		}
		return len(out) > 0 && out[0], nil
	}, nil
}

// filterErr is a filter's failure as CouchDB answers it: 500 "error" with
// the JavaScript error's name first in Erlang's words.
func filterErr(err error) error {
	var je *couchjs.Error
	if errors.As(err, &je) {
		return newErr(500, "error", fmt.Sprintf("{<<%q>>,%q}", je.Code, je.Reason))
	}
	return err
}
