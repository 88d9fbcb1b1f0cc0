// Package attack is the attack suite: hostile request sequences, each
// from a role (anonymous, user, db member, db admin, server admin), that
// settee must refuse as Apache CouchDB 3.5.2 refuses them, with the data
// read back unchanged afterwards.
//
// Every case runs against a real settee node (internal/testserver; one
// node per group of cases that do not interfere, unique database and
// user names per case) and, unless it is settee-only, against a real
// CouchDB 3.5.2 (internal/testcouch; skipped with a message when
// ../shared/couchdb is absent), through the same code: a target is a base
// URL, the server admin's credentials and _config set at runtime through
// PUT /_node/_local/_config/…. CouchDB passing a case shows its
// expectation is right.
//
// A case names in family the attack of issue 34 it belongs to (1-10; ""
// for the other families): every case runs on both targets.
package attack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// target is one server the cases run against.
type target struct {
	name   string // "settee" or "couchdb"
	url    string // base URL without credentials
	admin  who
	settee bool
}

// who sends a request: nobody (anonymous), Basic credentials, or a cookie.
type who struct {
	name, pw string
	cookie   string // AuthSession value; sent instead of Basic when set
}

var anonymous = who{}

// response is an answer read whole.
type response struct {
	desc   string // "METHOD path as who", for messages
	status int
	hdr    http.Header
	body   []byte
}

func (r response) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m
}

func (r response) errName() string {
	s, _ := r.json()["error"].(string)
	return s
}

func (r response) String() string {
	b := string(r.body)
	if len(b) > 400 {
		b = b[:400] + "…"
	}
	return fmt.Sprintf("%s → %d %s", r.desc, r.status, strings.TrimSpace(b))
}

// env is one case on one target.
type env struct {
	t  *testing.T
	tg *target
	id string            // unique, lower-case: prefix of the case's names
	v  map[string]string // what setup hands to attack and readBack
	// the case's users: a is the attacker (the case's role decides
	// what it may do), b another user, a victim or bystander
	a, b who
}

var seq atomic.Int64

func newEnv(t *testing.T, tg *target) *env {
	return &env{t: t, tg: tg, id: fmt.Sprintf("k%d%d", time.Now().UnixNano()%1e6, seq.Add(1)), v: map[string]string{}}
}

