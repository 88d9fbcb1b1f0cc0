package httpgw_test

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// The documents that grant rights (package rights, docs/security.md) as
// Apache CouchDB 3.5.2 reads them (asked 2026-12-07): member names are
// exact and a repeated name keeps its last value. A user who may edit
// their own _users doc cannot give themself a role with a member named
// "Roles", "ROLES", a repeated "roles" or an escaped "\u0072oles"; a
// _security object's "Members" grants nothing.

// rightsServer is a server the tests below ask: base URL and admin.
type rightsServer struct {
	url, user, pw string
}

// rq sends one request as as ("user:pw"; "" the admin; "-" nobody) with
// extra headers, and answers status, body and headers.
func (s rightsServer) rq(t *testing.T, method, path, as, body string, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	switch as {
	case "":
		req.SetBasicAuth(s.user, s.pw)
	case "-":
	default:
		u, p, _ := strings.Cut(as, ":")
		req.SetBasicAuth(u, p)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (s rightsServer) must(t *testing.T, want int, method, path, as, body string) []byte {
	t.Helper()
	st, b, _ := s.rq(t, method, path, as, body, nil)
	if st != want {
		t.Fatalf("%s %s as %q: %d %s, want %d", method, path, as, st, b, want)
	}
	return b
}

// waitAuthDDoc waits until CouchDB has written _users/_design/_auth (its
// rules do not apply before); settee has it at once.
func (s rightsServer) waitAuthDDoc(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, _, _ := s.rq(t, "GET", "/_users/_design/_auth", "", "", nil); st == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no _users/_design/_auth in 60 s")
		}
	}
}

// roleVariants are user doc edits that try to add _admin beside
// "roles":[]; accept tells whether CouchDB stores the edit (then with
// roles [] as the login sees them) or refuses it (then its last "roles"
// is ["_admin"]: "Only _admin may edit roles").
var roleVariants = []struct {
	name, members string
	accept        bool
}{
	{"Roles", `"roles":[],"Roles":["_admin"]`, true},
	{"ROLES", `"roles":[],"ROLES":["_admin"]`, true},
	{"rOles", `"rOles":["_admin"],"roles":[]`, true},
	{"nested", `"roles":[],"x":{"roles":["_admin"]},"userCtx":{"roles":["_admin"]}`, true},
	{"dup last empty", `"roles":["_admin"],"roles":[]`, true},
	{"escaped last empty", `"\u0072oles":["_admin"],"roles":[]`, true},
	{"dup last admin", `"roles":[],"roles":["_admin"]`, false},
	{"escaped last admin", `"roles":[],"\u0072oles":["_admin"]`, false},
	{"escaped Roles", `"roles":[],"\u0052oles":["_admin"]`, true},
}

