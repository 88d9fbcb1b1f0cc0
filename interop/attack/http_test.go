package attack

import (
	"net/url"
	"strings"
)

// openRedirect is attack 9: a good login with a next that leaves the
// server must not answer a Location leaving it.
func openRedirect(name, family, next string, want ...any) attackCase {
	return attackCase{name: "9-session-next-" + name, role: "user", family: family,
		attack: func(e *env) {
			r := e.req(anonymous, "POST", "/_session?next="+url.QueryEscape(next),
				"name="+url.QueryEscape(e.a.name)+"&password="+url.QueryEscape(e.a.pw),
				"Content-Type", "application/x-www-form-urlencoded")
			if len(want) > 0 {
				e.refused(r, want...)
			}
			loc := r.hdr.Get("Location")
			e.t.Logf("%s Location %q", r, loc)
			if loc == "" {
				return
			}
			own := strings.HasPrefix(loc, e.tg.url+"/")
			// a path: one "/" then neither "/" nor "\" (browsers read
			// "/\host" as "//host")
			path := len(loc) >= 2 && loc[0] == '/' && loc[1] != '/' && loc[1] != '\\' || loc == "/"
			if !own && !path {
				e.t.Errorf("Location %q leaves the server: %s", loc, r)
			}
		}}
}

// pathTrick asks for an admin-only resource by a path a router may read
// differently; anonymous and a user are both refused.
func pathTrick(name, family, method, path string, body any) attackCase {
	return attackCase{name: "path-" + name, role: "user", family: family,
		attack: func(e *env) {
			for _, w := range []who{anonymous, e.a} {
				r := e.req(w, method, strings.ReplaceAll(path, "EVIL", e.name("evil")), body)
				e.denied(r)
				if strings.Contains(string(r.body), `"httpd"`) || strings.Contains(string(r.body), "pbkdf2") {
					e.t.Errorf("config shows: %s", r)
				}
			}
		},
		readBack: func(e *env) {
			if admins := e.get(e.tg.admin, "/_node/_local/_config/admins"); admins[e.name("evil")] != nil {
				e.t.Errorf("_config/admins has %s", e.name("evil"))
			}
		}}
}

func init() {
	cases := []attackCase{
		openRedirect("protocol-relative", "9", "//evil.example/x"),
		openRedirect("backslash", "9", `/\evil.example/x`),
		openRedirect("absolute-url", "9", "http://evil.example/x", 400, "bad_request"),
		openRedirect("not-a-path", "9", "x", 400, "bad_request"),
		openRedirect("own-path", "", "/_utils/"),
	}
	for _, p := range []struct{ name, family, path string }{
		{"plain", "", "/_node/_local/_config"},
		{"double-slash", "", "//_node/_local/_config"},
		{"encoded-underscore", "", "/%5Fnode/_local/_config"},
		{"dot-dot", "", "/_node/_local/../_local/_config"},
		{"db-dot-dot", "", "/_users/../_node/_local/_config"},
		{"encoded-slashes", "", "/_node%2F_local%2F_config"},
		{"encoded-slash-tail", "", "/_node/_local%2F_config"},
		{"node-name", "", "/_node/nonode@nohost/_config"},
		{"trailing-slash", "", "/_node/_local/_config/"},
	} {
		cases = append(cases,
			pathTrick("get-"+p.name, p.family, "GET", p.path, nil),
			pathTrick("put-"+p.name, p.family, "PUT", p.path+"/admins/EVIL", `"evil-pw"`))
	}
	cases = append(cases,
		attackCase{name: "console-csrf", role: "admin", setteeOnly: "the web console at /_utils/ is settee's",
			attack: func(e *env) {
				c := e.login(e.tg.admin)
				db := e.name("csrf")
				for _, hdr := range [][]string{
					{"Content-Type", "application/x-www-form-urlencoded"},
					{"Content-Type", "application/x-www-form-urlencoded", "Origin", "http://evil.example"},
					{"Content-Type", "application/x-www-form-urlencoded", "Referer", "http://evil.example/x"},
				} {
					r := e.req(c, "POST", "/_utils/databases", "name="+db+"&csrf=forged", hdr...)
					if r.status != 403 {
						e.t.Errorf("want 403: %s", r)
					}
				}
			},
			readBack: func(e *env) { e.refused(e.admin("GET", "/"+e.name("csrf"), nil), 404, "not_found") }},
	)
	addGroup("http", cases...)
}
