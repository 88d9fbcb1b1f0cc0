package kivik_test

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"testing"

	kivik "github.com/go-kivik/kivik/v4"
	"github.com/go-kivik/kivik/v4/couchdb"
)

// newUser creates a _users doc with a plain password, as a kivik user
// signs someone up; the server hashes it.
func newUser(t *testing.T, e *env, name, password string, roles ...string) {
	t.Helper()
	if roles == nil {
		roles = []string{}
	}
	users := e.admin.DB("_users")
	id := "org.couchdb.user:" + name
	_, err := users.Put(ctx(t), id, map[string]any{"name": name, "password": password, "roles": roles, "type": "user"})
	must(t, "Put "+id, err)
	var stored map[string]any
	must(t, "Get "+id, users.Get(ctx(t), id).ScanDoc(&stored))
	if _, ok := stored["password"]; ok {
		t.Errorf("%s stored with its plain password: %v", id, stored)
	}
	if stored["password_scheme"] == nil || stored["derived_key"] == nil || stored["salt"] == nil {
		t.Errorf("%s: no password_scheme, derived_key, salt: %v", id, stored)
	}
}

// newHashedUser creates a _users doc that carries its PBKDF2 credentials
// already (as a replicated users db does), with few iterations: settee's
// 600,000-iteration hash of a plain password costs seconds under -race, and
// the checks of wrong passwords, never cached, would pay it each time.
func newHashedUser(t *testing.T, e *env, name, password string, roles ...string) {
	t.Helper()
	if roles == nil {
		roles = []string{}
	}
	salt := "0123456789abcdef0123456789abcdef"
	key, err := pbkdf2.Key(sha256.New, password, []byte(salt), 1000, 32)
	must(t, "pbkdf2", err)
	_, err = e.admin.DB("_users").Put(ctx(t), "org.couchdb.user:"+name, map[string]any{
		"name": name, "roles": roles, "type": "user",
		"password_scheme": "pbkdf2", "pbkdf2_prf": "sha256", "iterations": 1000,
		"salt": salt, "derived_key": hex.EncodeToString(key),
	})
	must(t, "Put org.couchdb.user:"+name, err)
}