// runRoleVariants makes a user per variant, who edits their own doc
// (their password kept as a PBKDF2 hash they made, no "password"
// member), then checks what the login grants: roles [] by Basic auth, by
// a cookie session, and no write to _config's admins.
func runRoleVariants(t *testing.T, s rightsServer) {
	s.must(t, 200, "PUT", "/_node/_local/_config/couchdb/users_db_security_editable", "", `"true"`)
	s.must(t, 200, "PUT", "/_users/_security", "", `{}`)
	const salt = "0123456789abcdef0123456789abcdef"
	for i, v := range roleVariants {
		name := "rv" + string(rune('a'+i))
		pw := "pw-" + name
		s.must(t, 201, "PUT", "/_users/org.couchdb.user:"+name, "", `{"name":"`+name+`","type":"user","roles":[],"password":"`+pw+`"}`)
		var doc struct {
			Rev string `json:"_rev"`
		}
		_ = json.Unmarshal(s.must(t, 200, "GET", "/_users/org.couchdb.user:"+name, name+":"+pw, ""), &doc)
		dk, _ := pbkdf2.Key(sha256.New, pw, []byte(salt), 10, 32)
		body := `{"_rev":"` + doc.Rev + `","name":"` + name + `","type":"user",` + v.members +
			`,"password_scheme":"pbkdf2","pbkdf2_prf":"sha256","iterations":10,"salt":"` + salt + `","derived_key":"` + hex.EncodeToString(dk) + `"}`
		st, b, _ := s.rq(t, "PUT", "/_users/org.couchdb.user:"+name, name+":"+pw, body, nil)
		switch {
		case v.accept && st != 201:
			t.Fatalf("%s: edit answered %d %s, want 201", v.name, st, b)
		case !v.accept && (st != 403 || !strings.Contains(string(b), `"reason":"Only _admin may edit roles"`)):
			t.Fatalf("%s: edit answered %d %s, want 403 Only _admin may edit roles", v.name, st, b)
		}
		// Basic auth
		checkNoRoles(t, s, v.name+" (basic)", name+":"+pw, nil)
		// a cookie session
		st, b, h := s.rq(t, "POST", "/_session", "-", `{"name":"`+name+`","password":"`+pw+`"}`, nil)
		if st != 200 || !strings.Contains(string(b), `"roles":[]`) {
			t.Fatalf("%s: POST /_session: %d %s, want roles []", v.name, st, b)
		}
		ck := ""
		for _, c := range (&http.Response{Header: h}).Cookies() {
			if c.Name == "AuthSession" {
				ck = c.Value
			}
		}
		if ck == "" {
			t.Fatalf("%s: no AuthSession cookie: %v", v.name, h)
		}
		checkNoRoles(t, s, v.name+" (cookie)", "-", map[string]string{"Cookie": "AuthSession=" + ck})
	}
}

// checkNoRoles: the user's session has roles [], and it cannot make a
// server admin.
func checkNoRoles(t *testing.T, s rightsServer, what, as string, hdr map[string]string) {
	t.Helper()
	st, b, _ := s.rq(t, "GET", "/_session", as, "", hdr)
	if st != 200 || !strings.Contains(string(b), `"roles":[]`) || strings.Contains(string(b), "_admin") {
		t.Fatalf("%s: GET /_session: %d %s, want roles []", what, st, b)
	}
	st, b, _ = s.rq(t, "PUT", "/_node/_local/_config/admins/x", as, `"pw"`, hdr)
	if st != 401 && st != 403 {
		t.Fatalf("%s: PUT _config/admins/x: %d %s, want 401 or 403", what, st, b)
	}
	s.must(t, 404, "GET", "/_node/_local/_config/admins/x", "", "")
}

func TestRightsUserDocRoles(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	runRoleVariants(t, rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword})
}

func TestRightsUserDocRolesAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	s := rightsServer{cs.URL, cs.User, cs.Password}
	s.waitAuthDDoc(t)
	runRoleVariants(t, s)
}

// securityVariants are _security objects with hostile member names: who
// may read the database (x, y: users) after each.
var securityVariants = []struct {
	sec, stored string
	xMember     bool // x may read the db
	xAdmin      bool // x may write a design doc
}{
	{`{"members":{"names":["y"]},"Members":{"names":["x"]}}`, `{"members":{"names":["y"]},"Members":{"names":["x"]}}`, false, false},
	{`{"members":{"names":["x"]},"members":{"names":["y"]}}`, `{"members":{"names":["y"]}}`, false, false},
	{`{"members":{"names":["y"]},"members":{"names":["x"]}}`, `{"members":{"names":["x"]}}`, true, false},
	{`{"members":{"names":["y"],"Names":["x"]}}`, `{"members":{"names":["y"],"Names":["x"]}}`, false, false},
	{`{"members":{"names":["y"],"\u006eames":["x"]}}`, `{"members":{"names":["x"]}}`, true, false},
	{`{"admins":{"names":["x"]},"admins":{"names":[]},"members":{"names":["y"]}}`, `{"admins":{"names":[]},"members":{"names":["y"]}}`, false, false},
	{`{"ADMINS":{"names":["x"]},"members":{"names":["y"]}}`, `{"ADMINS":{"names":["x"]},"members":{"names":["y"]}}`, false, false},
	{`{"admins":{"names":[]},"admins":{"names":["x"]},"members":{"names":["y"]}}`, `{"admins":{"names":["x"]},"members":{"names":["y"]}}`, true, true},
}

