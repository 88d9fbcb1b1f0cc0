package attack

import (
	"strings"
	"time"
)

// repWait waits until _scheduler/docs/_replicator/id shows a state the
// job stays in for a while (completed, failed, crashing, or pending
// after an error), or 12 s have passed, and answers that answer's body.
func repWait(e *env, id string) string {
	e.t.Helper()
	var last string
	poll(12*time.Second, func() bool {
		r := e.admin("GET", "/_scheduler/docs/_replicator/"+id, nil)
		last = string(r.body)
		st, _ := r.json()["state"].(string)
		switch st {
		case "completed", "failed", "crashing", "error":
			return true
		}
		// a doc the scheduler refuses to run gets _replication_state
		d := e.admin("GET", "/_replicator/"+id, nil).json()
		if s, _ := d["_replication_state"].(string); s == "failed" || s == "completed" || s == "error" {
			last += " doc: " + string(e.admin("GET", "/_replicator/"+id, nil).body)
			return true
		}
		return false
	})
	e.t.Logf("replication %s: %s", id, last)
	return last
}

// secretDB is a database only the server admin reads, with doc s1;
// mine is a database a administers.
func secretDB(e *env) {
	e.t.Helper()
	e.v["secret"] = e.db("secret", nil, nil)
	e.security(e.v["secret"], nil, nil)
	e.must("PUT", "/"+e.v["secret"]+"/_security", `{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}`)
	e.put(e.v["secret"], "s1", map[string]any{"secret": "the-secret-" + e.id})
	e.v["mine"] = e.db("mine", nil, []string{e.a.name})
}

// repDoc writes a replication doc into _replicator as w and answers
// the write's answer.
func repDoc(e *env, w who, id string, doc map[string]any) response {
	e.t.Helper()
	return e.req(w, "PUT", "/_replicator/"+id, doc)
}

func noSecretIn(e *env, db string) {
	e.t.Helper()
	r := e.admin("GET", "/"+db+"/_all_docs?include_docs=true", nil)
	if strings.Contains(string(r.body), "the-secret-"+e.id) {
		e.t.Errorf("the secret reached %s: %s", db, r)
	}
}

func replicatorCase(name, family string, doc func(e *env) map[string]any, readBack func(e *env)) attackCase {
	return attackCase{name: name, role: "user", family: family,
		setup: secretDB,
		attack: func(e *env) {
			r := repDoc(e, e.a, e.id, doc(e))
			e.t.Logf("%s", r)
			if r.status == 201 {
				repWait(e, e.id)
			}
		},
		readBack: func(e *env) {
			noSecretIn(e, e.v["mine"])
			if readBack != nil {
				readBack(e)
			}
			// stop the job: the doc is the admin's to delete
			if d := e.admin("GET", "/_replicator/"+e.id, nil); d.status == 200 {
				e.admin("DELETE", "/_replicator/"+e.id+"?rev="+d.json()["_rev"].(string), nil)
			}
		}}
}

