package httpgw

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/rights"
)

// User is the authenticated user of a request (nil: anonymous).
type User struct {
	Name    string
	Roles   []string
	Admin   bool
	Handler string // "default" (basic) or "cookie"
}

// authenticator checks credentials. PBKDF2 with 600k iterations costs about
// a third of a second, so verified credentials are cached (as CouchDB's
// auth cache) by a keyed hash of name and password, never the password.
type authenticator struct {
	g     *Gateway
	mu    sync.Mutex
	cache map[[32]byte]cached
	confs authConfCache
	lock  lockout
}

type cached struct {
	// hash is the stored hash the password matched, all of it: a doc that
	// keeps its derived key and changes its iterations, salt or PRF is no
	// longer the hash the password was verified against
	hash    storedHash
	expires time.Time
}

// storedHash is a stored hash whole: what a password verified against it
// verified. Compared as a value: no allocation on a cached login.
type storedHash struct {
	scheme, prf, salt, derivedKey string
	iterations                    int
}

func hashOf(c *auth.Credential) storedHash {
	return storedHash{scheme: c.Scheme, prf: c.PRF, salt: c.Salt, derivedKey: c.DerivedKey, iterations: c.Iterations}
}

func newAuthenticator(g *Gateway) *authenticator {
	return &authenticator{g: g, cache: map[[32]byte]cached{}}
}

var errBadLogin = newErr(401, "unauthorized", "Name or password is incorrect.")

// authenticate runs chttpd/authentication_handlers in their order, as
// CouchDB's chttpd does: the first that finds a user wins; one that finds
// bad credentials ends the request (401); one that finds none of its kind
// passes to the next. No handler finding a user leaves the request
// anonymous (require_valid_user decides after).
func (a *authenticator) authenticate(rq *req) (*User, error) {
	if len(rq.segs) > 0 && rq.segs[0] == "_node" {
		// forwarded by another member (nodeproxy.go): only /_node paths are
		if u := nodeUser(a.g.cfg.NodeKey, rq.r, time.Now()); u != nil {
			return u, nil
		}
	}
	c := a.conf()
	for _, h := range c.handlers {
		var u *User
		var err error
		switch h {
		case auth.HandlerDefault:
			u, err = a.basicUser(rq)
		case auth.HandlerCookie:
			u, err = a.cookieUser(rq, c)
		case auth.HandlerJWT:
			u, err = a.jwtUser(rq, c)
		case auth.HandlerProxy:
			u, err = a.proxyUser(rq, c)
		}
		if err != nil || u != nil {
			return u, err
		}
	}
	return nil, nil
}

// basicUser is CouchDB's default handler: HTTP basic auth.
func (a *authenticator) basicUser(rq *req) (*User, error) {
	h := rq.r.Header.Get("Authorization")
	scheme, rest, _ := strings.Cut(h, " ")
	if h == "" || !strings.EqualFold(scheme, "Basic") {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return nil, badRequest("Authorization header has invalid base64 value")
	}
	name, pw, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, badRequest("Authorization header has invalid base64 value")
	}
	u, err := a.login(rq, name, pw, false)
	if err != nil {
		return nil, err
	}
	u2 := *u
	u2.Handler = auth.HandlerDefault
	return &u2, nil
}

// cookieUser is CouchDB's cookie handler: a valid AuthSession cookie
// authenticates; a stale, forged or unknown one is ignored (the request
// goes on anonymous), as CouchDB does; one that does not even parse
// (not base64url, fewer than three fields) fails the request.
func (a *authenticator) cookieUser(rq *req, c *authConf) (*User, error) {
	ck, err := rq.r.Cookie("AuthSession")
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || strings.Count(string(raw), ":") < 2 {
		return nil, errMalformedCookie
	}
	return a.checkCookie(rq, c, string(raw)), nil
}

var errMalformedCookie = badRequest("Malformed AuthSession cookie. Please clear your cookies.")

