package httpgw_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// corsStep is a _config change (cfg set) or a request and the CORS headers
// a browser would see on its answer, as Apache CouchDB 3.5.2 answered it
// (asked 2026-12-01). cors lists every Access-Control-* header the answer
// has: one it does not list must be absent.
type corsStep struct {
	cfg, val string // "section/key": PUT val; val "-": DELETE

	method, path string
	hdr          map[string]string
	host         string // the request's Host, when not the server's
	anon         bool   // no Basic auth (a browser's preflight has none)
	body         string
	saveCookie   bool // keep the AuthSession cookie the answer sets
	useCookie    bool // send it (and no Basic auth)
	status       int
	cors         map[string]string
}

const exposeDefault = "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"

var allMethods = "CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE"

func origin(o string) map[string]string { return map[string]string{"Origin": o} }

func preflight(o, method, headers string) map[string]string {
	h := map[string]string{"Origin": o, "Access-Control-Request-Method": method}
	if headers != "" {
		h["Access-Control-Request-Headers"] = headers
	}
	return h
}

func simple(o string) map[string]string {
	return map[string]string{"Access-Control-Allow-Origin": o, "Access-Control-Expose-Headers": exposeDefault}
}

func simpleCred(o string) map[string]string {
	m := simple(o)
	m["Access-Control-Allow-Credentials"] = "true"
	return m
}

