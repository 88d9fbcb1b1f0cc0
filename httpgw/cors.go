package httpgw

import (
	"net/http"
	"slices"
	"strings"
)

// CORS as CouchDB 3.5.2's chttpd_cors.erl does it: chttpd/enable_cors
// turns it on; [cors] (and [cors:<host>], chosen by the request's Host,
// each key falling back to [cors]) says which origins, methods and
// headers. The answers, including their quirks, are CouchDB's own:
//
//   - an accepted origin is echoed, never answered with "*", also when
//     origins = * (so credentials = true works with *);
//   - Access-Control-Allow-Credentials is never sent to the origin "*";
//   - a preflight (OPTIONS with Origin and Access-Control-Request-Method)
//     whose method or headers are not allowed is not a preflight: it goes
//     on to authentication and the handler like any OPTIONS request;
//   - a preflight's Access-Control-Allow-Headers echoes the requested
//     headers as they were sent, and Allow-Methods lists every method;
//   - no Vary: Origin.

// The defaults of chttpd_cors.hrl.
var (
	corsSupportedHeaders = []string{"accept", "accept-language", "authorization", "content-length",
		"content-range", "content-type", "destination", "expires", "if-match", "last-modified", "origin",
		"pragma", "x-couch-full-commit", "x-couch-id", "x-couch-persist", "x-couchdb-www-authenticate",
		"x-http-method-override", "x-requested-with", "x-couchdb-vhost-path"}
	corsSupportedMethods = []string{"CONNECT", "COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "TRACE"}
	corsCouchHeaders     = []string{"accept-ranges", "etag", "server", "x-couch-request-id",
		"x-couch-update-newrev", "x-couchdb-body-time"}
	// the simple response headers a browser shows a script anyway, which
	// CouchDB lists again when the response has them (content-type always,
	// first: a quirk of its code, kept)
	corsSimpleHeaders = []string{"cache-control", "content-language", "expires", "last-modified", "pragma"}
)

const corsDefaultMaxAge = "600"

// corsConf is one [cors] (or [cors:<host>]) section, parsed.
type corsConf struct {
	anyOrigin   bool
	origins     []string
	credentials bool
	methods     []string
	allowMethod string // methods joined as CouchDB sends them
	headers     []string
	expose      []string // exposed_headers, lower case
	maxAge      string
}

// corsSnapshot is the CORS settings of one _config generation.
type corsSnapshot struct {
	gen     uint64
	enabled bool
	base    *corsConf
	hosts   map[string]*corsConf // [cors:<host>] sections
}

// corsSettings is the snapshot for the current _config generation: one
// atomic load and a compare, parsed again only after a _config write.
func (g *Gateway) corsSettings() *corsSnapshot {
	st := g.cfg.Settings
	if st == nil {
		return nil
	}
	gen := st.ConfigGeneration()
	if s := g.corsSnap.Load(); s != nil && s.gen == gen {
		return s
	}
	// the generation is read before the sections: a write racing with this
	// parse moves it on, and the next request parses again
	s := parseCORS(st, gen)
	g.corsSnap.Store(s)
	return s
}

func parseCORS(st Settings, gen uint64) *corsSnapshot {
	s := &corsSnapshot{gen: gen}
	v, _ := st.ConfigValue("chttpd", "enable_cors")
	if s.enabled = strings.TrimSpace(v) == "true"; !s.enabled {
		return s
	}
	base, _ := st.ConfigSection("cors")
	s.base = parseCORSSection(base)
	for _, name := range st.ConfigSections() {
		host, ok := strings.CutPrefix(name, "cors:")
		if !ok {
			continue
		}
		sec, _ := st.ConfigSection(name)
		merged := make(map[string]string, len(base)+len(sec))
		for k, v := range base {
			merged[k] = v
		}
		for k, v := range sec {
			merged[k] = v
		}
		if s.hosts == nil {
			s.hosts = map[string]*corsConf{}
		}
		s.hosts[host] = parseCORSSection(merged)
	}
	return s
}

func parseCORSSection(sec map[string]string) *corsConf {
	get := func(k string) (string, bool) {
		v, ok := sec[k]
		return strings.TrimSpace(v), ok
	}
	c := &corsConf{methods: corsSupportedMethods, headers: corsSupportedHeaders, expose: corsCouchHeaders, maxAge: corsDefaultMaxAge}
	if v, ok := get("origins"); ok {
		c.origins = corsSplitList(v)
		c.anyOrigin = slices.Contains(c.origins, "*")
	}
	v, _ := get("credentials")
	c.credentials = v == "true"
	if v, ok := get("methods"); ok {
		c.methods = corsSplitList(v)
	}
	if v, ok := get("headers"); ok {
		c.headers = lowerAll(corsSplitList(v))
	}
	if v, ok := get("exposed_headers"); ok {
		c.expose = lowerAll(corsSplitList(v))
	}
	if v, ok := get("max_age"); ok {
		c.maxAge = v
	}
	c.allowMethod = strings.Join(c.methods, ", ")
	return c
}

// corsSplitList is CouchDB's split_list: re:split(S, "\\s*,\\s*", [trim]),
// which keeps empty items but drops trailing ones.
func corsSplitList(s string) []string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return trimTrailingEmpty(parts)
}

