package console_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// browser is a user agent with cookies, as a browser keeps them.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, s *testserver.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: s.URL, c: &http.Client{Jar: jar}}
}

// get follows redirects and answers the final status and HTML.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	return read(b.t, resp)
}

func (b *browser) post(path string, form url.Values, hdr ...string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	return read(b.t, resp)
}

func read(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, html.UnescapeString(string(body))
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token is the CSRF token of the page at path.
func (b *browser) token(path string) string {
	b.t.Helper()
	_, page := b.get(path)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s:\n%s", path, page)
	}
	return m[1]
}

func (b *browser) login(name, pw string) (int, string) {
	b.t.Helper()
	tok := b.token("/_utils/login")
	return b.post("/_utils/login", url.Values{"csrf": {tok}, "name": {name}, "password": {pw}, "next": {"/_utils/"}})
}

// api asks the API as the server admin.
func api(t *testing.T, s *testserver.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	if m, ok := body.(map[string]any); ok {
		b, _ := json.Marshal(m)
		body = b
	}
	resp := s.Do(t, method, path, body)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func mustContain(t *testing.T, what, page string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("%s: no %q in the page:\n%s", what, w, page)
		}
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := newBrowser(t, s)

	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(s.URL + "/_utils")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/_utils/" {
		t.Errorf("/_utils: %d %q, want a 301 to /_utils/", resp.StatusCode, resp.Header.Get("Location"))
	}

	// nobody logged in: the login page
	st, page := b.get("/_utils/")
	if st != 200 || !strings.Contains(page, `action="/_utils/login"`) {
		t.Fatalf("/_utils/ without a session: %d\n%s", st, page)
	}
	// where the API's authentication_redirect sends a browser
	st, page = b.get("/_utils/session.html?return=%2F_all_dbs&reason=x")
	if st != 200 {
		t.Errorf("session.html: %d", st)
	}
	mustContain(t, "session.html", page, `action="/_utils/login"`, `name="next" value="/_utils/"`)
	st, page = b.login("admin", "wrong")
	if st != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", st)
	}
	mustContain(t, "wrong password", page, "Log in failed.", "unauthorized", "Name or password is incorrect.")

	st, page = b.login(testserver.AdminUser, testserver.AdminPassword)
	if st != 200 {
		t.Fatalf("login: %d\n%s", st, page)
	}
	mustContain(t, "after login", page, "<h1>Databases</h1>", "_users", "Log out")

	// logout, and the pages are the login again
	tok := b.token("/_utils/")
	b.post("/_utils/logout", url.Values{"csrf": {tok}})
	_, page = b.get("/_utils/")
	mustContain(t, "after logout", page, `action="/_utils/login"`)
}

// An AuthSession the API no longer takes (expired, or signed with an old
// secret) sends the browser back to the login with a message.
func TestExpiredSession(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := newBrowser(t, s)
	u, _ := url.Parse(s.URL + "/_utils/")
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "AuthSession", Value: "YWRtaW46NjAwMDAwMDA6AAAAAAAAAAAAAAAAAAAAAAAAAAA", Path: "/"}})
	_, page := b.get("/_utils/")
	mustContain(t, "expired session", page, "Your session has ended. Log in again.", `action="/_utils/login"`)
}

func TestDatabases(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := newBrowser(t, s)
	b.login(testserver.AdminUser, testserver.AdminPassword)
	tok := b.token("/_utils/")

	st, page := b.post("/_utils/databases", url.Values{"csrf": {tok}, "name": {"shop"}})
	if st != 200 {
		t.Fatalf("create: %d\n%s", st, page)
	}
	mustContain(t, "created db", page, "<h1>shop</h1>", "No documents.")
	if st, _ := api(t, s, "GET", "/shop", nil); st != 200 {
		t.Errorf("GET /shop after the console created it: %d", st)
	}

	// a name CouchDB refuses: its reason on the page, nothing made
	st, page = b.post("/_utils/databases", url.Values{"csrf": {tok}, "name": {"Bad!"}})
	if st != 400 {
		t.Errorf("bad name: %d, want 400", st)
	}
	mustContain(t, "bad name", page, `The database "Bad!" was not created.`, "illegal_database_name", "Only lowercase characters")

	_, page = b.get("/_utils/")
	mustContain(t, "list", page, `href="/_utils/db/shop"`)

	// delete needs the name typed again
	st, page = b.post("/_utils/db/shop/delete", url.Values{"csrf": {tok}, "confirm": {"sho"}})
	if st != 400 {
		t.Errorf("delete without the name: %d, want 400", st)
	}
	mustContain(t, "unconfirmed delete", page, "Not deleted: type the database's name to confirm.")
	if st, _ := api(t, s, "GET", "/shop", nil); st != 200 {
		t.Fatalf("GET /shop after an unconfirmed delete: %d", st)
	}
	st, page = b.post("/_utils/db/shop/delete", url.Values{"csrf": {tok}, "confirm": {"shop"}})
	if st != 200 {
		t.Fatalf("delete: %d\n%s", st, page)
	}
	mustContain(t, "deleted", page, "Deleted shop.")
	if st, _ := api(t, s, "GET", "/shop", nil); st != 404 {
		t.Errorf("GET /shop after delete: %d, want 404", st)
	}
}