func preflightOK(o, headers string) map[string]string {
	return map[string]string{"Access-Control-Allow-Origin": o, "Access-Control-Max-Age": "600",
		"Access-Control-Allow-Methods": allMethods, "Access-Control-Allow-Headers": headers}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

var none = map[string]string{}

const pouch = "http://localhost:8000" // a PouchDB page's origin

var corsSteps = []corsStep{
	// off by default: an Origin changes nothing, OPTIONS is just a method
	{method: "GET", path: "/", hdr: origin(pouch), status: 200, cors: none},
	{method: "OPTIONS", path: "/", hdr: preflight(pouch, "GET", ""), anon: true, status: 405, cors: none},
	{cfg: "chttpd/enable_cors", val: "true"},
	// on, but no origins: none is accepted
	{method: "GET", path: "/", hdr: origin(pouch), status: 200, cors: none},
	{cfg: "cors/origins", val: "*"},
	{method: "GET", path: "/", status: 200, cors: none},
	// any origin is echoed, not answered "*"
	{method: "GET", path: "/", hdr: origin(pouch), anon: true, status: 200, cors: simple(pouch)},
	{method: "GET", path: "/{db}", hdr: origin(pouch), status: 200, cors: simple(pouch)},
	{method: "GET", path: "/{db}/nope", hdr: origin(pouch), status: 404, cors: simple(pouch)},
	{method: "GET", path: "/_all_dbs", hdr: origin(pouch), anon: true, status: 401, cors: simple(pouch)},
	{method: "PUT", path: "/{db}/doc", body: `{"a":1}`, hdr: origin(pouch), status: 201, cors: simple(pouch)},
	{method: "GET", path: "/{db}/doc", hdr: origin(pouch), status: 200, cors: simple(pouch)},
	{method: "GET", path: "/", hdr: origin("*"), anon: true, status: 200, cors: simple("*")},
	// preflights, before authentication: what PouchDB's PUT, POST and
	// _bulk_docs with JSON and an Authorization header need
	{method: "OPTIONS", path: "/", hdr: preflight(pouch, "GET", ""), anon: true, status: 204, cors: preflightOK(pouch, "")},
	{method: "OPTIONS", path: "/{db}/doc", hdr: preflight(pouch, "PUT", "authorization,content-type"), anon: true,
		status: 204, cors: preflightOK(pouch, "authorization,content-type")},
	{method: "OPTIONS", path: "/{db}/_bulk_docs", hdr: preflight(pouch, "POST", "Content-Type, Authorization"), anon: true,
		status: 204, cors: preflightOK(pouch, "Content-Type, Authorization")},
	{method: "OPTIONS", path: "/{db}", hdr: preflight(pouch, "DELETE", "content-type, accept,"), anon: true,
		status: 204, cors: preflightOK(pouch, "content-type, accept,")},
	// a method or header not allowed: not a preflight, an OPTIONS request
	// (405 from the handler, with the CORS headers of a simple request)
	{method: "OPTIONS", path: "/", hdr: preflight(pouch, "PATCH", ""), anon: true, status: 405, cors: simple(pouch)},
	{method: "OPTIONS", path: "/", hdr: preflight(pouch, "put", ""), anon: true, status: 405, cors: simple(pouch)},
	{method: "OPTIONS", path: "/", hdr: preflight(pouch, "PUT", "content-type,x-foo"), anon: true, status: 405, cors: simple(pouch)},
	// a space before the comma is part of the name
	{method: "OPTIONS", path: "/", hdr: preflight(pouch, "PUT", "content-type ,accept"), anon: true, status: 405, cors: simple(pouch)},
	{method: "OPTIONS", path: "/", hdr: origin(pouch), anon: true, status: 405, cors: simple(pouch)},

	// credentials: for any origin but "*", also with origins = *
	{cfg: "cors/credentials", val: "true"},
	{method: "OPTIONS", path: "/{db}/doc", hdr: preflight(pouch, "PUT", "content-type"), anon: true,
		status: 204, cors: with(preflightOK(pouch, "content-type"), "Access-Control-Allow-Credentials", "true")},
	{method: "GET", path: "/", hdr: origin(pouch), anon: true, status: 200, cors: simpleCred(pouch)},
	{method: "GET", path: "/", hdr: origin("*"), anon: true, status: 200, cors: simple("*")},
	{method: "OPTIONS", path: "/", hdr: preflight("*", "GET", ""), anon: true, status: 204, cors: preflightOK("*", "")},
	// cookie auth from a page: log in, then use the cookie
	{method: "OPTIONS", path: "/_session", hdr: preflight(pouch, "POST", "content-type"), anon: true,
		status: 204, cors: with(preflightOK(pouch, "content-type"), "Access-Control-Allow-Credentials", "true")},
	{method: "POST", path: "/_session", body: `{"name":"{user}","password":"{pw}"}`, hdr: origin(pouch), anon: true,
		saveCookie: true, status: 200, cors: simpleCred(pouch)},
	{method: "GET", path: "/{db}/doc", hdr: origin(pouch), useCookie: true, status: 200, cors: simpleCred(pouch)},
	{method: "POST", path: "/_session", body: `{"name":"nobody","password":"x"}`, hdr: origin(pouch), anon: true,
		status: 401, cors: simpleCred(pouch)},
	{cfg: "cors/credentials", val: "-"},

	// a list: exact, case-sensitive matches only
	{cfg: "cors/origins", val: "http://a.com, https://b.org:8443"},
	{method: "GET", path: "/", hdr: origin("http://a.com"), anon: true, status: 200, cors: simple("http://a.com")},
	{method: "GET", path: "/", hdr: origin("https://b.org:8443"), anon: true, status: 200, cors: simple("https://b.org:8443")},
	{method: "GET", path: "/", hdr: origin("http://A.com"), anon: true, status: 200, cors: none},
	{method: "GET", path: "/", hdr: origin("http://a.com/"), anon: true, status: 200, cors: none},
	{method: "GET", path: "/", hdr: origin("http://c.com"), anon: true, status: 200, cors: none},
	{method: "OPTIONS", path: "/", hdr: preflight("http://c.com", "GET", ""), anon: true, status: 405, cors: none},

	// methods, headers, max_age and exposed_headers replace the defaults
	{cfg: "cors/methods", val: "GET, PUT"},
	{cfg: "cors/headers", val: "Content-Type, X-Foo"},
	{cfg: "cors/max_age", val: "3600"},
	{cfg: "cors/exposed_headers", val: "X-Foo, ETag"},
	{method: "OPTIONS", path: "/", hdr: preflight("http://a.com", "PUT", "x-foo"), anon: true, status: 204,
		cors: map[string]string{"Access-Control-Allow-Origin": "http://a.com", "Access-Control-Max-Age": "3600",
			"Access-Control-Allow-Methods": "GET, PUT", "Access-Control-Allow-Headers": "x-foo"}},
	{method: "OPTIONS", path: "/", hdr: preflight("http://a.com", "POST", ""), anon: true, status: 405,
		cors: map[string]string{"Access-Control-Allow-Origin": "http://a.com", "Access-Control-Expose-Headers": "content-type, cache-control, x-foo, etag"}},
	{method: "OPTIONS", path: "/", hdr: preflight("http://a.com", "GET", "authorization"), anon: true, status: 405,
		cors: map[string]string{"Access-Control-Allow-Origin": "http://a.com", "Access-Control-Expose-Headers": "content-type, cache-control, x-foo, etag"}},
	{cfg: "cors/methods", val: "-"},
	{cfg: "cors/headers", val: "-"},
	{cfg: "cors/max_age", val: "-"},
	{cfg: "cors/exposed_headers", val: "-"},

	// [cors:<host>], chosen by the request's Host without its port; each
	// key falls back to [cors]
	{cfg: "cors:127.0.0.1/origins", val: "http://h.com"},
	{cfg: "cors:127.0.0.1/credentials", val: "true"},
	{method: "GET", path: "/", hdr: origin("http://h.com"), anon: true, status: 200, cors: simpleCred("http://h.com")},
	{method: "GET", path: "/", hdr: origin("http://a.com"), anon: true, status: 200, cors: none},
	{method: "GET", path: "/", hdr: origin("http://h.com"), host: "localhost", anon: true, status: 200, cors: none},
	{method: "GET", path: "/", hdr: origin("http://a.com"), host: "localhost", anon: true, status: 200, cors: simple("http://a.com")},
	{method: "OPTIONS", path: "/", hdr: preflight("http://h.com", "GET", ""), anon: true, status: 204,
		cors: with(preflightOK("http://h.com", ""), "Access-Control-Allow-Credentials", "true")},
	{cfg: "cors:127.0.0.1/origins", val: "-"},
	{cfg: "cors:127.0.0.1/credentials", val: "-"},

	// off again: at the next request
	{cfg: "chttpd/enable_cors", val: "false"},
	{method: "GET", path: "/", hdr: origin("http://a.com"), anon: true, status: 200, cors: none},
	{method: "OPTIONS", path: "/", hdr: preflight("http://a.com", "GET", ""), anon: true, status: 405, cors: none},
}

// runCORS runs steps against base, on a database db the admin made.
func runCORS(t *testing.T, base, user, pw, db string, steps []corsStep) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var cookie string
	for i, st := range steps {
		method, path, body := st.method, st.path, st.body
		if st.cfg != "" {
			method, path, body = "PUT", "/_node/_local/_config/"+st.cfg, fmt.Sprintf("%q", st.val)
			if st.val == "-" {
				method, body = "DELETE", ""
			}
		}
		path = strings.ReplaceAll(path, "{db}", db)
		body = strings.NewReplacer("{user}", user, "{pw}", pw).Replace(body)
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if st.host != "" {
			req.Host = st.host + ":" + u.Port()
		}
		switch {
		case st.useCookie:
			req.Header.Set("Cookie", cookie)
		case !st.anon:
			req.SetBasicAuth(user, pw)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range st.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		where := fmt.Sprintf("step %d: %s %s %v", i, method, path, st.hdr)
		if st.cfg != "" {
			if resp.StatusCode != 200 {
				t.Fatalf("%s: status %d: %s", where, resp.StatusCode, b)
			}
			continue
		}
		if resp.StatusCode != st.status {
			t.Fatalf("%s: status %d, want %d: %s", where, resp.StatusCode, st.status, clip(b))
		}
		for k, vs := range resp.Header {
			if !strings.HasPrefix(k, "Access-Control-") {
				continue
			}
			want, ok := st.cors[k]
			if !ok {
				t.Fatalf("%s: %s %q, want none", where, k, vs)
			}
			if len(vs) != 1 || vs[0] != want {
				t.Fatalf("%s: %s %q, want %q", where, k, vs, want)
			}
		}
		for k := range st.cors {
			if _, ok := resp.Header[k]; !ok {
				t.Fatalf("%s: no %s, want %q", where, k, st.cors[k])
			}
		}
		if st.status == 204 {
			// CouchDB's preflight answer has no body and none of a JSON
			// answer's headers
			if len(b) != 0 || resp.Header.Get("Content-Type") != "" || resp.Header.Get("Cache-Control") != "" {
				t.Fatalf("%s: preflight answer has Content-Type %q, Cache-Control %q, body %q", where,
					resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), b)
			}
		}
		if st.saveCookie {
			for _, c := range resp.Cookies() {
				if c.Name == "AuthSession" {
					cookie = "AuthSession=" + c.Value
				}
			}
			if cookie == "" {
				t.Fatalf("%s: no AuthSession cookie", where)
			}
		}
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/cors", nil, nil)
	runCORS(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "cors", corsSteps)
}

func TestCORSAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	runSteps(t, cs.URL, cs.User, cs.Password, "", []wireStep{{method: "PUT", path: "/cors", status: 201}})
	runCORS(t, cs.URL, cs.User, cs.Password, "cors", corsSteps)
}

// A value a CORS key settee parses cannot take is refused, and nothing
// changes (settee's rule for the keys it honours; CouchDB stores it).
func TestCORSConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, tc := range []struct{ key, val string }{
		{"chttpd/enable_cors", "yes"},
		{"cors/credentials", "1"},
		{"cors/max_age", "-5"},
		{"cors/max_age", "ten"},
	} {
		b, _ := json.Marshal(tc.val)
		mustCall(t, s, 400, "PUT", "/_node/_local/_config/"+tc.key, b, nil)
	}
	mustCall(t, s, 404, "GET", "/_node/_local/_config/chttpd/enable_cors", nil, nil)
}
