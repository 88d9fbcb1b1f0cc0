// Package console is settee's web console, served by every node at
// /_utils/: server-rendered HTML pages (html/template) over the node's own
// HTTP API, with a little plain JavaScript for the live parts (active
// tasks, replication states, the metrics graphs) and no external network.
//
// The console holds no data access of its own: every page is built from
// in-process calls to the API handler it is given (Config.API), each a new
// request on the same paths a client would use and carrying the browser's
// AuthSession cookie or Authorization header. So nothing is shown or
// changed that the user's API rights would not allow, and the API's errors
// are shown as the API gave them. See docs/console.md.
package console

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// Prefix is where the console is mounted.
const Prefix = "/_utils"

// Config wires a console.
type Config struct {
	// API is the node's CouchDB HTTP API (the gateway): every page is
	// built from requests to it.
	API http.Handler
	// NodeName and Version are shown in the page header.
	NodeName string
	Version  string
	// Key signs the CSRF tokens; nil: 32 random bytes, so each node (and
	// each start) has its own.
	Key    []byte
	Logger *slog.Logger
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console is the web console's handler.
type Console struct {
	cfg    Config
	key    []byte
	tmpl   *template.Template
	mux    *http.ServeMux
	static http.Handler
	log    *slog.Logger
}

// New builds the console. It panics when its embedded templates do not
// parse (a build error, caught by the package's tests).
func New(cfg Config) http.Handler {
	c := &Console{cfg: cfg, key: cfg.Key, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(c.key) == 0 {
		c.key = make([]byte, 32)
		_, _ = rand.Read(c.key)
	}
	c.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))
	sub, _ := fs.Sub(staticFS, "static")
	c.static = http.StripPrefix(Prefix+"/static/", http.FileServerFS(sub))
	c.mux = http.NewServeMux()
	c.routes()
	return c
}

// ServeHTTP serves /_utils and everything under it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	h := w.Header()
	// no inline script or style anywhere: the policy can be strict
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// --- in-process API calls ---------------------------------------------

// recorder is the ResponseWriter an API call writes into.
type recorder struct {
	h      http.Header
	status int
	buf    bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.h }
func (w *recorder) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return w.buf.Write(p)
}
func (w *recorder) Flush() {}

// answer is what the API answered.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

func (a answer) ok() bool { return a.Status >= 200 && a.Status < 300 }

// decode reads the answer's JSON into v.
func (a answer) decode(v any) error { return json.Unmarshal(a.Body, v) }

// problem is an error shown on a page: the console's message, and under
// it the API's answer as it gave it.
type problem struct {
	Message string
	Status  int
	Error   string
	Reason  string
}

// problemOf is the console's message over the API's error.
func problemOf(msg string, a answer) *problem {
	p := &problem{Message: msg, Status: a.Status}
	var e struct {
		Error  any `json:"error"`
		Reason any `json:"reason"`
	}
	if json.Unmarshal(a.Body, &e) == nil && e.Error != nil {
		p.Error, p.Reason = str(e.Error), str(e.Reason)
	} else {
		p.Reason = strings.TrimSpace(string(a.Body))
	}
	return p
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// forwarded are the request headers an API call carries over from the
// browser's request: its credentials, and what the API needs to see the
// same client (lockouts by peer, proxies' host and scheme).
var forwarded = []string{"Cookie", "Authorization", "User-Agent", "X-Forwarded-For", "X-Forwarded-Host",
	"X-Forwarded-Proto", "X-Forwarded-Ssl", "X-Auth-CouchDB-UserName", "X-Auth-CouchDB-Roles", "X-Auth-CouchDB-Token"}

// call sends one request to the API as the browser's user. body nil: no
// body; a []byte is sent as JSON, url.Values as a form. A Set-Cookie for
// AuthSession in the answer (a login, a logout, a refreshed session) is
// passed on to the browser.
func (c *Console) call(w http.ResponseWriter, r *http.Request, method, path string, body any) answer {
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case []byte:
		rd, ctype = bytes.NewReader(b), "application/json"
	case url.Values:
		rd, ctype = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return answer{Status: 400, Body: []byte(`{"error":"bad_request","reason":"` + jsonEscape(err.Error()) + `"}`)}
	}
	req.Host = r.Host
	req.RemoteAddr = r.RemoteAddr
	req.TLS = r.TLS
	req.RequestURI = path
	for _, k := range forwarded {
		if v, ok := r.Header[k]; ok {
			req.Header[k] = v
		}
	}
	req.Header.Set("Accept", "application/json")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := &recorder{h: http.Header{}}
	c.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = 200
	}
	if w != nil {
		for _, sc := range rec.h.Values("Set-Cookie") {
			if strings.HasPrefix(sc, "AuthSession=") {
				if !strings.Contains(strings.ToLower(sc), "samesite=") {
					sc += "; SameSite=Lax"
				}
				w.Header().Add("Set-Cookie", sc)
			}
		}
	}
	return answer{Status: rec.status, Header: rec.h, Body: rec.buf.Bytes()}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// dbPath is /{db}, escaped as a client escapes it (a / in a name is %2F).
