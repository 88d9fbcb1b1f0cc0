package httpgw_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// onBoth runs f against a fresh settee and a fresh CouchDB 3.5.2 (skipped
// where there is none): the same requests, the same expected answers.
func onBoth(t *testing.T, f func(t *testing.T, base, user, pw string)) {
	t.Run("settee", func(t *testing.T) {
		s := testserver.Start(t)
		f(t, s.URL, testserver.AdminUser, testserver.AdminPassword)
	})
	t.Run("couchdb", func(t *testing.T) {
		cs := startCouchDB(t)
		f(t, cs.URL, cs.User, cs.Password)
	})
}

type caller struct {
	t              *testing.T
	base, user, pw string
}

// do sends a request (as the admin unless hdr has Authorization or a
// Cookie) and returns the answer with its body read.
func (c caller) do(method, path, body string, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	admin := true
	for k, v := range hdr {
		req.Header.Set(k, v)
		if k == "Authorization" || k == "Cookie" || k == "-" {
			admin = false
		}
	}
	req.Header.Del("-")
	if admin {
		req.SetBasicAuth(c.user, c.pw)
	}
	resp, err := http.DefaultTransport.RoundTrip(req) // redirects are answers here
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (c caller) setConfig(section, key, value string) {
	c.t.Helper()
	if resp, b := c.do("PUT", "/_node/_local/_config/"+section+"/"+key, `"`+value+`"`, nil); resp.StatusCode != 200 {
		c.t.Fatalf("config %s/%s: %d %s", section, key, resp.StatusCode, b)
	}
}

func (c caller) login() string {
	c.t.Helper()
	resp, b := c.do("POST", "/_session", `{"name":"`+c.user+`","password":"`+c.pw+`"}`, map[string]string{"-": ""})
	if resp.StatusCode != 200 {
		c.t.Fatalf("login: %d %s", resp.StatusCode, b)
	}
	return resp.Header.Get("Set-Cookie")
}

var cookieValue = regexp.MustCompile(`^AuthSession=([^;]*)`)
var cookieDates = regexp.MustCompile(`Expires=[^;]*; Max-Age=\d+`)

// The AuthSession cookie as chttpd_auth's settings shape it, live: its
// attributes (allow_persistent_cookies, cookie_domain, same_site), its
// lifetime (timeout), its renewal once a tenth of that has passed, and the
// secret that signs it.
func TestSessionCookieSettings(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, base, user, pw string) {
		c := caller{t, base, user, pw}
		sc := c.login()
		if got := cookieDates.ReplaceAllString(sc, "E"); !strings.HasSuffix(got, "; Version=1; E; Path=/; HttpOnly") {
			t.Fatalf("default cookie %q", sc)
		}
		if !regexp.MustCompile(`Expires=\w{3}, \d\d-\w{3}-\d{4} \d\d:\d\d:\d\d GMT; Max-Age=600`).MatchString(sc) {
			t.Fatalf("default cookie %q: want Expires in CouchDB's form and Max-Age=600", sc)
		}
		c.setConfig("chttpd_auth", "allow_persistent_cookies", "false")
		c.setConfig("chttpd_auth", "cookie_domain", "example.com")
		c.setConfig("chttpd_auth", "same_site", "strict")
		sc = c.login()
		if v := cookieValue.FindString(sc); sc != v+"; Version=1; Domain=example.com; Path=/; HttpOnly; SameSite=Strict" {
			t.Fatalf("session cookie %q", sc)
		}
		resp, _ := c.do("DELETE", "/_session", "", map[string]string{"-": ""})
		if got := resp.Header.Get("Set-Cookie"); got != "AuthSession=; Version=1; Domain=example.com; Path=/; HttpOnly; SameSite=Strict" {
			t.Fatalf("logout cookie %q", got)
		}
		c.setConfig("chttpd_auth", "allow_persistent_cookies", "true")
		c.setConfig("chttpd_auth", "same_site", "lax")
		sc = c.login()
		if got := cookieDates.ReplaceAllString(sc, "E"); !strings.HasSuffix(got, "; Version=1; E; Domain=example.com; Path=/; HttpOnly; SameSite=Lax") {
			t.Fatalf("persistent cookie %q", sc)
		}

		// a short session: renewed once a tenth of it has gone, over after
		c.setConfig("chttpd_auth", "timeout", "3")
		loggedIn := time.Now()
		cookie := cookieValue.FindString(c.login())
		session := func() (string, string) {
			resp, b := c.do("GET", "/_session", "", map[string]string{"Cookie": cookie})
			return b, resp.Header.Get("Set-Cookie")
		}
		// (not renewed while under a tenth of its life old: a loaded
		// machine can take that long between the login and the read, and
		// then a renewal is right)
		b, renewed := session()
		if !strings.Contains(b, `"name":"`+user+`"`) || renewed != "" && time.Since(loggedIn) < 300*time.Millisecond {
			t.Fatalf("fresh cookie: %s (renewed %q)", b, renewed)
		}
		time.Sleep(1100 * time.Millisecond)
		b, renewed = session()
		if !strings.Contains(b, `"name":"`+user+`"`) || !strings.Contains(renewed, "Max-Age=3") {
			t.Fatalf("cookie after 1.1 s of 3: %s, renewed %q (want a new one)", b, renewed)
		}
		time.Sleep(2500 * time.Millisecond)
		if b, _ := session(); !strings.Contains(b, `"name":null`) {
			t.Fatalf("cookie after its timeout: %s, want anonymous", b)
		}
		// a new secret ends every session
		c.setConfig("chttpd_auth", "timeout", "600")
		cookie = cookieValue.FindString(c.login())
		if b, _ := session(); !strings.Contains(b, `"name":"`+user+`"`) {
			t.Fatalf("new cookie: %s", b)
		}
		// a new secret signs new sessions; the old one's stay good until
		// their time is up (a rotation does not log everyone out)
		c.setConfig("chttpd_auth", "secret", "another-secret-0123456789")
		if b, _ := session(); !strings.Contains(b, `"name":"`+user+`"`) {
			t.Fatalf("cookie after a new secret: %s, want still the user's", b)
		}
		cookie = cookieValue.FindString(c.login())
		if b, _ := session(); !strings.Contains(b, `"name":"`+user+`"`) {
			t.Fatalf("cookie made with the new secret: %s", b)
		}
	})
}