// login verifies name and password against the server admins, then
// _users. A verified password is cached (PBKDF2 is slow by design) with
// the hash it matched, and a hit counts only while the account still has
// that hash: a changed password, a deleted user or changed roles take
// effect at the next request, not when the cache entry ages out.
//
// In CouchDB 3.5's order: a locked-out client is refused (403); a stored
// hash whose iteration count is outside [chttpd_auth] min_iterations and
// max_iterations is refused (403 "Iteration count is too high/low for
// this server", not counted as a failure) before anything is computed;
// then the password is checked. Unlike CouchDB, whose credentials cache
// still signs in a password it verified before max_iterations was
// lowered, the bounds hold for a cached login too (docs/security.md).
// The hash is computed with the request's context: a client that goes
// away stops it.
//
// Failed logins count toward a lockout (lockout.go), a login that is to
// compute a hash as it starts; CouchDB's basic auth counts only those of
// an account that exists, its POST /_session all (session).
func (a *authenticator) login(rq *req, name, pw string, session bool) (*User, error) {
	conf := a.conf()
	lc := conf.lockout
	lk := lockKey{peer: lc.peer(rq), name: name}
	known, started := false, false
	key := a.key(name, pw)
	a.mu.Lock()
	c, hit := a.cache[key]
	a.mu.Unlock()
	hit = hit && time.Now().Before(c.expires)
	var tried *auth.Credential // a hash computed and not matched
	for _, everyCopy := range []bool{false, true} {
		user, cred := a.account(rq, name, everyCopy)
		if !everyCopy {
			if cred != nil {
				lk.salt, known = cred.Salt, true
			}
			if a.lock.locked(a.g, lc, lk) {
				return nil, errLockedOut
			}
		}
		if cred != nil {
			if err := boundedIterations(conf, cred); err != nil {
				if started {
					a.lock.release(lc, lk)
				}
				return nil, err
			}
			ok := hit && c.hash == hashOf(cred)
			if !ok && !sameHash(tried, cred) {
				if !started {
					if !a.lock.start(a.g, lc, lk) {
						return nil, errLockedOut
					}
					started = true
				}
				var err error
				if ok, err = cred.VerifyContext(rq.ctx, pw); err != nil {
					return nil, err // the client has gone: the attempt stays counted
				}
				tried = cred
			}
			if ok {
				if started {
					a.lock.release(lc, lk)
				}
				if !hit || c.hash != hashOf(cred) {
					a.remember(name, pw, cred)
				}
				return user, nil
			}
		}
		if user != nil && user.Admin && cred == a.g.serverAdmin(name) {
			break // a server admin has no copies to ask
		}
	}
	if !started && (known || session) {
		a.lock.failed(lc, lk)
	}
	return nil, errBadLogin
}

// boundedIterations is CouchDB's verify_iterations at login: 403 for a
// count outside [min_iterations, max_iterations], and, for a stored
// "iterations" that is no JSON integer, CouchDB's 500 (its function has
// no clause for one).
func boundedIterations(conf *authConf, cred *auth.Credential) error {
	if cred.Scheme != "pbkdf2" {
		return nil // no PBKDF2 to compute: it logs no one in
	}
	if cred.IterationsNotInteger {
		return errIterationsNotInteger
	}
	if err := auth.CheckIterations(cred.Iterations, conf.minIterations, conf.maxIterations); err != nil {
		return newErr(403, "forbidden", err.Error())
	}
	return nil
}

var errIterationsNotInteger = newErr(500, "unknown_error", "function_clause")

// sameHash: b is the hash a was, so computing it again gives a's answer.
func sameHash(a, b *auth.Credential) bool {
	return a != nil && b != nil && a.Scheme == b.Scheme && a.PRF == b.PRF && a.Salt == b.Salt &&
		a.Iterations == b.Iterations && a.DerivedKey == b.DerivedKey
}

// remember caches a verified login for a while.
func (a *authenticator) remember(name, pw string, cred *auth.Credential) {
	key := a.key(name, pw)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) > 10000 {
		clear(a.cache)
	}
	a.cache[key] = cached{hash: hashOf(cred), expires: time.Now().Add(5 * time.Minute)}
}

// forget drops every cached login: a server admin was added, changed or
// removed.
func (a *authenticator) forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.cache)
}

