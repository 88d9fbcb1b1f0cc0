package httpgw_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// userSteps are what CouchDB 3.5.2 answers about _users (asked
// 2026-12-01): its fixed admin-only _security, the doc rules of
// _design/_auth, hashing on write, who may read and list what, and logins
// that follow a password change at once.
var userSteps = []wireStep{
	// few PBKDF2 iterations keep the test quick; the setting is live
	{method: "PUT", path: "/_node/_local/_config/chttpd_auth/iterations", body: `"1000"`, status: 200},
	{method: "GET", path: "/_users/_security", status: 200, inBody: `"members":{"roles":["_admin"]}`},
	{method: "PUT", path: "/_users/_security", body: `{}`, status: 403, err: "forbidden", reason: "You can't edit the security object of the user database."},
	{method: "PUT", path: "/_users/org.couchdb.user:bob", as: "-", body: `{"name":"bob","password":"pw","roles":[],"type":"user"}`,
		status: 401, err: "unauthorized", reason: "You are not authorized to access this db."},
	{method: "PUT", path: "/_users/org.couchdb.user:bob", body: `{"name":"bob","password":"pw","roles":[],"type":"user"}`, status: 201, keep: "bob1"},
	{method: "PUT", path: "/_users/org.couchdb.user:al", body: `{"name":"al","password":"pw","roles":["r1"],"type":"user"}`, status: 201},
	{method: "GET", path: "/_session", as: "al:pw", status: 200, inBody: `"userCtx":{"name":"al","roles":["r1"]}`},
	{method: "GET", path: "/_users/org.couchdb.user:bob", as: "bob:pw", status: 403, err: "forbidden", reason: "You are not allowed to access this db."},
	{method: "GET", path: "/_users/_all_docs", as: "bob:pw", status: 401, err: "unauthorized", reason: "You are not a server admin."},
	// with the members taken away, a user reads and edits its own doc only
	{method: "PUT", path: "/_node/_local/_config/couchdb/users_db_security_editable", body: `"true"`, status: 200},
	{method: "PUT", path: "/_users/_security", body: `{}`, status: 200},
	{method: "GET", path: "/_users/org.couchdb.user:bob", as: "bob:pw", status: 200, inBody: `"iterations":1000`},
	{method: "GET", path: "/_users/org.couchdb.user:bob", status: 200, inBody: `"password_scheme":"pbkdf2"`},
	{method: "GET", path: "/_users/org.couchdb.user:al", as: "bob:pw", status: 404, err: "not_found", reason: "missing"},
	{method: "GET", path: "/_users/org.couchdb.user:al", as: "-", status: 404, err: "not_found", reason: "missing"},
	{method: "GET", path: "/_users/_design_docs", as: "bob:pw", status: 200},
	{method: "GET", path: "/_users/_all_docs", as: "bob:pw", status: 401, err: "unauthorized", reason: "You are not a server admin."},
	{method: "GET", path: "/_users/_changes", as: "bob:pw", status: 401, err: "unauthorized", reason: "You are not a server admin."},
	{method: "POST", path: "/_users/_changes", as: "bob:pw", body: `{}`, status: 401, err: "unauthorized", reason: "You are not a server admin."},
	{method: "POST", path: "/_users/_all_docs", as: "bob:pw", body: `{"keys":["org.couchdb.user:bob"]}`, status: 401, err: "unauthorized", reason: "You are not a server admin."},
	{method: "GET", path: "/_users", as: "bob:pw", status: 200, inBody: `"db_name":"_users"`},
	{method: "PUT", path: "/_users/org.couchdb.user:bob", as: "bob:pw", body: `{"_rev":"{bob1}","name":"bob","roles":["boss"],"type":"user"}`,
		status: 403, err: "forbidden", reason: "Only _admin may edit roles"},
	{method: "PUT", path: "/_users/org.couchdb.user:al", as: "bob:pw", body: `{"name":"al","roles":[],"type":"user"}`, status: 404, err: "not_found", reason: "missing"},
	{method: "DELETE", path: "/_users/org.couchdb.user:al?rev=1-x", as: "bob:pw", status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/_users/_local/x", as: "bob:pw", body: `{}`, status: 404, err: "not_found", reason: "missing"},
	{method: "PUT", path: "/_users/_design/x", as: "bob:pw", body: `{}`, status: 404, err: "not_found", reason: "missing"},
	{method: "COPY", path: "/_users/org.couchdb.user:bob", as: "bob:pw", hdr: map[string]string{"Destination": "org.couchdb.user:bob2"},
		status: 404, err: "not_found", reason: "missing"},
	{method: "POST", path: "/_users/_bulk_docs", as: "bob:pw", body: `{"new_edits":false,"docs":[{"_id":"org.couchdb.user:bob","_rev":"9-abc","name":"bob","roles":["x"],"type":"user"}]}`,
		status: 201, inBody: `"rev":"9-abc","error":"forbidden","reason":"Only _admin may set roles"`}, // a rev with no parent here: no oldDoc
	// signing up: anyone may create a user without roles
	{method: "PUT", path: "/_users/org.couchdb.user:zed", as: "-", body: `{"name":"zed","roles":["x"],"type":"user","password":"p"}`,
		status: 403, err: "forbidden", reason: "Only _admin may set roles"},
	{method: "PUT", path: "/_users/org.couchdb.user:zed", as: "-", body: `{"name":"zed","roles":[],"type":"user","password":"p"}`, status: 201},
	{method: "GET", path: "/_users/org.couchdb.user:zed", as: "zed:p", status: 200, inBody: `"name":"zed"`},
	{method: "POST", path: "/_users/_bulk_docs", as: "-", body: `{"docs":[{"_id":"org.couchdb.user:k","name":"k","roles":["x"],"type":"user","password":"p"},{"_id":"org.couchdb.user:k2","name":"k2","roles":[],"type":"user","password":"p"}]}`,
		status: 201, inBody: `[{"id":"org.couchdb.user:k","error":"forbidden","reason":"Only _admin may set roles"},{"ok":true,"id":"org.couchdb.user:k2"`},
	// a new password counts at once, the old one no more
	{method: "GET", path: "/_session", as: "bob:pw", status: 200, inBody: `"name":"bob"`},
	{method: "PUT", path: "/_users/org.couchdb.user:bob", as: "bob:pw", body: `{"_rev":"{bob1}","name":"bob","roles":[],"type":"user","password":"pw2"}`, status: 201, keep: "bob2"},
	{method: "GET", path: "/_session", as: "bob:pw2", status: 200, inBody: `"userCtx":{"name":"bob","roles":[]}`, lags: true},
	{method: "GET", path: "/_session", as: "bob:pw", status: 401, err: "unauthorized", reason: "Name or password is incorrect.", lags: true},
	// the rules of _design/_auth
	{method: "POST", path: "/_users", as: "-", body: `{"_id":"org.couchdb.user:_x","name":"_x","roles":[],"type":"user","password":"p"}`,
		status: 403, err: "forbidden", reason: "Username may not start with underscore."},
	{method: "POST", path: "/_users", as: "-", body: `{"_id":"org.couchdb.user:a:b","name":"a:b","roles":[],"type":"user","password":"p"}`,
		status: 403, err: "forbidden", reason: "Character `:` is not allowed in usernames."},
	{method: "POST", path: "/_users", as: "-", body: `{"_id":"org.couchdb.user:q","name":"w","roles":[],"type":"user","password":"p"}`,
		status: 403, err: "forbidden", reason: "Doc ID must be of the form org.couchdb.user:name"},
	{method: "POST", path: "/_users", as: "-", body: `{"_id":"foo","type":"x"}`, status: 403, err: "forbidden", reason: "doc.type must be user"},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:r","name":"r","roles":["_admin"],"type":"user","password":"p"}`,
		status: 403, err: "forbidden", reason: "No system roles (starting with underscore) in users db."},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:pp","name":"pp","roles":[],"type":"user","password":5}`,
		status: 403, err: "forbidden", reason: "Password value of '5' is invalid."},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:pr","name":"pr","roles":[],"type":"user","password_scheme":"bcrypt"}`,
		status: 403, err: "forbidden", reason: "Password scheme `bcrypt` not supported."},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:ps","name":"ps","roles":"x","type":"user"}`,
		status: 403, err: "forbidden", reason: "doc.roles must be an array"},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:pt","name":"pt","roles":[1],"type":"user"}`,
		status: 403, err: "forbidden", reason: "doc.roles can only contain strings"},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:pu","name":"pu","type":"user"}`,
		status: 403, err: "forbidden", reason: "doc.roles must exist"},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:","name":"","roles":[],"type":"user"}`,
		status: 403, err: "forbidden", reason: "doc.name is required"},
	{method: "POST", path: "/_users", body: `{"_id":"org.couchdb.user:m","name":"m","roles":["_metrics"],"type":"user"}`, status: 201},
	{method: "PUT", path: "/_users/org.couchdb.user:bob", body: `{"_rev":"{bob2}","name":"bobby","roles":[],"type":"user"}`,
		status: 403, err: "forbidden", reason: "Doc ID must be of the form org.couchdb.user:name"},
	// an admin gives roles; the user logs in with them at once
	{method: "PUT", path: "/_users/org.couchdb.user:bob", body: `{"_rev":"{bob2}","name":"bob","roles":["boss"],"type":"user","password":"pw3"}`, status: 201, keep: "bob3"},
	{method: "GET", path: "/_session", as: "bob:pw3", status: 200, inBody: `"userCtx":{"name":"bob","roles":["boss"]}`, lags: true},
	{method: "DELETE", path: "/_users/org.couchdb.user:bob?rev={bob3}", as: "bob:pw3", status: 200},
	{method: "GET", path: "/_session", as: "bob:pw3", status: 401, err: "unauthorized", reason: "Name or password is incorrect.", lags: true},
}