// The session cookie alone never authorizes a console write: no token, a
// token of another session, or another site's Origin are refused and
// nothing is done.
func TestCSRF(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := newBrowser(t, s)
	b.login(testserver.AdminUser, testserver.AdminPassword)
	tok := b.token("/_utils/")
	other := newBrowser(t, s)
	other.login(testserver.AdminUser, testserver.AdminPassword)
	otherTok := other.token("/_utils/")
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  []string
		why  string
	}{
		{"no token", url.Values{"name": {"evil1"}}, nil, "the form carried no CSRF token"},
		{"another session's token", url.Values{"csrf": {otherTok}, "name": {"evil2"}}, nil, "does not match this session"},
		{"cross-site origin", url.Values{"csrf": {tok}, "name": {"evil3"}}, []string{"Origin", "http://evil.example"}, "came from another site"},
		{"cross-site referer", url.Values{"csrf": {tok}, "name": {"evil4"}}, []string{"Referer", "http://evil.example/x"}, "came from another site"},
	} {
		st, page := b.post("/_utils/databases", tc.form, tc.hdr...)
		if st != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, st)
		}
		mustContain(t, tc.name, page, "Refused, nothing was changed", tc.why)
		if st, _ := api(t, s, "GET", "/"+tc.form.Get("name"), nil); st != 404 {
			t.Errorf("%s: the database was made (%d)", tc.name, st)
		}
	}
	// the same form with its token and this host's Origin goes through
	if st, _ := b.post("/_utils/databases", url.Values{"csrf": {tok}, "name": {"fine"}}, "Origin", s.URL); st != 200 {
		t.Errorf("same-origin create: %d", st)
	}
}

func TestDocEdit(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	api(t, s, "PUT", "/notes", nil)
	b := newBrowser(t, s)
	b.login(testserver.AdminUser, testserver.AdminPassword)
	tok := b.token("/_utils/")

	st, page := b.post("/_utils/doc/notes/_new", url.Values{"csrf": {tok}, "json": {`{"_id":"n1","text":"hello","big":12345678901234567890}`}})
	if st != 200 {
		t.Fatalf("create doc: %d\n%s", st, page)
	}
	mustContain(t, "new doc", page, `"text": "hello"`, `"big": 12345678901234567890`, "Revisions")
	_, got := api(t, s, "GET", "/notes/n1", nil)
	rev1, _ := got["_rev"].(string)
	if got["text"] != "hello" || rev1 == "" {
		t.Fatalf("n1 in the API: %v", got)
	}

	_, page = b.get("/_utils/db/notes")
	mustContain(t, "doc list", page, `href="/_utils/doc/notes/n1"`, rev1)

	// someone else edits it: the console's stale rev gets the 409, the
	// user's text is kept
	api(t, s, "PUT", "/notes/n1", map[string]any{"_rev": rev1, "text": "theirs"})
	mine := `{"_id":"n1","_rev":"` + rev1 + `","text":"mine"}`
	st, page = b.post("/_utils/doc/notes/n1", url.Values{"csrf": {tok}, "json": {mine}})
	if st != http.StatusConflict {
		t.Errorf("stale rev: %d, want 409", st)
	}
	mustContain(t, "stale rev", page, "the document changed since you opened it", "conflict", "Document update conflict.", mine)
	if _, got := api(t, s, "GET", "/notes/n1", nil); got["text"] != "theirs" {
		t.Errorf("after the refused edit the doc is %v", got)
	}

	// malformed JSON: nothing sent, the text kept
	bad := `{"_id":"n1","text":`
	st, page = b.post("/_utils/doc/notes/n1", url.Values{"csrf": {tok}, "json": {bad}})
	if st != 400 {
		t.Errorf("malformed JSON: %d, want 400", st)
	}
	mustContain(t, "malformed", page, "the text is not a JSON object", "nothing was sent", bad)
	if _, got := api(t, s, "GET", "/notes/n1", nil); got["text"] != "theirs" {
		t.Errorf("after malformed JSON the doc is %v", got)
	}
}