func runSecurityVariants(t *testing.T, s rightsServer) {
	for _, u := range []string{"x", "y"} {
		s.must(t, 201, "PUT", "/_users/org.couchdb.user:"+u, "", `{"name":"`+u+`","type":"user","roles":[],"password":"p"}`)
	}
	s.must(t, 201, "PUT", "/secdb", "", "")
	for _, v := range securityVariants {
		s.must(t, 200, "PUT", "/secdb/_security", "", v.sec)
		if got := strings.TrimSpace(string(s.must(t, 200, "GET", "/secdb/_security", "", ""))); got != v.stored {
			t.Fatalf("%s: stored %s, want %s", v.sec, got, v.stored)
		}
		st, b, _ := s.rq(t, "GET", "/secdb", "x:p", "", nil)
		if (st == 200) != v.xMember || st != 200 && st != 403 {
			t.Fatalf("%s: GET /secdb as x: %d %s, member %v", v.sec, st, b, v.xMember)
		}
		st, b, _ = s.rq(t, "PUT", "/secdb/_design/d", "x:p", `{}`, nil)
		if (st == 201) != v.xAdmin || st != 201 && st != 403 {
			t.Fatalf("%s: PUT _design/d as x: %d %s, admin %v", v.sec, st, b, v.xAdmin)
		}
		if st == 201 {
			var r struct{ Rev string }
			_ = json.Unmarshal(b, &r)
			s.must(t, 200, "DELETE", "/secdb/_design/d?rev="+r.Rev, "", "")
		}
	}
}

func TestRightsSecurity(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	runSecurityVariants(t, rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword})
}

func TestRightsSecurityAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	s := rightsServer{cs.URL, cs.User, cs.Password}
	s.waitAuthDDoc(t)
	runSecurityVariants(t, s)
}

// sessionNexts are POST /_session?next= (and ?fail=) as CouchDB 3.5.2
// answers them: a value that begins with "/" is a path of this server,
// appended to its base URL (so //evil.example/x stays on this host); any
// other, empty too, is 400.
var sessionNexts = []struct {
	query string
	good  bool // the password is right
	// status and Location (after the base URL; "" none)
	status int
	loc    string
}{
	{"next=/foo", true, 302, "/foo"},
	{"next=//evil.example/x", true, 302, "//evil.example/x"},
	{"next=%2F%2Fevil", true, 302, "//evil"},
	{"next=///evil", true, 302, "///evil"},
	{"next=/%5Cevil", true, 302, `/\evil`},
	{"next=/foo?a=b", true, 302, "/foo?a=b"},
	{"next=http://evil/x", true, 400, ""},
	{"next=https:/evil", true, 400, ""},
	{"next=foo", true, 400, ""},
	{"next=", true, 400, ""},
	{"fail=foo", true, 200, ""},
	{"next=foo", false, 401, ""},
	{"fail=//evil/x", false, 302, "//evil/x"},
	{"fail=/foo", false, 302, "/foo"},
	{"fail=http://evil", false, 400, ""},
}

func runSessionNexts(t *testing.T, s rightsServer) {
	// one user per failed login, so none is locked out
	for i, c := range sessionNexts {
		name := "sn" + string(rune('a'+i))
		s.must(t, 201, "PUT", "/_users/org.couchdb.user:"+name, "", `{"name":"`+name+`","type":"user","roles":[],"password":"p"}`)
		pw := "p"
		if !c.good {
			pw = "wrong"
		}
		st, b, h := s.rq(t, "POST", "/_session?"+c.query, "-", `{"name":"`+name+`","password":"`+pw+`"}`, nil)
		if st != c.status {
			t.Fatalf("%s (good %v): %d %s, want %d", c.query, c.good, st, b, c.status)
		}
		want := ""
		if c.loc != "" {
			want = s.url + c.loc
		}
		if got := h.Get("Location"); got != want {
			t.Fatalf("%s: Location %q, want %q", c.query, got, want)
		}
		if st == 400 && !strings.Contains(string(b), `{"error":"bad_request","reason":"path must begin with a /."}`) {
			t.Fatalf("%s: %s", c.query, b)
		}
		if st == 400 && strings.Contains(h.Get("Set-Cookie"), "AuthSession="+name) {
			t.Fatalf("%s: a refused next made a session: %s", c.query, h.Get("Set-Cookie"))
		}
	}
}

