package httpgw_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// configSteps are _config requests and Apache CouchDB 3.5.2's answers
// (asked 2026-12-01): the shapes, the old value PUT and DELETE answer, the
// 400s, 403s, 404s and 405s. Keys and sections settee does not know are
// stored and answered as CouchDB does.
var configSteps = []wireStep{
	{method: "GET", path: "/_node/_local/_config/zz_test", status: 200, raw: "{}\n"},
	{method: "GET", path: "/_node/_local/_config/zz_test/k", status: 404, err: "not_found", reason: "unknown_config_value"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `"v1"`, status: 200, raw: "\"\"\n"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: ` "v2" `, status: 200, raw: "\"v1\"\n"},
	{method: "GET", path: "/_node/_local/_config/zz_test", status: 200, raw: "{\"k\":\"v2\"}\n"},
	{method: "GET", path: "/_node/_local/_config/zz_test/k", status: 200, raw: "\"v2\"\n"},
	{method: "GET", path: "/_node/_local/_config/zz_test/", status: 200, raw: "{\"k\":\"v2\"}\n"},
	{method: "GET", path: "/_node/_local/_config", status: 200, inBody: `"zz_test":{"k":"v2"}`},
	// values are JSON strings; anything else changes nothing
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `12`, status: 400, err: "bad_request", reason: "a JSON string expected"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `{"a":1}`, status: 400, err: "bad_request", reason: "a JSON string expected"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `null`, status: 400, err: "bad_request", reason: "a JSON string expected"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `notjson`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: ``, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `"v3" x`, status: 400, err: "bad_request", reason: "invalid UTF-8 JSON"},
	{method: "GET", path: "/_node/_local/_config/zz_test/k", status: 200, raw: "\"v2\"\n"},
	// methods
	{method: "PUT", path: "/_node/_local/_config/zz_test", body: `"x"`, status: 405, err: "method_not_allowed", reason: "Only GET allowed"},
	{method: "DELETE", path: "/_node/_local/_config/zz_test", status: 405, err: "method_not_allowed", reason: "Only GET allowed"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/", body: `"x"`, status: 405, err: "method_not_allowed", reason: "Only GET allowed"},
	{method: "PUT", path: "/_node/_local/_config//k", body: `"x"`, status: 405, err: "method_not_allowed", reason: "Only GET allowed"},
	{method: "POST", path: "/_node/_local/_config/zz_test/k", body: `"x"`, status: 405, err: "method_not_allowed", reason: "Only GET,PUT,DELETE allowed"},
	{method: "POST", path: "/_node/_local/_config", body: `"x"`, status: 405, err: "method_not_allowed", reason: "Only GET allowed"},
	{method: "PUT", path: "/_node/_local/_config/zz_test/k/x", body: `"x"`, status: 404, err: "not_found", reason: "missing"},
	// _reload
	{method: "POST", path: "/_node/_local/_config/_reload", status: 200, raw: "{\"ok\":true}\n"},
	{method: "GET", path: "/_node/_local/_config/_reload", status: 405, err: "method_not_allowed", reason: "Only POST allowed"},
	// odd characters: an escaped "/" in a section or key, spaces, UTF-8
	{method: "PUT", path: "/_node/_local/_config/zz%2Fodd/k%20y%2F1", body: `"v"`, status: 200, raw: "\"\"\n"},
	{method: "PUT", path: "/_node/_local/_config/zz%2Fodd/uni%C3%A9", body: `"\u00e9"`, status: 200, raw: "\"\"\n"},
	{method: "GET", path: "/_node/_local/_config/zz%2Fodd", status: 200, raw: "{\"k y/1\":\"v\",\"unié\":\"é\"}\n"},
	{method: "GET", path: "/_node/_local/_config/zz%2Fodd/k%20y%2F1", status: 200, raw: "\"v\"\n"},
	// DELETE answers the old value, then 404
	{method: "DELETE", path: "/_node/_local/_config/zz_test/k", status: 200, raw: "\"v2\"\n"},
	{method: "DELETE", path: "/_node/_local/_config/zz_test/k", status: 404, err: "not_found", reason: "unknown_config_value"},
	{method: "GET", path: "/_node/_local/_config/zz_test", status: 200, raw: "{}\n"},
	// the sections CouchDB does not let change over HTTP
	{method: "PUT", path: "/_node/_local/_config/query_servers/x", body: `"y"`, status: 403, err: "forbidden", reason: "Config section blacklisted for modification over HTTP API."},
	{method: "DELETE", path: "/_node/_local/_config/native_query_servers/x", status: 403, err: "forbidden", reason: "Config section blacklisted for modification over HTTP API."},
	{method: "PUT", path: "/_node/_local/_config/os_daemons/x", body: `"y"`, status: 403, err: "forbidden", reason: "Config section blacklisted for modification over HTTP API."},
	// a name that is not a node
	{method: "GET", path: "/_node/nosuch@127.0.0.1/_config/zz_test", status: 404, err: "not_found", reason: "no such node: nosuch@127.0.0.1"},
	{method: "POST", path: "/_node/nosuch@127.0.0.1/_config/_reload", status: 404, err: "not_found", reason: "no such node: nosuch@127.0.0.1"},
	// non-admins
	{method: "GET", path: "/_node/_local/_config", hdr: map[string]string{"Authorization": basic("nobody", "x")}, status: 401, err: "unauthorized", reason: "Name or password is incorrect."},
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

func TestConfigAPI(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "", configSteps)
	// anonymous and a _users member: not a server admin
	mustCall(t, s, 201, "PUT", "/_users/org.couchdb.user:joe", `{"name":"joe","password":"pw","roles":[],"type":"user"}`, nil)
	runSteps(t, s.URL, "joe", "pw", "", []wireStep{
		{method: "GET", path: "/_node/_local/_config", status: 401, err: "unauthorized", reason: "You are not a server admin."},
		{method: "PUT", path: "/_node/_local/_config/zz_test/k", body: `"1"`, status: 401, err: "unauthorized", reason: "You are not a server admin."},
		{method: "GET", path: "/_node/nosuch@127.0.0.1/_config", status: 401, err: "unauthorized", reason: "You are not a server admin."},
	})
	for _, path := range []string{"/_node/_local/_config", "/_node/_local/_config/zz_test", "/_node/nosuch@127.0.0.1/_config"} {
		resp, err := http.DefaultClient.Do(s.NewRequest(t, "GET", path, nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(b), "You are not a server admin.") {
			t.Errorf("anonymous GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	// what was written survives a restart
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/zz_keep/k", `"kept"`, nil)
	s.Restart(t)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "", []wireStep{
		{method: "GET", path: "/_node/_local/_config/zz_keep/k", status: 200, raw: "\"kept\"\n"},
		{method: "GET", path: "/_node/_local/_config/zz%2Fodd", status: 200, raw: "{\"k y/1\":\"v\",\"unié\":\"é\"}\n"},
	})
}

func TestConfigAPIAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	runSteps(t, cs.URL, cs.User, cs.Password, "", configSteps)
	mustCouch := func(method, path, body, user, pw string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, cs.URL+path, strings.NewReader(body))
		req.SetBasicAuth(user, pw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("CouchDB %s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	// a known CouchDB hash, written as it is, logs in (settee reads the same
	// format: TestConfigAdmins)
	mustCouch("PUT", "/_node/_local/_config/admins/eve", `"`+eveHash+`"`, cs.User, cs.Password, 200)
	mustCouch("GET", "/_session", "", "eve", "pw", 200)
	if got := mustCouch("GET", "/_node/_local/_config/admins/eve", "", cs.User, cs.Password, 200); got != `"`+eveHash+"\"\n" {
		t.Fatalf("CouchDB shows the hash as %s", got)
	}
}

// eveHash is CouchDB 3.5.2's hash of the password "pw" (PUT
// _config/admins/eve "pw", 2026-12-01).
const eveHash = "-pbkdf2:sha256-dbb69e7aa2bd0b347c3e68323971e0e156e57d108efb557225318cc37b3bd242,bce8e78524a7832391db2fe72138fd34,600000"

var adminHash = regexp.MustCompile(`^-pbkdf2:sha256-[0-9a-f]{64},[0-9a-f]{32},600000$`)

// startAdminHash is the test server's own admin: hashed as it starts, with
// testserver's lowered iteration count (node.Config.AdminIterations).
var startAdminHash = regexp.MustCompile(`^-pbkdf2:sha256-[0-9a-f]{64},[0-9a-f]{32},[0-9]+$`)

// loginStatus is GET /_session's status as user.
func loginStatus(t *testing.T, s *testserver.Server, user, pw, path string) int {
	t.Helper()
	req := s.NewRequest(t, "GET", path, nil)
	req.SetBasicAuth(user, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Server admins written through _config: a plain password is stored as
// CouchDB's hash, the admin logs in at once, a change or a DELETE is
// seen at once; a hash written as it is (CouchDB's own) logs in too.
func TestConfigAdmins(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	var old, v string
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/admins/bob", `"secret"`, &old)
	if old != "" {
		t.Fatalf("new admin: old value %q", old)
	}
	mustCall(t, s, 200, "GET", "/_node/_local/_config/admins/bob", nil, &v)
	if !adminHash.MatchString(v) {
		t.Fatalf("stored as %q, want CouchDB's -pbkdf2:sha256-<key>,<salt>,600000", v)
	}
	var sec map[string]string
	mustCall(t, s, 200, "GET", "/_node/_local/_config/admins", nil, &sec)
	if !startAdminHash.MatchString(sec[testserver.AdminUser]) || sec["bob"] != v {
		t.Fatalf("admins section %v", sec)
	}
	for _, tc := range []struct {
		user, pw, path string
		want           int
	}{
		{"bob", "secret", "/_node/_local/_config/admins", 200},
		{"bob", "secret", "/_session", 200},
		{"bob", "wrong", "/_session", 401},
	} {
		if got := loginStatus(t, s, tc.user, tc.pw, tc.path); got != tc.want {
			t.Errorf("%s:%s GET %s: %d, want %d", tc.user, tc.pw, tc.path, got, tc.want)
		}
	}
	// a new password: the old one no longer logs in (no cached login)
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/admins/bob", `"secret2"`, &old)
	if old != v {
		t.Fatalf("password change answered %q, want the old hash %q", old, v)
	}
	if got := loginStatus(t, s, "bob", "secret", "/_session"); got != 401 {
		t.Errorf("old password after the change: %d", got)
	}
	if got := loginStatus(t, s, "bob", "secret2", "/_node/_local/_config"); got != 200 {
		t.Errorf("new password: %d", got)
	}
	// CouchDB's hash, written as it is
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/admins/eve", `"`+eveHash+`"`, nil)
	mustCall(t, s, 200, "GET", "/_node/_local/_config/admins/eve", nil, &v)
	if v != eveHash {
		t.Fatalf("a hash written as it is came back as %q", v)
	}
	if got := loginStatus(t, s, "eve", "pw", "/_node/_local/_config"); got != 200 {
		t.Errorf("eve with CouchDB's hash: %d", got)
	}
	// a name with ":" is stored, as CouchDB does (it cannot log in with
	// Basic auth, whose name ends at the first ":")
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/admins/a:b", `"x"`, &old)
	// survives a restart
	s.Restart(t)
	if got := loginStatus(t, s, "bob", "secret2", "/_node/_local/_config"); got != 200 {
		t.Errorf("bob after a restart: %d", got)
	}
	// DELETE answers the hash and bob is gone at once
	mustCall(t, s, 200, "DELETE", "/_node/_local/_config/admins/bob", nil, &old)
	if !adminHash.MatchString(old) {
		t.Fatalf("DELETE answered %q", old)
	}
	if got := loginStatus(t, s, "bob", "secret2", "/_session"); got != 401 {
		t.Errorf("deleted admin: %d", got)
	}
	mustCall(t, s, 404, "DELETE", "/_node/_local/_config/admins/bob", nil, nil)
	// the start admin's password changes through _config too
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/admins/"+testserver.AdminUser, `"`+testserver.AdminPassword+`"`, nil)
	if got := loginStatus(t, s, testserver.AdminUser, testserver.AdminPassword, "/_node/_local/_config"); got != 200 {
		t.Errorf("start admin after a PUT of its password: %d", got)
	}
}

// The settings that take effect at once, each with a bad value refused
// (400, nothing changed) and a DELETE back to the start value.
func TestConfigLiveSettings(t *testing.T) {
	t.Parallel()
	lv := new(slog.LevelVar)
	s := testserver.Start(t, func(c *node.Config) { c.LogLevel = lv; c.Q = 2 })
	mustCall(t, s, 201, "PUT", "/live", nil, nil)
	big := `{"a":"` + strings.Repeat("x", 200) + `"}`
	att20 := `{"_attachments":{"x.txt":{"content_type":"text/plain","data":"MDEyMzQ1Njc4OTAxMjM0NTY3ODk="}}}`
	type check func(t *testing.T)
	for _, tc := range []struct {
		section, key, value, bad string
		after, reset             check
	}{
		{"couchdb", "max_document_size", "100", "abc",
			func(t *testing.T) {
				mustCall(t, s, 413, "PUT", "/live/big", big, nil)
				mustCall(t, s, 413, "POST", "/live/_bulk_docs", `{"docs":[`+big+`]}`, nil)
			},
			func(t *testing.T) { mustCall(t, s, 201, "PUT", "/live/big", big, nil) }},
		{"couchdb", "max_attachment_size", "10", "-1",
			func(t *testing.T) {
				var e struct{ Error, Reason string }
				mustCall(t, s, 413, "PUT", "/live/a1/att.txt", "01234567890123456789", &e)
				if e.Error != "attachment_too_large" || e.Reason != "att.txt" {
					t.Errorf("attachment over the limit: %+v", e)
				}
				mustCall(t, s, 413, "PUT", "/live/a2", att20, nil)
				mustCall(t, s, 413, "POST", "/live/_bulk_docs", `{"docs":[`+att20+`]}`, nil)
				mustCall(t, s, 201, "PUT", "/live/a3/small.txt", "0123", nil)
			},
			func(t *testing.T) { mustCall(t, s, 201, "PUT", "/live/a2", att20, nil) }},
		{"cluster", "q", "1", "0",
			func(t *testing.T) {
				var sh struct{ Shards map[string][]string }
				mustCall(t, s, 201, "PUT", "/q1", nil, nil)
				mustCall(t, s, 200, "GET", "/q1/_shards", nil, &sh)
				if len(sh.Shards) != 1 {
					t.Errorf("cluster/q 1: %d ranges", len(sh.Shards))
				}
			},
			func(t *testing.T) {
				var sh struct{ Shards map[string][]string }
				mustCall(t, s, 201, "PUT", "/q2", nil, nil)
				mustCall(t, s, 200, "GET", "/q2/_shards", nil, &sh)
				if len(sh.Shards) != 2 {
					t.Errorf("cluster/q back to 2: %d ranges", len(sh.Shards))
				}
			}},
		{"chttpd", "require_valid_user", "true", "yes",
			func(t *testing.T) {
				anon(t, s, "GET", "/", 401, "Authentication required.")
				anon(t, s, "GET", "/_up", 401, "Authentication required.")
				anon(t, s, "POST", "/_session", 401, "Name or password is incorrect.")
				if got := loginStatus(t, s, testserver.AdminUser, testserver.AdminPassword, "/"); got != 200 {
					t.Errorf("admin under require_valid_user: %d", got)
				}
			},
			func(t *testing.T) { anon(t, s, "GET", "/", 200, "Welcome") }},
		{"chttpd", "require_valid_user_except_for_up", "true", "1",
			func(t *testing.T) {
				anon(t, s, "GET", "/", 401, "Authentication required.")
				anon(t, s, "GET", "/_up", 200, `"ok"`)
			},
			func(t *testing.T) { anon(t, s, "GET", "/", 200, "Welcome") }},
		{"cluster", "n", "1", "x", func(*testing.T) {}, func(*testing.T) {}},
		{"log", "level", "debug", "bogus",
			func(t *testing.T) {
				if lv.Level() != slog.LevelDebug {
					t.Errorf("log level %v", lv.Level())
				}
			},
			func(t *testing.T) {
				if lv.Level() != slog.LevelInfo {
					t.Errorf("log level after DELETE %v", lv.Level())
				}
			}},
		{"smoosh", "concurrency", "2", "0", func(*testing.T) {}, func(*testing.T) {}},
		{"replicator", "max_jobs", "10", "many", func(*testing.T) {}, func(*testing.T) {}},
	} {
		t.Run(tc.section+"/"+tc.key, func(t *testing.T) {
			path := "/_node/_local/_config/" + tc.section + "/" + tc.key
			var start, old, v string
			// "" and 404 for a key CouchDB's default.ini leaves commented out
			get := func(v *string) {
				t.Helper()
				*v = ""
				var raw json.RawMessage
				if st := call(t, s, "GET", path, nil, &raw); st == 200 {
					_ = json.Unmarshal(raw, v)
				} else if st != 404 {
					t.Fatalf("GET %s: %d %s", path, st, raw)
				}
			}
			get(&start)
			var e struct{ Error string }
			mustCall(t, s, 400, "PUT", path, `"`+tc.bad+`"`, &e)
			if e.Error != "bad_request" {
				t.Errorf("bad value: %+v", e)
			}
			get(&v)
			if v != start {
				t.Fatalf("a refused value changed %q to %q", start, v)
			}
			mustCall(t, s, 200, "PUT", path, `"`+tc.value+`"`, &old)
			if old != start {
				t.Errorf("PUT answered %q, want the start value %q", old, start)
			}
			tc.after(t)
			mustCall(t, s, 200, "DELETE", path, nil, &old)
			if old != tc.value {
				t.Errorf("DELETE answered %q", old)
			}
			get(&v)
			if v != start {
				t.Errorf("after DELETE %q, want the start value %q", v, start)
			}
			tc.reset(t)
		})
	}
	// unknown keys of a known section are stored (CouchDB)
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/smoosh/foo", `"x"`, nil)
	// a stored value wins over the start value at the next start
	mustCall(t, s, 200, "PUT", "/_node/_local/_config/couchdb/max_document_size", `"100"`, nil)
	s.Restart(t)
	mustCall(t, s, 413, "PUT", "/live/big2", big, nil)
}

// anon sends a request without credentials and checks the answer.
func anon(t *testing.T, s *testserver.Server, method, path string, want int, in string) {
	t.Helper()
	var body any
	if method == "POST" {
		body = `{"name":"nobody","password":"x"}`
	}
	resp, err := http.DefaultClient.Do(s.NewRequest(t, method, path, body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want || !strings.Contains(string(b), in) {
		t.Errorf("anonymous %s %s: %d %s, want %d with %s", method, path, resp.StatusCode, b, want, in)
	}
}