// What a 401 carries, by CouchDB's rule (chttpd's error_headers): no
// challenge for an API client, a redirect to the login page for a browser,
// a basic challenge when a valid user is required, or the one the client
// or chttpd/WWW-Authenticate names.
func TestUnauthorizedHeaders(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, base, user, pw string) {
		c := caller{t, base, user, pw}
		anon := func(hdr map[string]string) (int, string, string) {
			h := map[string]string{"-": ""}
			for k, v := range hdr {
				h[k] = v
			}
			resp, _ := c.do("GET", "/_all_dbs", "", h)
			return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Location")
		}
		for _, tc := range []struct {
			name        string
			hdr         map[string]string
			status      int
			www, locate string
		}{
			{"no Accept", nil, 401, "", ""},
			{"curl", map[string]string{"Accept": "*/*"}, 401, "", ""},
			{"JSON", map[string]string{"Accept": "application/json"}, 401, "", ""},
			{"browser", map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, 401, "", ""},
			{"HTML only", map[string]string{"Accept": "text/html"}, 302, "", "/_utils/session.html?return=%2F_all_dbs&reason=You%20are%20not%20a%20server%20admin."},
			{"client's challenge", map[string]string{"X-CouchDB-WWW-Authenticate": "Cookie"}, 401, "Cookie", ""},
		} {
			st, www, loc := anon(tc.hdr)
			if st != tc.status || www != tc.www || !strings.HasSuffix(loc, tc.locate) || (tc.locate == "") != (loc == "") {
				t.Errorf("%s: %d, WWW-Authenticate %q, Location %q; want %d, %q, %q", tc.name, st, www, loc, tc.status, tc.www, tc.locate)
			}
		}
		// chttpd_auth's require_valid_user is not chttpd's: CouchDB 3.5
		// neither refuses nor challenges by it
		c.setConfig("chttpd_auth", "require_valid_user", "true")
		if st, www, _ := anon(map[string]string{"Accept": "text/html"}); st != 302 || www != "" {
			t.Errorf("chttpd_auth/require_valid_user: %d %q", st, www)
		}
		if resp, _ := c.do("GET", "/", "", map[string]string{"-": ""}); resp.StatusCode != 200 {
			t.Errorf("chttpd_auth/require_valid_user alone refuses GET /: %d", resp.StatusCode)
		}
		c.setConfig("chttpd", "require_valid_user", "true")
		if st, www, _ := anon(map[string]string{"Accept": "text/html"}); st != 401 || www != `Basic realm="server"` {
			t.Errorf("chttpd/require_valid_user: %d %q", st, www)
		}
		if resp, b := c.do("GET", "/", "", map[string]string{"-": ""}); resp.StatusCode != 401 || !strings.Contains(b, "Authentication required.") {
			t.Errorf("chttpd/require_valid_user: GET / %d %s", resp.StatusCode, b)
		}
		c.setConfig("chttpd", "WWW-Authenticate", `Basic realm=\"db\"`)
		if st, www, _ := anon(nil); st != 401 || www != `Basic realm="db"` {
			t.Errorf("chttpd/WWW-Authenticate: %d %q", st, www)
		}
	})
}

