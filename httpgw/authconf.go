package httpgw

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/settee/settee/auth"
)

// authConf is what authentication reads from _config, parsed once per
// config generation (Settings.ConfigGeneration) rather than per request.
// CouchDB reads each auth key from chttpd_auth first and couch_httpd_auth
// (its 2.x name) second; so does this.
type authConf struct {
	gen      uint64
	handlers []string // chttpd/authentication_handlers, in order
	// the session cookie
	timeout      time.Duration
	persistent   bool
	secret       []byte
	sameSite     string
	cookieDomain string
	iterations   int // PBKDF2 iterations of a password hashed into _users
	// min_iterations, max_iterations: a stored hash whose count is
	// outside them is not computed at login (CouchDB's verify_iterations)
	minIterations, maxIterations int
	// retired secrets still accept the cookies they signed until the
	// session timeout after they were replaced, as CouchDB's do: a new
	// secret (a rotation, set node by node) does not log everyone out
	retired []retiredSecret
	jwt     *jwtConf
	proxy   *proxyConf
	lockout lockConf
}

// authConfCache holds the parsed authConf; readers load it, and the first
// reader after a config change parses again.
type authConfCache struct{ p atomic.Pointer[authConf] }

// conf is the auth settings as they are now.
func (a *authenticator) conf() *authConf {
	s := a.g.cfg.Settings
	var gen uint64
	if s != nil {
		gen = s.ConfigGeneration()
	}
	if c := a.confs.p.Load(); c != nil && c.gen == gen {
		return c
	}
	c := a.loadConf(gen)
	if old := a.confs.p.Load(); old != nil {
		now := time.Now()
		for _, r := range old.retired {
			if now.Before(r.until) && !bytes.Equal(r.secret, c.secret) {
				c.retired = append(c.retired, r)
			}
		}
		if !bytes.Equal(old.secret, c.secret) {
			c.retired = append(c.retired, retiredSecret{old.secret, now.Add(old.timeout)})
		}
	}
	a.confs.p.Store(c)
	return c
}

type retiredSecret struct {
	secret []byte
	until  time.Time
}

func (a *authenticator) loadConf(gen uint64) *authConf {
	cfg := a.g.cfg
	c := &authConf{gen: gen, handlers: []string{auth.HandlerCookie, auth.HandlerDefault},
		timeout: cfg.SessionTimeout, persistent: true, secret: cfg.CookieSecret,
		iterations: auth.DefaultIterations, minIterations: auth.DefaultMinIterations,
		maxIterations: auth.DefaultMaxIterations}
	s := cfg.Settings
	c.lockout = loadLockConf(s)
	if s == nil {
		c.jwt, c.proxy = loadJWTConf(nil), loadProxyConf(nil)
		return c
	}
	get := func(key string) (string, bool) { return authValue(s, key) }
	if v, err := s.ConfigValue("chttpd", "authentication_handlers"); err == nil {
		if hs, err := auth.ParseHandlers(v); err == nil {
			c.handlers = hs
		} else {
			a.g.log.Warn("config: chttpd/authentication_handlers does not parse, using the default", "value", v, "err", err)
		}
	}
	if v, ok := get("timeout"); ok {
		if i, err := strconv.Atoi(v); err == nil && i > 0 {
			c.timeout = time.Duration(i) * time.Second
		}
	}
	if v, ok := get("allow_persistent_cookies"); ok {
		c.persistent = v != "false"
	}
	if v, ok := get("secret"); ok && v != "" {
		c.secret = []byte(v)
	}
	if v, ok := get("iterations"); ok {
		if i, err := strconv.Atoi(v); err == nil && i > 0 {
			c.iterations = i
		}
	}
	if v, ok := get("min_iterations"); ok {
		if i, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			c.minIterations = i
		}
	}
	if v, ok := get("max_iterations"); ok {
		if i, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			c.maxIterations = i
		}
	}
	c.sameSite, _ = get("same_site")
	c.cookieDomain, _ = get("cookie_domain")
	c.jwt, c.proxy = loadJWTConf(s), loadProxyConf(s)
	return c
}

// authValue is an auth key's value: chttpd_auth's, else couch_httpd_auth's.
func authValue(s Settings, key string) (string, bool) {
	if v, err := s.ConfigValue("chttpd_auth", key); err == nil {
		return v, true
	}
	if v, err := s.ConfigValue("couch_httpd_auth", key); err == nil {
		return v, true
	}
	return "", false
}

// unauthorized adds to a 401 what CouchDB's chttpd adds (error_headers):
// the client's own X-CouchDB-WWW-Authenticate, else chttpd/WWW-Authenticate,
// else for "unauthorized" a basic challenge when a valid user is required,
// or, for a browser (it accepts text/html, not JSON), a 302 to the login
// page with where it was going and why. It reports whether it answered.
func (g *Gateway) unauthorized(rq *req, ce *couchError) bool {
	h := rq.w.Header()
	if v := rq.r.Header.Get("X-Couchdb-Www-Authenticate"); v != "" {
		h.Set("Www-Authenticate", v)
		return false
	}
	s := g.cfg.Settings
	if s != nil {
		if v, err := s.ConfigValue("chttpd", "WWW-Authenticate"); err == nil {
			h.Set("Www-Authenticate", v)
			return false
		}
	}
	if ce.code != "unauthorized" {
		return false
	}
	// chttpd's require_valid_user, not chttpd_auth's (CouchDB 3.5 reads
	// only the first here)
	if s != nil && requiresUser(s) {
		h.Set("Www-Authenticate", `Basic realm="server"`)
		return false
	}
	if accepts(rq, "application/json", true) || !accepts(rq, "text/html", true) {
		return false
	}
	redirect := "/_utils/session.html"
	if s != nil {
		if v, ok := authValue(s, "authentication_redirect"); ok {
			redirect = v
		}
	}
	h.Set("Location", g.base(rq)+(redirect+"?return="+url.QueryEscape(rq.r.URL.Path)+"&reason="+url.PathEscape(ce.reason)))
	b, _ := json.Marshal(map[string]string{"error": ce.code, "reason": ce.reason})
	_ = g.writeJSON(rq, http.StatusFound, append(b, '\n'))
	return true
}

func requiresUser(s Settings) bool {
	all, exceptUp := s.RequireValidUser()
	return all || exceptUp
}