func TestSessionNext(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	s := rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword}
	runSessionNexts(t, s)
	// a CR LF never splits the header (CouchDB 3.5.2's does: a header
	// "X: 1" follows its Location)
	s.must(t, 201, "PUT", "/_users/org.couchdb.user:crlf", "", `{"name":"crlf","type":"user","roles":[],"password":"p"}`)
	st, _, h := s.rq(t, "POST", "/_session?next=/foo%0d%0aX:1", "-", `{"name":"crlf","password":"p"}`, nil)
	if st != 302 || h.Get("X") != "" || !strings.HasPrefix(h.Get("Location"), s.url+"/foo") {
		t.Fatalf("CR LF in next: %d, Location %q, X %q", st, h.Get("Location"), h.Get("X"))
	}
}

func TestSessionNextAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	s := rightsServer{cs.URL, cs.User, cs.Password}
	s.waitAuthDDoc(t)
	runSessionNexts(t, s)
}

// utf8IDSteps: invalid UTF-8 in doc ids, _local and _design ids,
// attachment names and database names, as CouchDB 3.5.2 answers it.
// Two answers differ on purpose (docs/api.md): CouchDB takes an id of
// UTF-8-encoded surrogates (%ed%a0%80) that settee refuses, and CouchDB's
// illegal_database_name reason quotes the invalid bytes raw where
// settee's JSON has U+FFFD.
var utf8IDSteps = []wireStep{
	{method: "PUT", path: "/{db}/d1", body: `{}`, status: 201},
	{method: "PUT", path: "/{db}/%ff%fe", body: `{}`, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "GET", path: "/{db}/%ff%fe", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/%ff%fe?rev=1-x", status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/{db}/a%c3", body: `{}`, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "PUT", path: "/{db}/%c0%af", body: `{}`, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "PUT", path: "/{db}/_local/%ff%fe", body: `{}`, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "PUT", path: "/{db}/_local/%ff%fe?new_edits=false", body: `{}`, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "GET", path: "/{db}/_local/%ff%fe", status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/{db}/_local/%ff%fe?rev=0-1", status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/{db}/_design/%ff%fe", body: `{}`, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "GET", path: "/{db}/_design/%ff%fe", status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/{db}/d1/%ff%fe", body: `{}`, status: 400, err: "bad_request", reason: "Attachment name is not UTF-8 encoded"},
	{method: "GET", path: "/{db}/d1/%ff%fe", status: 404, err: "not_found", reason: "Document is missing attachment"},
	{method: "COPY", path: "/{db}/d1", hdr: map[string]string{"Destination": "%ff%fe"}, status: 400, err: "illegal_docid", reason: "Document id must be valid UTF-8"},
	{method: "POST", path: "/{db}", body: `{"_id":"\udcff"}`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"_local/\udcff"}]}`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/db%ff%fe", status: 400, inBody: `"error":"illegal_database_name"`},
	{method: "GET", path: "/db%ff%fe", status: 404, err: "not_found", reason: "Database does not exist."},
	{method: "PUT", path: "/%ff%fe", status: 400, inBody: `"error":"illegal_database_name"`},
	{method: "GET", path: "/%ff%fe", status: 404, err: "not_found", reason: "Database does not exist."},
}

func TestInvalidUTF8IDs(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	mustCall(t, ts, 201, "PUT", "/utf", nil, nil)
	runSteps(t, ts.URL, testserver.AdminUser, testserver.AdminPassword, "utf", utf8IDSteps)
}

func TestInvalidUTF8IDsAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "utf", utf8IDSteps)
}