// serverAdmin is the server admin of that name from _config's admins
// (the node's start admin without one); nil when there is none.
func (g *Gateway) serverAdmin(name string) *auth.Credential {
	if g.cfg.Settings != nil {
		return g.cfg.Settings.ServerAdmin(name)
	}
	if g.cfg.Admin.Name == name {
		return g.cfg.Admin
	}
	return nil
}

// key is the cache key of name and password: SHA-256 of the node's
// secret, the name and the password, so the cache holds no password and
// no one without the secret can tell which a key stands for. The key
// never leaves the node, so the secret prefix needs no HMAC (whose two
// keyed digests and their allocations were a tenth of a GET's gateway
// time).
func (a *authenticator) key(name, pw string) [32]byte {
	var buf [256]byte
	b := append(buf[:0], a.g.cfg.CookieSecret...)
	b = append(b, name...)
	b = append(b, 0)
	b = append(b, pw...)
	return sha256.Sum256(b)
}

// userDoc reads org.couchdb.user:NAME from _users: from one copy (the
// local one where there is one), so a login costs no quorum round trip
// and works while most of the cluster is down; or, with everyCopy, from
// every live copy, the newest winning — _users has a copy on every node
// and a write is acknowledged by one, so a user created or changed
// through another node is seen at once.
func (a *authenticator) userDoc(rq *req, name string, everyCopy bool) (*auth.Credential, error) {
	r := 1
	if everyCopy {
		r = math.MaxInt32 // capped to the live copies
	}
	reply, err := a.g.c.GetDocR(rq.ctx, usersDB, &pb.GetDoc{Id: auth.UserDocPrefix + name}, r)
	if err != nil {
		return nil, err
	}
	if reply.Info == nil || reply.Info.Deleted || len(reply.Bodies) == 0 || reply.Bodies[0].Missing {
		return nil, nil
	}
	return credentialOf(reply.Bodies[0].Json)
}

// credentialOf reads a stored user doc as the write rules read it
// (rights.ParseUserDoc: exact member names, a repeated one's last value):
// its password hash, and its roles by the rule that checked them
// (rights.UserDoc.Roles). A doc whose roles are not a list of strings,
// which those rules refuse, logs no one in (nil).
func credentialOf(body []byte) (*auth.Credential, error) {
	doc, err := rights.ParseUserDoc(body)
	if err != nil {
		return nil, err
	}
	roles, err := doc.Roles()
	if err != nil {
		return nil, nil
	}
	c := doc.Credential()
	return &auth.Credential{Name: c.Name, Roles: roles, Scheme: c.Scheme, PRF: c.PRF,
		Salt: c.Salt, Iterations: c.Iterations, IterationsNotInteger: c.IterationsNotInteger,
		DerivedKey: c.DerivedKey}, nil
}

// cookie: base64url("name:hexTime:hmac"), the hmac keyed by the secret
// (chttpd_auth/secret, else the node's) and the user's salt, so a
// password change ends the user's sessions.
func (a *authenticator) makeCookie(c *authConf, name, salt string, now time.Time) string {
	payload := name + ":" + strconv.FormatInt(now.Unix(), 16)
	return base64.RawURLEncoding.EncodeToString([]byte(payload + ":" + mac(c, payload, salt)))
}

func mac(c *authConf, payload, salt string) string { return macWith(c.secret, payload, salt) }