// corsSplitHeaders is CouchDB's split_headers for a preflight's
// Access-Control-Request-Headers: re:split(H, ",\\s*", [trim]), so a space
// before a comma stays part of the name (and that name is not allowed).
func corsSplitHeaders(s string) []string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if i > 0 {
			p = strings.TrimLeft(p, " \t\r\n\f\v")
		}
		parts[i] = strings.ToLower(p)
	}
	return trimTrailingEmpty(parts)
}

func trimTrailingEmpty(parts []string) []string {
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func lowerAll(s []string) []string {
	for i := range s {
		s[i] = strings.ToLower(s[i])
	}
	return s
}

// corsHost is the host whose [cors:<host>] section applies: CouchDB's
// vhost host (X-Forwarded-Host, else Host), without scheme or port.
func corsHost(r *http.Request) string {
	h := r.Header.Get("X-Forwarded-Host")
	if h == "" {
		h = r.Host
	}
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h, _, _ = strings.Cut(h, ":")
	return h
}

// cors applies the CORS settings to a request before it is
// authenticated: it answers a preflight (true: nothing more to do) or
// adds the headers an accepted origin gets to the response.
func (g *Gateway) cors(rq *req, sr *statusRecorder) bool {
	s := g.corsSettings()
	if s == nil || !s.enabled {
		return false
	}
	r := rq.r
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	c := s.base
	if s.hosts != nil {
		if hc, ok := s.hosts[corsHost(r)]; ok {
			c = hc
		}
	}
	if !c.anyOrigin && !slices.Contains(c.origins, origin) {
		return false
	}
	h := rq.w.Header()
	if r.Method == http.MethodOptions && g.corsPreflight(rq, c, origin) {
		return true
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if c.credentials && origin != "*" {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	sr.expose = c.expose
	return false
}

// corsPreflight answers a preflight whose method and headers are allowed
// with CouchDB's 204; false when the request is not such a preflight.
func (g *Gateway) corsPreflight(rq *req, c *corsConf, origin string) bool {
	r := rq.r
	method, ok := r.Header["Access-Control-Request-Method"]
	if !ok || len(method) == 0 || !slices.Contains(c.methods, method[0]) {
		return false
	}
	reqHeaders := r.Header.Get("Access-Control-Request-Headers")
	if reqHeaders != "" {
		for _, name := range corsSplitHeaders(reqHeaders) {
			if !slices.Contains(c.headers, name) {
				return false
			}
		}
	}
	h := rq.w.Header()
	// CouchDB's preflight answer is sent without its usual headers
	h.Del("Cache-Control")
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Max-Age", c.maxAge)
	h.Set("Access-Control-Allow-Methods", c.allowMethod)
	h.Set("Access-Control-Allow-Headers", reqHeaders)
	if c.credentials && origin != "*" {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Content-Length", "0")
	rq.w.WriteHeader(http.StatusNoContent)
	return true
}

// exposeHeaders sets Access-Control-Expose-Headers as the response is
// about to be sent, from the headers it has then (CouchDB lists the
// simple ones the response carries, then its own).
func exposeHeaders(h http.Header, couch []string) {
	list := make([]string, 0, 2+len(couch))
	list = append(list, "content-type")
	for _, name := range corsSimpleHeaders {
		if _, ok := h[http.CanonicalHeaderKey(name)]; ok {
			list = append(list, name)
		}
	}
	list = append(list, couch...)
	h.Set("Access-Control-Expose-Headers", strings.Join(list, ", "))
}