func dbPath(db string) string { return "/" + url.PathEscape(db) }

// docPath is /{db}/{id}: a design or local doc keeps its prefix's slash.
func docPath(db, id string) string {
	p := dbPath(db) + "/"
	for _, pre := range []string{"_design/", "_local/"} {
		if strings.HasPrefix(id, pre) {
			return p + pre + url.PathEscape(id[len(pre):])
		}
	}
	return p + url.PathEscape(id)
}

// --- CSRF ----------------------------------------------------------------

// nonceCookie holds a random value the console sets on the browser (at
// login, or on the first page without it); a form's token is an HMAC of it
// under the console's key. A cross-site page can neither read the cookie
// nor compute the HMAC, so the session cookie alone never authorizes a
// console POST.
const nonceCookie = "SetteeConsole"

func (c *Console) token(nonce string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("settee console csrf\x00"))
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func newNonce() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func setNonce(w http.ResponseWriter, r *http.Request, v string) {
	ck := &http.Cookie{Name: nonceCookie, Value: v, Path: Prefix, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil}
	if v == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

// ensureToken is the CSRF token for the page's forms, setting the nonce
// cookie when the browser has none.
func (c *Console) ensureToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(nonceCookie); err == nil && ck.Value != "" {
		return c.token(ck.Value)
	}
	n := newNonce()
	setNonce(w, r, n)
	// the same request's later reads see it too
	r.AddCookie(&http.Cookie{Name: nonceCookie, Value: n})
	return c.token(n)
}

// checkCSRF refuses a state-changing request that is not from a console
// page of this host: an Origin (or, without one, a Referer) of another
// host, or a missing or wrong token. The reason is shown on the 403 page.
func (c *Console) checkCSRF(r *http.Request) string {
	hosts := []string{strings.ToLower(r.Host)}
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		hosts = append(hosts, strings.ToLower(strings.TrimSpace(strings.Split(fh, ",")[0])))
	}
	sameHost := func(raw string) bool {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return false
		}
		for _, h := range hosts {
			if strings.EqualFold(u.Host, h) {
				return true
			}
		}
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		if !sameHost(o) {
			return "the request came from another site (Origin " + o + ")"
		}
	} else if ref := r.Header.Get("Referer"); ref != "" && !sameHost(ref) {
		return "the request came from another site (Referer " + ref + ")"
	}
	ck, err := r.Cookie(nonceCookie)
	if err != nil || ck.Value == "" {
		return "the console's form cookie is missing (cookies blocked, or the session ended)"
	}
	got := r.PostFormValue("csrf")
	if got == "" {
		return "the form carried no CSRF token"
	}
	if !hmac.Equal([]byte(got), []byte(c.token(ck.Value))) {
		return "the form's CSRF token does not match this session (an old page, or a forged form)"
	}
	return ""
}