func macWith(secret []byte, payload, salt string) string {
	m := hmac.New(sha256.New, append(append([]byte{}, secret...), salt...))
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

// signedBy reports whether sum signs payload with the secret or with one
// retired less than a session ago.
func signedBy(c *authConf, payload, salt, sum string) bool {
	if hmac.Equal([]byte(sum), []byte(macWith(c.secret, payload, salt))) {
		return true
	}
	now := time.Now()
	for _, r := range c.retired {
		if now.Before(r.until) && hmac.Equal([]byte(sum), []byte(macWith(r.secret, payload, salt))) {
			return true
		}
	}
	return false
}

// checkCookie reads a decoded cookie, "name:hexTime:hmac" (cookieUser
// checked it has the three fields).
func (a *authenticator) checkCookie(rq *req, c *authConf, raw string) *User {
	parts := strings.Split(raw, ":")
	sum := parts[len(parts)-1]
	ts := parts[len(parts)-2]
	name := strings.Join(parts[:len(parts)-2], ":")
	t, err := strconv.ParseInt(ts, 16, 64)
	if err != nil {
		return nil
	}
	// whole seconds, as CouchDB counts a session's time
	age := time.Duration(time.Now().Unix()-t) * time.Second
	if age >= c.timeout {
		return nil
	}
	user, cred := a.account(rq, name, false)
	if cred == nil {
		// a session made through another node, for a user this node's
		// copy has not seen yet
		if user, cred = a.account(rq, name, true); cred == nil {
			return nil
		}
	}
	if !signedBy(c, name+":"+ts, cred.Salt, sum) {
		return nil
	}
	if age > c.timeout/10 {
		// CouchDB renews a session once a tenth of its time has gone, so
		// a client in use never sees it end
		a.g.setSessionCookie(rq, c, a.makeCookie(c, name, cred.Salt, time.Now()))
	}
	user.Handler = auth.HandlerCookie
	return user
}

// account finds a name: the server admin, else its _users doc. The user
// comes with the stored credential (nil: no such account).
func (a *authenticator) account(rq *req, name string, everyCopy bool) (*User, *auth.Credential) {
	if admin := a.g.serverAdmin(name); admin != nil {
		return &User{Name: name, Roles: []string{"_admin"}, Admin: true}, admin
	}
	cred, err := a.userDoc(rq, name, everyCopy)
	if err != nil || cred == nil {
		return nil, nil
	}
	roles := cred.Roles
	if roles == nil {
		roles = []string{}
	}
	return &User{Name: name, Roles: roles, Admin: slices.Contains(roles, "_admin")}, cred
}

// saltOf is the salt that keys name's session cookies.
func (a *authenticator) saltOf(rq *req, name string) string {
	if _, cred := a.account(rq, name, false); cred != nil {
		return cred.Salt
	}
	return ""
}

func (g *Gateway) handleSession(rq *req) error {
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		ctx := map[string]any{"name": nil, "roles": []string{}}
		info := map[string]any{"authentication_handlers": g.auth.conf().handlers}
		if u := rq.user; u != nil {
			ctx["name"], ctx["roles"] = u.Name, u.Roles
			info["authenticated"] = u.Handler
		}
		return g.writeJSON(rq, 200, map[string]any{"ok": true, "userCtx": ctx, "info": info})
	case http.MethodPost:
		var name, pw string
		hasName := false
		ct := rq.r.Header.Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "application/json"):
			var body struct {
				Name     *string `json:"name"`
				Password string  `json:"password"`
			}
			if err := decodeJSONUpTo(rq, smallBody, &body); err != nil {
				return err
			}
			if body.Name != nil {
				name, pw, hasName = *body.Name, body.Password, true
			}
		case strings.HasPrefix(ct, "application/x-www-form-urlencoded"):
			// a login is small: the form is read no further than one
			b, err := rawBody(rq, smallBody)
			if err != nil {
				return err
			}
			rq.r.Body = io.NopCloser(b)
			if err := rq.r.ParseForm(); err != nil {
				var ce *couchError
				if errors.As(err, &ce) {
					return err
				}
				return badRequest("invalid form")
			}
			_, hasName = rq.r.PostForm["name"]
			name, pw = rq.r.PostForm.Get("name"), rq.r.PostForm.Get("password")
		default:
			return newErr(415, "bad_content_type", "Content-Type must be 'application/x-www-form-urlencoded' or 'application/json'")
		}
		if !hasName {
			return badRequest("request body must contain a username")
		}
		c := g.auth.conf()
		u, err := g.auth.login(rq, name, pw, true)
		if err != nil && err != errBadLogin {
			// a refusal before the password is checked (a lockout, an
			// iteration count out of bounds) is thrown in CouchDB: no
			// cookie cleared, no ?fail= redirect
			return err
		}
		if err != nil {
			// CouchDB clears the session on a failed login, and sends a
			// client that asked (?fail=) where it asked: a path of this
			// server, never another's
			g.setSessionCookie(rq, c, "")
			if fail, ok := rq.q["fail"]; ok {
				loc, err := g.sessionRedirect(rq, fail[0])
				if err != nil {
					return err
				}
				rq.w.Header().Set("Location", loc)
				return g.writeJSON(rq, 302, map[string]string{"error": "unauthorized", "reason": "Name or password is incorrect."})
			}
			return err
		}
		loc := ""
		if next, ok := rq.q["next"]; ok {
			if loc, err = g.sessionRedirect(rq, next[0]); err != nil {
				return err // no session either, as CouchDB
			}
		}
		g.setSessionCookie(rq, c, g.auth.makeCookie(c, u.Name, g.auth.saltOf(rq, u.Name), time.Now()))
		if loc != "" {
			rq.w.Header().Set("Location", loc)
			return g.writeJSON(rq, 302, map[string]any{"ok": true, "name": u.Name, "roles": u.Roles})
		}
		return g.writeJSON(rq, 200, map[string]any{"ok": true, "name": u.Name, "roles": u.Roles})
	case http.MethodDelete:
		g.setSessionCookie(rq, g.auth.conf(), "")
		return g.writeJSON(rq, 200, okBody)
	}
	return methodNotAllowed("GET,HEAD,POST,DELETE")
}