var client = &http.Client{
	Timeout: 30 * time.Second,
	// redirects are answers to look at, never to follow
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// req sends method path (path is sent as written: no cleaning, escapes
// kept) as w. body: nil, string or []byte (sent as is), or a value
// marshalled to JSON. hdr: pairs of header name and value.
func (e *env) req(w who, method, path string, body any, hdr ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	rq, err := http.NewRequest(method, e.tg.url+"/", rd)
	if err != nil {
		e.t.Fatal(err)
	}
	// the path as written: "//_node", "%5Fnode", ".." stay what they are
	u, err := url.Parse(e.tg.url)
	if err != nil {
		e.t.Fatal(err)
	}
	rq.URL = &url.URL{Scheme: u.Scheme, Host: u.Host, Opaque: path}
	if strings.HasPrefix(path, "//") {
		// an Opaque of "//…" is read as an authority: sent in
		// absolute form instead
		rq.URL.Opaque = "//" + u.Host + path
	}
	if body != nil {
		rq.Header.Set("Content-Type", "application/json")
	}
	rq.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		rq.Header.Set(hdr[i], hdr[i+1])
	}
	as := "anonymous"
	switch {
	case w.cookie != "":
		rq.AddCookie(&http.Cookie{Name: "AuthSession", Value: w.cookie})
		as = w.name + " (cookie)"
	case w.name != "":
		rq.SetBasicAuth(w.name, w.pw)
		as = w.name
	}
	resp, err := client.Do(rq)
	if err != nil {
		e.t.Fatalf("%s %s as %s: %v", method, path, as, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s as %s: read: %v", method, path, as, err)
	}
	return response{desc: method + " " + path + " as " + as, status: resp.StatusCode, hdr: resp.Header, body: b}
}

// admin sends as the server admin.
func (e *env) admin(method, path string, body any, hdr ...string) response {
	e.t.Helper()
	return e.req(e.tg.admin, method, path, body, hdr...)
}

// must sends as the server admin and fails the case on an answer that
// is not 2xx: setup and read-back, not the attack.
func (e *env) must(method, path string, body any, hdr ...string) response {
	e.t.Helper()
	r := e.admin(method, path, body, hdr...)
	if r.status/100 != 2 {
		e.t.Fatalf("setup: %s", r)
	}
	return r
}

// refused checks r is the refusal CouchDB answers: status and error.
// More than one pair may be allowed (status, error, status, error…) where
// CouchDB and a correct settee may refuse in different words.
func (e *env) refused(r response, want ...any) {
	e.t.Helper()
	for i := 0; i+1 < len(want); i += 2 {
		if r.status == want[i].(int) && (want[i+1].(string) == "" || r.errName() == want[i+1].(string)) {
			return
		}
	}
	e.t.Errorf("not refused as CouchDB refuses (want %v): %s", want, r)
}

// denied checks r is some refusal: 4xx. For routing tricks where the
// error's wording is no part of the attack.
func (e *env) denied(r response) {
	e.t.Helper()
	if r.status < 400 || r.status >= 500 {
		e.t.Errorf("not refused: %s", r)
	}
}

func (e *env) ok(r response) {
	e.t.Helper()
	if r.status/100 != 2 {
		e.t.Errorf("want 2xx: %s", r)
	}
}

// name is a unique database or user name of this case.
func (e *env) name(s string) string { return e.id + "-" + s }

// db creates a database of this case and sets its _security; nil
// members and admins leave the default.
func (e *env) db(suffix string, members, admins []string, query ...string) string {
	e.t.Helper()
	n := e.name(suffix)
	q := ""
	if len(query) > 0 {
		q = "?" + query[0]
	}
	e.must("PUT", "/"+n+q, nil)
	if members != nil || admins != nil {
		e.security(n, members, admins)
	}
	return n
}

func (e *env) security(db string, members, admins []string) {
	e.t.Helper()
	if members == nil {
		members = []string{}
	}
	if admins == nil {
		admins = []string{}
	}
	e.must("PUT", "/"+db+"/_security", map[string]any{
		"members": map[string]any{"names": members, "roles": []string{}},
		"admins":  map[string]any{"names": admins, "roles": []string{}}})
}

// user creates a _users doc and answers its credentials.
func (e *env) user(suffix string) who {
	e.t.Helper()
	w := who{name: e.name(suffix), pw: "pw-" + e.id + suffix}
	e.must("PUT", "/_users/org.couchdb.user:"+w.name, map[string]any{
		"name": w.name, "type": "user", "roles": []string{}, "password": w.pw})
	return w
}

// put writes a doc as the admin and answers its rev.
func (e *env) put(db, id string, body any) string {
	e.t.Helper()
	r := e.must("PUT", "/"+db+"/"+id, body)
	return r.json()["rev"].(string)
}

func (e *env) get(w who, path string) map[string]any {
	e.t.Helper()
	r := e.req(w, "GET", path, nil)
	if r.status != 200 {
		e.t.Fatalf("read back: %s", r)
	}
	return r.json()
}

// login answers w with an AuthSession cookie from POST /_session.
func (e *env) login(w who) who {
	e.t.Helper()
	r := e.req(anonymous, "POST", "/_session", "name="+url.QueryEscape(w.name)+"&password="+url.QueryEscape(w.pw),
		"Content-Type", "application/x-www-form-urlencoded")
	if r.status != 200 {
		e.t.Fatalf("login: %s", r)
	}
	for _, c := range (&http.Response{Header: r.hdr}).Cookies() {
		if c.Name == "AuthSession" {
			w.cookie = c.Value
			return w
		}
	}
	e.t.Fatalf("login: no AuthSession cookie: %s", r)
	return w
}

// config sets a _config key at runtime, as the server admin.
func (e *env) config(section, key, value string) {
	e.t.Helper()
	e.must("PUT", "/_node/_local/_config/"+section+"/"+key, fmt.Sprintf("%q", value))
}

// dbURL is db's URL with w's credentials (none for anonymous), for
// replications.
func (e *env) dbURL(w who, db string) string {
	u, _ := url.Parse(e.tg.url)
	if w.name != "" {
		u.User = url.UserPassword(w.name, w.pw)
	}
	return u.String() + "/" + url.PathEscape(db)
}

// poll calls f every 200 ms until it answers true or d has passed.
func poll(d time.Duration, f func() bool) bool {
	for end := time.Now().Add(d); ; {
		if f() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// attackCase is one row of the suite.
type attackCase struct {
	name string
	// role is who attacks: anonymous, user, member, dbadmin, admin
	role string
	// family is the attack (issue 34's number) the case is of
	family string
	// setteeOnly: CouchDB has no such thing (the console)
	setteeOnly string
	setup      func(e *env)
	attack     func(e *env) // the hostile requests, each checked refused
	readBack   func(e *env) // proves nothing changed
}

// group is cases that share a server.
type group struct {
	name  string
	cases []attackCase
}

var groups []group // filled by the cases_*_test.go files' init

func addGroup(name string, cases ...attackCase) { groups = append(groups, group{name, cases}) }

// prepare sets what every case of a target expects: fast password
// hashing for the users the cases make, _users readable and its
// _security editable (attack 1 and 7 are against _users members).
func prepare(t *testing.T, tg *target) {
	e := newEnv(t, tg)
	for _, db := range []string{"_users", "_replicator"} {
		if r := e.admin("PUT", "/"+db, nil); r.status != 201 && r.status != 412 {
			t.Fatalf("prepare: %s", r)
		}
	}
	e.config("chttpd_auth", "iterations", "10")
	e.config("couchdb", "users_db_security_editable", "true")
	e.security("_users", nil, nil)
	// attack 4 is by users who may write to _replicator
	e.security("_replicator", nil, nil)
}

func runGroup(t *testing.T, tg *target, g group) {
	for _, c := range g.cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if !tg.settee && c.setteeOnly != "" {
				t.Skipf("settee only: %s", c.setteeOnly)
			}
			e := newEnv(t, tg)
			e.a, e.b = e.user("a"), e.user("b")
			if c.setup != nil {
				c.setup(e)
			}
			c.attack(e)
			if c.readBack != nil {
				c.readBack(e)
			}
		})
	}
}

func TestAttacks(t *testing.T) {
	t.Run("settee", func(t *testing.T) {
		t.Parallel()
		for _, g := range groups {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				s := testserver.Start(t)
				tg := &target{name: "settee", url: s.URL, settee: true,
					admin: who{name: testserver.AdminUser, pw: testserver.AdminPassword}}
				prepare(t, tg)
				runGroup(t, tg, g)
			})
		}
	})
	t.Run("couchdb", func(t *testing.T) {
		t.Parallel()
		c := testcouch.Start(t, "")
		tg := &target{name: "couchdb", url: c.URL, admin: who{name: c.User, pw: c.Password}}
		prepare(t, tg)
		for _, g := range groups {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				runGroup(t, tg, g)
			})
		}
	})
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
