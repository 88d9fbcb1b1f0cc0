package httpgw

import (
	"context"
	"encoding/json"
	"net"
	"strings"

	pb "github.com/settee/settee/proto"
)

// jsReq is the request object CouchDB hands a design-doc function (its
// chttpd_external:json_req_obj): method, paths, query, headers, body,
// peer, cookies, the user and the database's security.
func (g *Gateway) jsReq(rq *req, db string, body []byte, id any) ([]byte, error) {
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
	cookies := map[string]string{}
	for _, c := range rq.r.Cookies() {
		cookies[c.Name] = c.Value
	}
	peer, _, _ := net.SplitHostPort(rq.r.RemoteAddr)
	user := map[string]any{"db": db, "name": nil, "roles": []string{}}
	if rq.user != nil {
		user["name"], user["roles"] = rq.user.Name, rq.user.Roles
	}
	var sec json.RawMessage = []byte("{}")
	if info, err := g.c.DBInfo(rq.ctx, db); err == nil && len(info.Meta.Security) > 0 {
		sec = info.Meta.Security
	}
	var info json.RawMessage = []byte("{}")
	if b, err := g.dbInfo(rq, db); err == nil {
		info = b
	}
	var bodyV any = "undefined"
	if len(body) > 0 {
		bodyV = string(body)
	}
	path := strings.Split(strings.Trim(rq.r.URL.Path, "/"), "/")
	raw := rq.r.URL.RequestURI()
	return json.Marshal(map[string]any{
		"info": info, "uuid": uuids.next(), "id": id, "method": rq.r.Method,
		"requested_path": strings.Split(strings.Trim(raw, "/"), "/"), "path": path, "raw_path": raw,
		"query": query, "headers": headers, "body": bodyV, "peer": peer, "form": map[string]string{},
		"cookie": cookies, "userCtx": user, "secObj": sec,
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
	ddocID := "_design/" + names[0]
	r, err := g.c.GetDocR(rq.ctx, db, &pb.GetDoc{Id: ddocID}, 1)
	if err != nil || r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || r.Bodies[0].Deleted {
		return nil, errMissing
	}
	var ddoc map[string]json.RawMessage
	if err := json.Unmarshal(r.Bodies[0].Json, &ddoc); err != nil {
		return nil, errMissing
	}
	var fns map[string]json.RawMessage
	_ = json.Unmarshal(ddoc[member], &fns)
	raw, ok := fns[names[1]]
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
		var views map[string]json.RawMessage
		_ = json.Unmarshal(ddoc["views"], &views)
		_ = json.Unmarshal(views["lib"], &lib)
		ms, err := g.cfg.JS.NewMapSet([]string{v.Map}, lib)
		if err != nil {
			return nil, jsErr(err)
		}
		return func(ctx context.Context, doc []byte) (bool, error) {
			out, err := ms.MapDocs(ctx, [][]byte{doc})
			if err != nil {
				return false, jsErr(err)
			}
			return len(out) > 0 && len(out[0]) > 0 && len(out[0][0]) > 0, nil
		}, nil
	}
	var src string
	if err := json.Unmarshal(raw, &src); err != nil {
		return nil, badRequest("filter " + names[1] + " is not a string")
	}
	jreq, err := g.jsReq(rq, db, c.body, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, doc []byte) (bool, error) {
		out, err := g.cfg.JS.Filter(ctx, src, [][]byte{doc}, jreq)
		if err != nil {
			return false, jsErr(err)
		}
		return len(out) > 0 && out[0], nil
	}, nil
}