// Names and ids come from users: the pages escape them.
func TestEscaping(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	api(t, s, "PUT", "/esc", nil)
	hostile := `<script>alert(1)</script>"'&`
	api(t, s, "PUT", "/esc/"+url.PathEscape(hostile), map[string]any{"x": hostile})
	b := newBrowser(t, s)
	b.login(testserver.AdminUser, testserver.AdminPassword)
	for _, path := range []string{"/_utils/db/esc", "/_utils/doc/esc/" + url.PathEscape(hostile)} {
		resp, err := b.c.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		if strings.Contains(string(raw), "<script>") {
			t.Errorf("%s: the id went into the page unescaped:\n%s", path, raw)
		}
		if !strings.Contains(html.UnescapeString(string(raw)), hostile) {
			t.Errorf("%s: the id is not shown", path)
		}
	}
}

// A user who is not an admin sees the API's refusal, not the data.
func TestNonAdmin(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	if st, m := api(t, s, "PUT", "/_users/org.couchdb.user:bob", `{"name":"bob","password":"pw","roles":[],"type":"user"}`); st != 201 {
		t.Fatalf("bob: %d %v", st, m)
	}
	api(t, s, "PUT", "/private", nil)
	api(t, s, "PUT", "/private/_security", map[string]any{"members": map[string]any{"names": []string{"alice"}}})
	b := newBrowser(t, s)
	// logged in, but _all_dbs is for admins (CouchDB 3's admin_only_all_dbs)
	st, page := b.login("bob", "pw")
	if st != http.StatusUnauthorized {
		t.Errorf("bob's databases page: %d, want the API's 401", st)
	}
	mustContain(t, "bob's databases page", page, "Log out", "bob", "The databases could not be listed.", "You are not a server admin.")
	st, page = b.get("/_utils/db/private")
	if st != http.StatusForbidden {
		t.Errorf("bob on /private: %d, want 403", st)
	}
	mustContain(t, "bob on /private", page, "could not be listed", "forbidden")
	tok := b.token("/_utils/")
	st, page = b.post("/_utils/databases", url.Values{"csrf": {tok}, "name": {"bobs"}})
	if st != http.StatusUnauthorized {
		t.Errorf("bob creates a db: %d, want 401", st)
	}
	mustContain(t, "bob creates a db", page, "was not created", "unauthorized")
	if st, _ := api(t, s, "GET", "/bobs", nil); st != 404 {
		t.Errorf("bob's db was made: %d", st)
	}
}

func TestFind(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	api(t, s, "PUT", "/shop", nil)
	for _, d := range []string{`{"_id":"a","kind":"fruit","price":3}`, `{"_id":"b","kind":"veg","price":2}`, `{"_id":"c","kind":"fruit","price":9}`} {
		if st, m := api(t, s, "POST", "/shop", d); st != 201 {
			t.Fatalf("doc: %d %v", st, m)
		}
	}
	if st, m := api(t, s, "POST", "/shop/_index", `{"index":{"fields":["kind"]},"name":"by-kind","ddoc":"idx"}`); st != 200 {
		t.Fatalf("_index: %d %v", st, m)
	}
	b := newBrowser(t, s)
	b.login(testserver.AdminUser, testserver.AdminPassword)
	find := func(q string) (int, string) {
		return b.get("/_utils/db/shop/find?q=" + url.QueryEscape(q))
	}
	st, page := find(`{"selector":{"kind":"fruit"},"fields":["_id","price"]}`)
	if st != 200 {
		t.Fatalf("find: %d\n%s", st, page)
	}
	mustContain(t, "find", page, "2 documents", `"_id": "a"`, `"_id": "c"`, "Plan: json index by-kind (_design/idx)")
	if strings.Contains(page, `"_id": "b"`) {
		t.Errorf("find: veg doc b listed")
	}
	// a query the API refuses: its reason shown
	st, page = find(`{"selector":{"price":{"$bogus":1}}}`)
	if st != 400 {
		t.Errorf("bad operator: %d, want 400", st)
	}
	mustContain(t, "bad operator", page, "The query was refused.", "invalid_operator")
	st, page = find(`{"selector":`)
	if st != 400 {
		t.Errorf("malformed query: %d, want 400", st)
	}
	mustContain(t, "malformed query", page, "Not run: the query is not a JSON object")
}