// errNotPath is CouchDB's answer to a ?next= or ?fail= that is not a
// path (empty, relative, or a URL).
var errNotPath = badRequest("path must begin with a /.")

// sessionRedirect is the Location of POST /_session?next= (or ?fail=)
// as CouchDB 3.5 makes it: the path appended to this server's own base
// URL, so "//evil.example/x" is http://host//evil.example/x, a path on
// this server, not a network-path reference to another; a value that
// does not begin with "/" is refused (400). A CR or LF in it never
// splits the header: net/http writes them as spaces.
func (g *Gateway) sessionRedirect(rq *req, path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", errNotPath
	}
	return g.base(rq) + path, nil
}

// setSessionCookie sets AuthSession as CouchDB (mochiweb) writes it:
// Expires and Max-Age only with allow_persistent_cookies, Secure over
// TLS, then cookie_domain and same_site when configured.
func (g *Gateway) setSessionCookie(rq *req, c *authConf, v string) {
	var b strings.Builder
	b.WriteString("AuthSession=" + v + "; Version=1")
	if c.persistent {
		age := int(c.timeout / time.Second)
		b.WriteString("; Expires=" + time.Now().Add(c.timeout).UTC().Format("Mon, 02-Jan-2006 15:04:05 GMT") +
			"; Max-Age=" + strconv.Itoa(age))
	}
	if rq.r.TLS != nil {
		b.WriteString("; Secure")
	}
	if c.cookieDomain != "" {
		b.WriteString("; Domain=" + c.cookieDomain)
	}
	b.WriteString("; Path=/; HttpOnly")
	switch strings.ToLower(c.sameSite) {
	case "strict":
		b.WriteString("; SameSite=Strict")
	case "lax":
		b.WriteString("; SameSite=Lax")
	case "none":
		b.WriteString("; SameSite=None")
	}
	rq.w.Header().Set("Set-Cookie", b.String())
}

// who is the request's user as the policy sees it, made once per request
// (it remembers the security objects the request was checked against).
func (rq *req) who() *policy.Subject {
	if rq.subj == nil {
		if rq.user == nil {
			rq.subj = policy.ForRequest("", nil, false)
		} else {
			rq.subj = policy.ForRequest(rq.user.Name, rq.user.Roles, rq.user.Admin)
		}
	}
	return rq.subj
}

// requireMember checks read/write access to db's documents (the policy's
// rule: see package policy).
func (g *Gateway) requireMember(rq *req, db string) error {
	return g.pol.RequireMember(rq.ctx, rq.who(), db)
}

// requireDBAdmin checks rights to design docs and _security.
func (g *Gateway) requireDBAdmin(rq *req, db string) error {
	return g.pol.RequireDBAdmin(rq.ctx, rq.who(), db)
}

func requireAdmin(rq *req) error {
	if rq.user != nil && rq.user.Admin {
		return nil
	}
	return errNotAdmin
}