func TestUsersDB(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	// CouchDB writes _design/_auth when its auth cache first opens
	// _users, some seconds after the database exists; settee at start
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "_users", []wireStep{
		{method: "GET", path: "/_users/_design/_auth", status: 200, inBody: `"validate_doc_update":"function (newDoc, oldDoc, userCtx, secObj)`},
		{method: "GET", path: "/_users/_design_docs", status: 200, inBody: `"id":"_design/_auth"`},
	})
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "_users", userSteps)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "_users", []wireStep{
		{method: "GET", path: "/_users/_design/_auth", as: "zed:p", status: 403, err: "forbidden", reason: "Only administrators can view design docs in the users database."},
		{method: "GET", path: "/_users/_design%2F_auth", as: "zed:p", status: 403}, // after the 301, which the client follows
		// CouchDB 3.5 answers every item here with an internal_fabric_error
		{method: "POST", path: "/_users/_bulk_get", as: "zed:p", body: `{"docs":[{"id":"org.couchdb.user:zed"},{"id":"org.couchdb.user:al"}]}`,
			status: 200, inBody: `"error":{"id":"org.couchdb.user:al","rev":"undefined","error":"not_found","reason":"missing"}`},
		{method: "POST", path: "/_users/_bulk_get", as: "zed:p", body: `{"docs":[{"id":"org.couchdb.user:zed"}]}`,
			status: 200, inBody: `"ok":{"_id":"org.couchdb.user:zed"`},
		{method: "GET", path: "/_users/org.couchdb.user:al?open_revs=all", as: "zed:p", hdr: map[string]string{"Accept": "application/json"},
			status: 404, err: "not_found", reason: "missing"},
		{method: "PUT", path: "/_users/org.couchdb.user:al/a.txt", as: "zed:p", body: "x", hdr: map[string]string{"Content-Type": "text/plain"},
			status: 404, err: "not_found", reason: "missing"},
	})
}

func TestUsersDBAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	// until CouchDB has written _design/_auth its rules do not apply
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", cs.URL+"/_users/_design/_auth", nil)
		req.SetBasicAuth(cs.User, cs.Password)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("CouchDB wrote no _users/_design/_auth in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("_design/_auth there after %v", time.Since(start))
	// CouchDB's auth cache follows _users' changes feed: a login may see
	// a change late (settee's sees it at once: TestUsersDB asks once)
	steps := slices.Clone(userSteps)
	for i := range steps {
		if steps[i].lags {
			steps[i].retry = 5 * time.Second
		}
	}
	runSteps(t, cs.URL, cs.User, cs.Password, "_users", steps)
}
