package attack

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// selfAdmin is attack 1: user a rewrites its own _users doc with a
// field that is "roles" to some reader and not to the _users rules, and a
// password hash of its own (10 iterations) so that the doc it wrote is
// the one authentication reads. rolesJSON is the doc's roles members as
// raw JSON.
func selfAdmin(name, rolesJSON, family string) attackCase {
	return attackCase{
		name: "1-self-admin-" + name, role: "user", family: family,
		attack: func(e *env) {
			doc := e.get(e.tg.admin, "/_users/org.couchdb.user:"+e.a.name)
			salt := "00112233445566778899aabbccddeeff"
			// sha256's PBKDF2 key is 32 bytes: CouchDB checks a
			// pbkdf2_prf sha256 derived_key of that length
			dk, err := pbkdf2.Key(sha256.New, e.a.pw, []byte(salt), 10, 32)
			if err != nil {
				e.t.Fatal(err)
			}
			body := fmt.Sprintf(`{"_rev":%q,"name":%q,"type":"user",%s,"password_scheme":"pbkdf2","pbkdf2_prf":"sha256","iterations":10,"salt":%q,"derived_key":%q}`,
				doc["_rev"], e.a.name, rolesJSON, salt, hex.EncodeToString(dk))
			r := e.req(e.a, "PUT", "/_users/org.couchdb.user:"+e.a.name, body)
			// CouchDB stores the doc (the extra member is no role), or
			// refuses one whose roles, once decoded, are ["_admin"]
			if r.status != 201 && !(r.status == 403 && r.errName() == "forbidden") {
				e.t.Errorf("want 201, or 403 forbidden: %s", r)
			}
			e.t.Logf("%s", r)
			// CouchDB's credentials cache can still hold the old salt
			// in the second of the change: a cookie made then is
			// checked against it and signs nobody in
			time.Sleep(1100 * time.Millisecond)
			for _, w := range []who{e.a, e.login(e.a)} {
				s := e.req(w, "GET", "/_session", nil)
				ctx, _ := s.json()["userCtx"].(map[string]any)
				if s.status != 200 || ctx["name"] != e.a.name || fmt.Sprint(ctx["roles"]) != "[]" {
					e.t.Errorf("want userCtx %s with roles []: %s", e.a.name, s)
				}
				e.refused(e.req(w, "PUT", "/_node/_local/_config/admins/"+e.name("evil"), `"evil-pw"`), 401, "unauthorized")
			}
		},
		readBack: func(e *env) {
			admins := e.get(e.tg.admin, "/_node/_local/_config/admins")
			if _, ok := admins[e.name("evil")]; ok {
				e.t.Errorf("_config/admins has %s: %v", e.name("evil"), admins)
			}
			if r := e.req(who{name: e.name("evil"), pw: "evil-pw"}, "GET", "/_session", nil); r.status == 200 && strings.Contains(string(r.body), "_admin") {
				e.t.Errorf("the planted admin logs in: %s", r)
			}
		},
	}
}