func testSecurity(t *testing.T, e *env) {
	newUser(t, e, "bob", "bobs-secret", "reader")
	newHashedUser(t, e, "eve", "eves-secret")

	member := e.newDB(t, "member")
	adminOf := e.newDB(t, "adminof")
	other := e.newDB(t, "other")
	byRole := e.newDB(t, "byrole")
	open := e.newDB(t, "open") // the default security: CouchDB 3's admin_only

	def, err := open.Security(ctx(t))
	must(t, "Security of a new db", err)
	if !slices.Equal(def.Members.Roles, []string{"_admin"}) || !slices.Equal(def.Admins.Roles, []string{"_admin"}) {
		t.Errorf("Security of a new db = %+v, want members and admins roles [_admin] (CouchDB 3's default_security = admin_only)", def)
	}

	for _, tc := range []struct {
		db  *kivik.DB
		sec *kivik.Security
	}{
		{member, &kivik.Security{Members: kivik.Members{Names: []string{"bob"}}, Admins: kivik.Members{Names: []string{"carol"}}}},
		{adminOf, &kivik.Security{Admins: kivik.Members{Names: []string{"bob"}}, Members: kivik.Members{Names: []string{"carol"}}}},
		{other, &kivik.Security{Members: kivik.Members{Names: []string{"eve"}}}},
		{byRole, &kivik.Security{Members: kivik.Members{Roles: []string{"reader"}}}},
	} {
		must(t, "SetSecurity "+tc.db.Name(), tc.db.SetSecurity(ctx(t), tc.sec))
		got, err := tc.db.Security(ctx(t))
		must(t, "Security "+tc.db.Name(), err)
		if !slices.Equal(got.Members.Names, tc.sec.Members.Names) || !slices.Equal(got.Admins.Names, tc.sec.Admins.Names) || !slices.Equal(got.Members.Roles, tc.sec.Members.Roles) {
			t.Errorf("Security %s = %+v, want %+v", tc.db.Name(), got, tc.sec)
		}
	}
	for _, db := range []*kivik.DB{member, adminOf, other, byRole, open} {
		_, err := db.Put(ctx(t), "doc", map[string]any{"secret": db.Name()})
		must(t, "admin Put in "+db.Name(), err)
	}

	bob := e.client(t, e.url, couchdb.BasicAuth("bob", "bobs-secret"))
	newHashedUser(t, e, "pat", "pats-secret")
	if _, err := e.client(t, e.url, couchdb.BasicAuth("pat", "pats-secret")).DB("_users").Stats(ctx(t)); kivik.HTTPStatus(err) != http.StatusForbidden {
		t.Errorf("pat (pre-hashed credentials) on _users: %v, want 403 (authenticated, not an admin)", err)
	}
	wrong := e.client(t, e.url, couchdb.BasicAuth("pat", "not-it"))
	anon := e.client(t, e.url)

	// what bob can do
	for _, name := range []string{member.Name(), adminOf.Name(), byRole.Name()} {
		var doc map[string]any
		must(t, "bob Get in "+name, bob.DB(name).Get(ctx(t), "doc").ScanDoc(&doc))
		if doc["secret"] != name {
			t.Errorf("bob Get in %s = %v", name, doc)
		}
		_, err := bob.DB(name).Put(ctx(t), "by-bob", map[string]any{"who": "bob"})
		must(t, "bob Put in "+name, err)
		rs := bob.DB(name).AllDocs(ctx(t))
		n := 0
		for rs.Next() {
			n++
		}
		if rs.Err() != nil || n != 2 {
			t.Errorf("bob AllDocs in %s: %d rows, %v", name, n, rs.Err())
		}
	}
	// a db admin may set the security and write design docs
	must(t, "bob SetSecurity as a db admin", bob.DB(adminOf.Name()).SetSecurity(ctx(t), &kivik.Security{Admins: kivik.Members{Names: []string{"bob"}}}))
	_, err = bob.DB(adminOf.Name()).Put(ctx(t), "_design/bobs", map[string]any{"language": "javascript"})
	must(t, "bob Put design doc as a db admin", err)
	ses, err := bob.Session(ctx(t))
	must(t, "bob Session", err)
	if ses.Name != "bob" || !slices.Equal(ses.Roles, []string{"reader"}) || ses.AuthenticationMethod != "default" {
		t.Errorf("bob (basic auth) Session = %+v, want bob [reader] by default (basic)", ses)
	}

	// what he cannot
	// CouchDB 3.5.2 answers a member's PUT /db/_security with 500
	// {"error":"error","reason":"no_majority"}; settee the due 403
	// (docs/api.md: where CouchDB answers 500 for bad input, settee the due 4xx)
	memberSetSecurity, memberSetSecurityReason := http.StatusForbidden, "You are not a db or server admin."
	if !e.settee {
		memberSetSecurity, memberSetSecurityReason = http.StatusInternalServerError, "no_majority"
	}
	errPutDesign := answered(func() error {
		_, err := bob.DB(member.Name()).Put(ctx(t), "_design/nope", map[string]any{"language": "javascript"})
		return err
	})
	errPutOther := answered(func() error {
		_, err := bob.DB(other.Name()).Put(ctx(t), "x", map[string]any{})
		return err
	})
	errSetSecMember := answered(func() error { return bob.DB(member.Name()).SetSecurity(ctx(t), &kivik.Security{}) })
	_, errAllDBs := bob.AllDBs(ctx(t))
	_, errSecOther := bob.DB(other.Name()).Security(ctx(t))
	_, errWrong := wrong.DB(member.Name()).Stats(ctx(t))
	_, errAnon := anon.DB(member.Name()).Stats(ctx(t))
	for _, tc := range []struct {
		what   string
		err    error
		status int
		reason string
	}{
		{"bob Get in a db he is not a member of", bob.DB(other.Name()).Get(ctx(t), "doc").Err(), http.StatusForbidden, "You are not allowed to access this db."},
		{"bob Get in an admin-only db", bob.DB(open.Name()).Get(ctx(t), "doc").Err(), http.StatusForbidden, "You are not allowed to access this db."},
		{"bob Put in a db he is not a member of", errPutOther, http.StatusForbidden, "You are not allowed to access this db."},
		{"bob SetSecurity as a member", errSetSecMember, memberSetSecurity, memberSetSecurityReason},
		{"bob Put design doc as a member", errPutDesign, http.StatusForbidden, "You are not a db or server admin."},
		{"bob Security of a db he is not a member of", errSecOther, http.StatusForbidden, "You are not allowed to access this db."},
		{"bob CreateDB", bob.CreateDB(ctx(t), e.dbName("bobs")), http.StatusUnauthorized, "You are not a server admin."},
		{"bob DestroyDB", bob.DestroyDB(ctx(t), member.Name()), http.StatusUnauthorized, "You are not a server admin."},
		{"bob AllDBs", errAllDBs, http.StatusUnauthorized, "You are not a server admin."},
		// _users is admin-only in CouchDB 3.5.2, even a user's own doc
		{"bob Get his own user doc", bob.DB("_users").Get(ctx(t), "org.couchdb.user:bob").Err(), http.StatusForbidden, "You are not allowed to access this db."},
		{"bob Get eve's user doc", bob.DB("_users").Get(ctx(t), "org.couchdb.user:eve").Err(), http.StatusForbidden, "You are not allowed to access this db."},
		{"wrong password", errWrong, http.StatusUnauthorized, "Name or password is incorrect."},
		{"anonymous in a members-only db", errAnon, http.StatusUnauthorized, "You are not authorized to access this db."},
	} {
		wantStatus(t, tc.what, tc.err, tc.status, tc.reason)
	}

	// a member removed loses access
	must(t, "SetSecurity drop bob", member.SetSecurity(ctx(t), &kivik.Security{Members: kivik.Members{Names: []string{"carol"}}}))
	wantStatus(t, "bob Get after removal", bob.DB(member.Name()).Get(ctx(t), "doc").Err(), http.StatusForbidden, "You are not allowed to access this db.")
}