// chttpd/authentication_handlers decides which handlers run, in its order,
// at the next request (CouchDB 3.5 reads it at start only); a value naming
// a handler settee does not have is refused and changes nothing.
func TestAuthenticationHandlersLive(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	cookie := cookieValue.FindString(c.login())
	asCookie := func() string {
		_, b := c.do("GET", "/_session", "", map[string]string{"Cookie": cookie})
		return b
	}
	if b := asCookie(); !strings.Contains(b, `"authenticated":"cookie"`) || !strings.Contains(b, `"authentication_handlers":["cookie","default"]`) {
		t.Fatalf("default handlers: %s", b)
	}
	c.setConfig("chttpd", "authentication_handlers", "{chttpd_auth, default_authentication_handler}")
	if b := asCookie(); !strings.Contains(b, `"name":null`) {
		t.Fatalf("cookie without the cookie handler: %s", b)
	}
	if _, b := c.do("GET", "/_session", "", nil); !strings.Contains(b, `"authentication_handlers":["default"]`) || !strings.Contains(b, `"authenticated":"default"`) {
		t.Fatalf("basic with the default handler only: %s", b)
	}
	for _, bad := range []string{"junk", "{chttpd_auth, magic_authentication_handler}", "{chttpd_auth, default_authentication_handler},"} {
		resp, b := c.do("PUT", "/_node/_local/_config/chttpd/authentication_handlers", `"`+bad+`"`, nil)
		if resp.StatusCode != 400 || !strings.Contains(b, `"error":"bad_request"`) {
			t.Errorf("handlers %q: %d %s", bad, resp.StatusCode, b)
		}
	}
	if resp, b := c.do("GET", "/_node/_local/_config/chttpd/authentication_handlers", "", nil); resp.StatusCode != 200 || !strings.Contains(b, "default_authentication_handler}") {
		t.Fatalf("after refused writes: %d %s", resp.StatusCode, b)
	}
	resp, _ := c.do("DELETE", "/_node/_local/_config/chttpd/authentication_handlers", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if b := asCookie(); !strings.Contains(b, `"authenticated":"cookie"`) {
		t.Fatalf("handlers back to the default: %s", b)
	}
}