func init() {
	addGroup("replicator",
		replicatorCase("4-replicator-local-names", "4", func(e *env) map[string]any {
			return map[string]any{"source": e.v["secret"], "target": e.v["mine"]}
		}, nil),
		replicatorCase("4-replicator-url-without-credentials", "", func(e *env) map[string]any {
			return map[string]any{"source": e.dbURL(anonymous, e.v["secret"]), "target": e.dbURL(e.a, e.v["mine"])}
		}, nil),
		replicatorCase("4-replicator-create-target", "", func(e *env) map[string]any {
			return map[string]any{"source": e.dbURL(e.a, e.v["mine"]), "target": e.dbURL(e.a, e.name("created")), "create_target": true}
		}, func(e *env) {
			e.refused(e.admin("GET", "/"+e.name("created"), nil), 404, "not_found")
		}),
		replicatorCase("4-replicator-create-target-local", "4", func(e *env) map[string]any {
			return map[string]any{"source": e.v["mine"], "target": e.name("created"), "create_target": true}
		}, func(e *env) {
			e.refused(e.admin("GET", "/"+e.name("created"), nil), 404, "not_found")
		}),
		attackCase{name: "4-replicator-admin-user-into-users", role: "user", family: "4",
			setup: func(e *env) {
				e.v["mine"] = e.db("mine", nil, []string{e.a.name})
				e.put(e.v["mine"], "org.couchdb.user:"+e.name("evil"), map[string]any{
					"name": e.name("evil"), "type": "user", "roles": []string{"_admin"}, "password": "evil-pw"})
			},
			attack: func(e *env) {
				for i, target := range []string{e.dbURL(e.a, "_users"), "_users"} {
					id := e.id + "-" + string(rune('a'+i))
					r := repDoc(e, e.a, id, map[string]any{"source": e.dbURL(e.a, e.v["mine"]), "target": target})
					e.t.Logf("%s", r)
					if r.status == 201 {
						repWait(e, id)
					}
				}
			},
			readBack: func(e *env) {
				s := e.req(who{name: e.name("evil"), pw: "evil-pw"}, "GET", "/_session", nil)
				if strings.Contains(string(s.body), "_admin") {
					e.t.Errorf("the replicated user is an admin: %s", s)
				}
				r := e.admin("GET", "/_users/org.couchdb.user:"+e.name("evil"), nil)
				if r.status == 200 && strings.Contains(string(r.body), "_admin") {
					e.t.Errorf("_users holds a user with _admin: %s", r)
				}
			}},
		attackCase{name: "4-replicator-credentials-hidden", role: "user", family: "4",
			setup: func(e *env) {
				e.v["mine"] = e.db("mine", nil, []string{e.a.name})
				r := repDoc(e, e.a, e.id, map[string]any{"source": e.dbURL(e.a, e.v["mine"]), "target": e.dbURL(e.a, e.v["mine"]+"-copy"), "continuous": true})
				if r.status != 201 {
					e.t.Fatalf("setup: %s", r)
				}
			},
			attack: func(e *env) {
				for _, r := range []response{
					e.req(e.b, "GET", "/_replicator/"+e.id, nil),
					e.req(e.b, "GET", "/_replicator/_all_docs?include_docs=true", nil),
					e.req(e.b, "POST", "/_replicator/_all_docs?include_docs=true", `{"keys":["`+e.id+`"]}`),
					e.req(e.b, "GET", "/_replicator/_changes?include_docs=true", nil),
					e.req(e.b, "POST", "/_replicator/_find", `{"selector":{"_id":"`+e.id+`"}}`),
					e.req(e.b, "POST", "/_replicator/_bulk_get", `{"docs":[{"id":"`+e.id+`"}]}`),
					e.req(e.b, "GET", "/_replicator/"+e.id+"?open_revs=all", nil),
				} {
					e.t.Logf("%s", r)
					if strings.Contains(string(r.body), e.a.pw) {
						e.t.Errorf("%s's password shows to %s: %s", e.a.name, e.b.name, r)
					}
				}
			},
			readBack: func(e *env) {
				if d := e.admin("GET", "/_replicator/"+e.id, nil); d.status == 200 {
					e.admin("DELETE", "/_replicator/"+e.id+"?rev="+d.json()["_rev"].(string), nil)
				}
			}},

		// attack 5: replication writes are writes: the target's VDU and
		// _users' rules apply
		replicateIntoVDU("http", "", func(e *env) map[string]any {
			return map[string]any{"source": e.dbURL(e.tg.admin, e.v["src"]), "target": e.dbURL(e.tg.admin, e.v["db"])}
		}),
		replicateIntoVDU("local-names", "5", func(e *env) map[string]any {
			return map[string]any{"source": e.v["src"], "target": e.v["db"]}
		}),
		replicateIntoVDU("http-as-member", "", func(e *env) map[string]any {
			return map[string]any{"source": e.dbURL(e.tg.admin, e.v["src"]), "target": e.dbURL(e.a, e.v["db"])}
		}),
		attackCase{name: "5-replicate-plain-password-into-users", role: "admin", family: "",
			setup: func(e *env) {
				e.v["src"] = e.db("src", nil, nil)
				e.put(e.v["src"], "org.couchdb.user:"+e.name("plain"), map[string]any{
					"name": e.name("plain"), "type": "user", "roles": []string{}, "password": "plain"})
			},
			attack: func(e *env) {
				r := e.admin("POST", "/_replicate", map[string]any{"source": e.dbURL(e.tg.admin, e.v["src"]), "target": e.dbURL(e.tg.admin, "_users")})
				e.t.Logf("%s", r)
				r = e.admin("POST", "/_replicate", map[string]any{"source": e.v["src"], "target": "_users"})
				e.t.Logf("%s", r)
			},
			readBack: func(e *env) {
				r := e.admin("GET", "/_users/org.couchdb.user:"+e.name("plain")+"?open_revs=all", nil)
				e.t.Logf("%s", r)
				if strings.Contains(string(r.body), `"password":`) {
					e.t.Errorf("_users stores a plain password: %s", r)
				}
			}},
	)
}

func replicateIntoVDU(name, family string, body func(e *env) map[string]any) attackCase {
	return attackCase{name: "5-replicate-into-vdu-" + name, role: "admin", family: family,
		setup: func(e *env) {
			vduDB(e)
			e.v["src"] = e.db("src", nil, nil)
			e.put(e.v["src"], "bad1", map[string]any{"v": 1})
			e.put(e.v["src"], "x1", map[string]any{"forbidden": true})
		},
		attack: func(e *env) {
			e.t.Logf("%s", e.admin("POST", "/_replicate", body(e)))
		},
		readBack: noForbidden}
}