// hugeIterations is issue 35's attack on password hashing: user a, who
// may edit its own _users doc, sets "iterations" to 100000000000 with a
// derived key of its own, so that every login as a (by anyone, with any
// password) would run PBKDF2 for hours. CouchDB 3.5.2 stores the doc
// (201: the write rules ask only for a number) and refuses every such
// login before hashing: 403 forbidden "Iteration count is too high for
// this server" ([chttpd_auth] max_iterations, 1e9), in milliseconds, not
// counted toward the lockout.
func hugeIterations(name, it string, want int) attackCase {
	return attackCase{
		name: "35-iterations-" + name, role: "user",
		attack: func(e *env) {
			doc := e.get(e.tg.admin, "/_users/org.couchdb.user:"+e.a.name)
			body := fmt.Sprintf(`{"_rev":%q,"name":%q,"type":"user","roles":[],"password_scheme":"pbkdf2","pbkdf2_prf":"sha256","iterations":%s,"salt":"00112233445566778899aabbccddeeff","derived_key":%q}`,
				doc["_rev"], e.a.name, it, strings.Repeat("ab", 32))
			if r := e.req(e.a, "PUT", "/_users/org.couchdb.user:"+e.a.name, body); r.status != 201 {
				e.t.Fatalf("want 201 (CouchDB stores it): %s", r)
			}
			// CouchDB's credentials cache holds the old doc for a moment
			// after the write: a's right password still signs in then
			// (no failure counted), until the new doc is read
			poll(5*time.Second, func() bool { return e.req(e.a, "GET", "/_session", nil).status != 200 })
			start := time.Now()
			for i := range 8 {
				for _, r := range []response{
					e.req(e.a, "GET", "/_session", nil),
					e.req(who{name: e.a.name, pw: fmt.Sprint("guess", i)}, "GET", "/", nil),
					e.req(anonymous, "POST", "/_session", fmt.Sprintf(`{"name":%q,"password":"guess%d"}`, e.a.name, i)),
				} {
					e.refused(r, want, map[int]string{403: "forbidden", 500: "unknown_error"}[want])
					if want == 403 && !strings.Contains(string(r.body), "Iteration count is too high for this server") {
						e.t.Errorf("want the iteration count refused: %s", r)
					}
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				e.t.Errorf("24 refused logins took %v: a hash was computed", d)
			}
		},
		readBack: func(e *env) {
			doc := e.get(e.tg.admin, "/_users/org.couchdb.user:"+e.a.name)
			if fmt.Sprint(doc["iterations"]) != fmt.Sprint(1e11) {
				e.t.Errorf("stored iterations %v", doc["iterations"])
			}
			// the server still answers at once, and b logs in
			start := time.Now()
			if r := e.req(e.b, "GET", "/_session", nil); r.status != 200 || time.Since(start) > 2*time.Second {
				e.t.Errorf("b's login after the attack: %s in %v", r, time.Since(start))
			}
		},
	}
}

// usersLeak is attack 7: user a, a member of _users, asks for user b's
// doc in every way there is; nothing of b's password hash may show.
func usersLeak(name, family string, send func(e *env, bid string) response, want ...any) attackCase {
	return attackCase{
		name: "7-users-leak-" + name, role: "user", family: family,
		attack: func(e *env) {
			bid := "org.couchdb.user:" + e.b.name
			doc := e.get(e.tg.admin, "/_users/"+bid)
			r := send(e, bid)
			if len(want) > 0 {
				e.refused(r, want...)
			}
			for _, k := range []string{"derived_key", "salt"} {
				if v, _ := doc[k].(string); v == "" || strings.Contains(string(r.body), v) {
					e.t.Errorf("%s of %s shows (or is empty): %s", k, e.b.name, r)
				}
			}
			if strings.Contains(string(r.body), `"derived_key"`) {
				e.t.Errorf("a derived_key shows: %s", r)
			}
		},
		readBack: func(e *env) {
			r := e.admin("GET", "/_users/_local/"+e.id, nil)
			e.refused(r, 404, "not_found")
		},
	}
}

func init() {
	addGroup("users",
		selfAdmin("Roles", `"roles":[],"Roles":["_admin"]`, "1"),
		selfAdmin("ROLES", `"roles":[],"ROLES":["_admin"]`, "1"),
		selfAdmin("rOles", `"roles":[],"rOles":["_admin"]`, "1"),
		selfAdmin("escaped", `"\u0072oles":["_admin"]`, ""),
		selfAdmin("duplicate", `"roles":[],"roles":["_admin"]`, ""),
		selfAdmin("duplicate-reversed", `"roles":["_admin"],"roles":[]`, ""),

		usersLeak("find", "7", func(e *env, bid string) response {
			return e.req(e.a, "POST", "/_users/_find", fmt.Sprintf(`{"selector":{"name":%q}}`, e.b.name))
		}),
		usersLeak("copy", "7", func(e *env, bid string) response {
			return e.req(e.a, "COPY", "/_users/"+bid, nil, "Destination", "_local/"+e.id)
		}, 404, "not_found"),
		usersLeak("get", "", func(e *env, bid string) response {
			return e.req(e.a, "GET", "/_users/"+bid, nil)
		}, 404, "not_found"),
		usersLeak("all-docs", "", func(e *env, bid string) response {
			return e.req(e.a, "GET", "/_users/_all_docs?include_docs=true", nil)
		}),
		usersLeak("all-docs-keys", "", func(e *env, bid string) response {
			return e.req(e.a, "POST", "/_users/_all_docs?include_docs=true", fmt.Sprintf(`{"keys":[%q]}`, bid))
		}),
		usersLeak("changes", "", func(e *env, bid string) response {
			return e.req(e.a, "GET", "/_users/_changes?include_docs=true", nil)
		}),
		usersLeak("changes-doc-ids", "", func(e *env, bid string) response {
			return e.req(e.a, "POST", "/_users/_changes?include_docs=true&filter=_doc_ids", fmt.Sprintf(`{"doc_ids":[%q]}`, bid))
		}),
		usersLeak("bulk-get", "", func(e *env, bid string) response {
			return e.req(e.a, "POST", "/_users/_bulk_get", fmt.Sprintf(`{"docs":[{"id":%q}]}`, bid))
		}),
		usersLeak("open-revs", "", func(e *env, bid string) response {
			return e.req(e.a, "GET", "/_users/"+bid+"?open_revs=all", nil)
		}),
		usersLeak("design-docs", "", func(e *env, bid string) response {
			return e.req(e.a, "GET", "/_users/_design_docs?include_docs=true", nil)
		}),
		usersLeak("view", "", func(e *env, bid string) response {
			// a view needs a design doc: a user cannot write one in _users
			return e.req(e.a, "PUT", "/_users/_design/"+e.id, `{"views":{"v":{"map":"function(d){emit(d._id,d)}"}}}`)
		}, 404, "not_found"),

		hugeIterations("1e11", "100000000000", 403),
		// jiffy reads 1e11 as a float, which CouchDB's login has no
		// clause for: 500 unknown_error function_clause
		hugeIterations("1e11-float", "1e11", 500),

		attackCase{name: "cookie-after-password-change", role: "user",
			attack: func(e *env) {
				c := e.login(e.a)
				doc := e.get(e.tg.admin, "/_users/org.couchdb.user:"+e.a.name)
				doc["password"] = "changed-" + e.id
				time.Sleep(1100 * time.Millisecond)
				e.must("PUT", "/_users/org.couchdb.user:"+e.a.name, doc)
				cookieRefused(e, c)
			}},
		attackCase{name: "cookie-after-user-deleted", role: "user",
			attack: func(e *env) {
				c := e.login(e.a)
				doc := e.get(e.tg.admin, "/_users/org.couchdb.user:"+e.a.name)
				time.Sleep(1100 * time.Millisecond)
				e.must("DELETE", "/_users/org.couchdb.user:"+e.a.name+"?rev="+doc["_rev"].(string), nil)
				cookieRefused(e, c)
			}},
	)
}

// cookieRefused checks (the change is made a second after the login:
// CouchDB still took a cookie made in the second of a password change
// that followed it)
// cookieRefused checks an old cookie of a no longer signs a in: neither
// /_session nor a database a is a member of knows it.
func cookieRefused(e *env, c who) {
	e.t.Helper()
	db := e.db("members", []string{e.a.name}, nil)
	ok := false
	poll(3*time.Second, func() bool {
		s := e.req(c, "GET", "/_session", nil)
		ctx, _ := s.json()["userCtx"].(map[string]any)
		ok = ctx == nil || ctx["name"] != e.a.name
		return ok
	})
	s := e.req(c, "GET", "/_session", nil)
	if !ok {
		e.t.Errorf("the old cookie still signs %s in: %s", e.a.name, s)
	}
	e.t.Logf("%s", s)
	e.refused(e.req(c, "GET", "/"+db, nil), 401, "unauthorized")
}