func testSession(t *testing.T, e *env) {
	newHashedUser(t, e, "sam", "sams-secret", "writer", "reader")

	// kivik's cookie auth: POST /_session once, then the AuthSession cookie
	sam := e.client(t, e.url, couchdb.CookieAuth("sam", "sams-secret"))
	ses, err := sam.Session(ctx(t))
	must(t, "sam Session", err)
	if ses.Name != "sam" || !slices.Equal(ses.Roles, []string{"writer", "reader"}) || ses.AuthenticationMethod != "cookie" {
		t.Errorf("sam (cookie auth) Session = %+v, want sam [writer reader] by cookie", ses)
	}
	if !slices.Contains(ses.AuthenticationHandlers, "cookie") || !slices.Contains(ses.AuthenticationHandlers, "default") {
		t.Errorf("sam Session handlers %v, want cookie and default", ses.AuthenticationHandlers)
	}
	// the cookie serves further requests
	db := e.newDB(t, "session")
	must(t, "SetSecurity", db.SetSecurity(ctx(t), &kivik.Security{Members: kivik.Members{Roles: []string{"writer"}}}))
	_, err = sam.DB(db.Name()).Put(ctx(t), "by-sam", map[string]any{})
	must(t, "sam Put with the cookie", err)

	// the admin, credentials in the URL: kivik's default is cookie auth too
	ses, err = e.admin.Session(ctx(t))
	must(t, "admin Session", err)
	if ses.Name != e.user || !slices.Contains(ses.Roles, "_admin") || ses.AuthenticationMethod != "cookie" {
		t.Errorf("admin (URL credentials) Session = %+v, want %s with _admin by cookie", ses, e.user)
	}

	// nobody
	ses, err = e.client(t, e.url).Session(ctx(t))
	must(t, "anonymous Session", err)
	if ses.Name != "" || len(ses.Roles) != 0 {
		t.Errorf("anonymous Session = %+v, want no name, no roles", ses)
	}

	// a wrong password: the cookie login fails, and so does the request
	bad := e.client(t, e.url, couchdb.CookieAuth("sam", "wrong"))
	_, err = bad.Session(ctx(t))
	wantStatus(t, "cookie auth with a wrong password", err, http.StatusUnauthorized, "Name or password is incorrect.")
}
