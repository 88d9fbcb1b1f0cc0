//go:build !race

package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/settee/settee/internal/testserver"
)

// The attacker: a member of the database "att" (named in its _security),
// not an admin, who stores HTML and SVG attachments whose script would act
// as whoever opens them.
const (
	attacker   = "mallory"
	attackerPW = "mallory-pw"
)

// evilHTML is an attachment whose script, opened by a logged-in server
// admin, would (a) make a server admin "pwned", (b) make a user "pwned2"
// with the _admin role (refused by the _users rules to everyone, admins
// included) and "pwned2r" with a role only an admin may set, (c) read the
// console's CSRF token from /_utils/ and POST its create-database form
// (database "pwned3"), and (d) mark the page (title and window.name).
// Each fetch's status goes into window.attack, so the control can tell
// what the browser was answered.
const evilHTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>evil</title></head>
<body><p>an attachment</p>
<script>
window.name = "ran";
document.title = "ran";
window.attack = {pending: 5};
function note(k) {
  return function (r) { window.attack[k] = r.status; window.attack.pending--; return r; };
}
function failed(k) {
  return function (e) { window.attack[k] = String(e); window.attack.pending--; };
}
function put(path, body) {
  return fetch(path, {method: "PUT", credentials: "include", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
}
put("/_node/_local/_config/admins/pwned", "x").then(note("a"), failed("a"));
put("/_users/org.couchdb.user:pwned2", {name: "pwned2", type: "user", roles: ["_admin"], password: "x"}).then(note("b"), failed("b"));
put("/_users/org.couchdb.user:pwned2r", {name: "pwned2r", type: "user", roles: ["ops"], password: "x"}).then(note("b2"), failed("b2"));
fetch("/_utils/", {credentials: "include"}).then(function (r) { return r.text(); }).then(function (html) {
  var m = /name="csrf" value="([^"]+)"/.exec(html);
  window.attack.token = m ? "found" : "none";
  window.attack.pending--;
  var f = new URLSearchParams();
  f.set("csrf", m ? m[1] : "");
  f.set("name", "pwned3");
  return fetch("/_utils/databases", {method: "POST", credentials: "include", body: f});
}).then(note("c"), failed("c"));
</script></body></html>
`

// evilSVG does (a) from an SVG image opened as a page, under its own
// admin name so the control can tell which of the two ran.
const evilSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">
<title>evil</title>
<script><![CDATA[
document.title = "ran";
fetch("/_node/_local/_config/admins/pwnedsvg", {method: "PUT", credentials: "include", headers: {"Content-Type": "application/json"}, body: JSON.stringify("x")});
]]></script>
<rect width="40" height="40" fill="red"/>
</svg>
`

// asAttacker sends a request with the attacker's Basic credentials.
func asAttacker(t *testing.T, s *testserver.Server, method, path, ctype, body string) (int, string) {
	t.Helper()
	req := s.NewRequest(t, method, path, body)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.SetBasicAuth(attacker, attackerPW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, readAll(t, resp)
}

func must(t *testing.T, s *testserver.Server, method, path, body string, want ...int) string {
	t.Helper()
	resp := s.Do(t, method, path, body)
	out := readAll(t, resp)
	for _, w := range want {
		if resp.StatusCode == w {
			return out
		}
	}
	t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	return ""
}

// plantAttachments makes the attacker a member of "att" and has them store
// evil.html and evil.svg on att/doc.
func plantAttachments(t *testing.T, s *testserver.Server) {
	t.Helper()
	must(t, s, "PUT", "/_users/org.couchdb.user:"+attacker,
		`{"name":"`+attacker+`","type":"user","roles":[],"password":"`+attackerPW+`"}`, 201, 202)
	must(t, s, "PUT", "/att", "", 201, 202)
	must(t, s, "PUT", "/att/_security", `{"members":{"names":["`+attacker+`"]},"admins":{"roles":["_admin"]}}`, 200)
	// the attacker is no admin: the config is closed to them
	if st, out := asAttacker(t, s, "GET", "/_node/_local/_config/admins", "", ""); st != 401 && st != 403 {
		t.Fatalf("the attacker read the admins: %d %s", st, out)
	}
	st, out := asAttacker(t, s, "PUT", "/att/doc", "application/json", `{"note":"look at my attachment"}`)
	if st != 201 && st != 202 {
		t.Fatalf("attacker's doc: %d %s", st, out)
	}
	rev := func(out string) string {
		var r struct {
			Rev string `json:"rev"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Rev == "" {
			t.Fatalf("no rev in %s", out)
		}
		return r.Rev
	}
	st, out = asAttacker(t, s, "PUT", "/att/doc/evil.html?rev="+rev(out), "text/html", evilHTML)
	if st != 201 && st != 202 {
		t.Fatalf("evil.html: %d %s", st, out)
	}
	st, out = asAttacker(t, s, "PUT", "/att/doc/evil.svg?rev="+rev(out), "image/svg+xml", evilSVG)
	if st != 201 && st != 202 {
		t.Fatalf("evil.svg: %d %s", st, out)
	}
}

// effects is what the attachments' scripts would have done, read through
// the API as the server admin.
type effects struct {
	admins               map[string]bool // "pwned", "pwnedsvg" in _config/admins
	user2, user2r, db3   bool            // _users docs pwned2, pwned2r; database pwned3
	adminsRaw, user2resp string
}

func readEffects(t *testing.T, s *testserver.Server) effects {
	t.Helper()
	var e effects
	e.adminsRaw = must(t, s, "GET", "/_node/_local/_config/admins", "", 200)
	var m map[string]any
	if err := json.Unmarshal([]byte(e.adminsRaw), &m); err != nil {
		t.Fatalf("admins: %v in %s", err, e.adminsRaw)
	}
	e.admins = map[string]bool{}
	for k := range m {
		e.admins[k] = true
	}
	exists := func(path string) (bool, string) {
		resp := s.Do(t, "GET", path, nil)
		out := readAll(t, resp)
		switch resp.StatusCode {
		case 200:
			return true, out
		case 404:
			return false, out
		}
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, out)
		return false, ""
	}
	e.user2, e.user2resp = exists("/_users/org.couchdb.user:pwned2")
	e.user2r, _ = exists("/_users/org.couchdb.user:pwned2r")
	e.db3, _ = exists("/pwned3")
	return e
}

// header is a response header as the browser saw it (any case).
func header(h network.Headers, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s, true
		}
	}
	return "", false
}

// hasSession says whether the browser holds an AuthSession cookie it
// would send to url.
func hasSession(tb *tab, url string) bool {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		tb.t.Fatalf("cookies of %s: %v", url, err)
	}
	for _, c := range res.Cookies {
		if c.Name == "AuthSession" && c.Value != "" {
			return true
		}
	}
	return false
}

// openAttachment navigates the (logged-in) browser to an attachment and
// answers the response the browser got for it.
func openAttachment(tb *tab, url string) *network.Response {
	tb.t.Helper()
	resp := get(tb, "open "+url, chromedp.NavigateResponse(url))
	if resp == nil {
		tb.t.Fatalf("no response for %s", url)
	}
	if resp.Status != 200 {
		tb.t.Fatalf("%s: status %d", url, resp.Status)
	}
	return resp
}

// TestAttackStoredScript: a database member stores an HTML and an SVG
// attachment whose script would act as whoever opens it; a server admin
// logged in to the console opens both in the browser. With settee's
// attachment CSP (sandbox) nothing of it runs: no admin, no user, no
// console form posted. The control, on a throwaway node with the CSP
// turned off ([csp] attachments_enable = false), shows the same pages do
// run and do make an admin there: so it is the sandbox that stops them,
// and the test would see it if it stopped doing so.
func TestAttackStoredScript(t *testing.T) {
	chromiumPath(t)

	t.Run("sandboxed", func(t *testing.T) {
		s := testserver.Start(t)
		plantAttachments(t, s)
		tb := newTab(t)
		tb.login(s.URL)
		tb.noProblems()

		for _, att := range []string{"evil.html", "evil.svg"} {
			resp := openAttachment(tb, s.URL+"/att/doc/"+att)
			if csp, ok := header(resp.Headers, "Content-Security-Policy"); !ok || csp != "sandbox" {
				t.Errorf("%s: the browser got Content-Security-Policy %q (present %v), want sandbox; headers %v", att, csp, ok, resp.Headers)
			}
			if ct, _ := header(resp.Headers, "Content-Type"); !strings.HasPrefix(ct, map[string]string{"evil.html": "text/html", "evil.svg": "image/svg+xml"}[att]) {
				t.Errorf("%s: served as %q", att, ct)
			}
			// the browser holds the admin's session for this URL: the
			// page is opened as the logged-in admin
			if !hasSession(tb, s.URL+"/att/doc/"+att) {
				t.Fatalf("%s: the browser holds no AuthSession cookie for it: the test does not open it as the admin", att)
			}
			tb.run("wait on "+att, 10*time.Second, chromedp.Sleep(2*time.Second))
			title := get(tb, "title of "+att, chromedp.Evaluate[string](`document.title`))
			if title == "ran" {
				t.Errorf("%s: its script ran (document.title %q)", att, title)
			}
			if att == "evil.html" {
				if name := get(tb, "window.name", chromedp.Evaluate[string](`window.name`)); name == "ran" {
					t.Errorf("evil.html: its script ran (window.name %q)", name)
				}
			}
			tb.screenshot("sandboxed-" + att)
			// chromium says it blocked the script (sandboxed without
			// allow-scripts): expected here, not a fault of the console
			tb.mu.Lock()
			for _, e := range tb.errs {
				t.Logf("browser on %s: %s", att, e)
			}
			tb.errs = nil
			tb.mu.Unlock()
		}

		e := readEffects(t, s)
		for _, n := range []string{"pwned", "pwnedsvg"} {
			if e.admins[n] {
				t.Errorf("the attachment's script made a server admin %q: %s", n, e.adminsRaw)
			}
		}
		if e.user2 || e.user2r {
			t.Errorf("the attachment's script made users: pwned2 %v, pwned2r %v", e.user2, e.user2r)
		}
		if e.db3 {
			t.Errorf("the attachment's script posted the console's form: database pwned3 exists")
		}
		if !e.admins[testserver.AdminUser] || len(e.admins) != 1 {
			t.Errorf("admins after the attack: %s", e.adminsRaw)
		}
	})

	t.Run("control without CSP", func(t *testing.T) {
		s := testserver.Start(t) // throwaway: this one is attacked for real
		must(t, s, "PUT", "/_node/_local/_config/csp/attachments_enable", `"false"`, 200)
		plantAttachments(t, s)
		tb := newTab(t)
		tb.login(s.URL)
		tb.noProblems()

		resp := openAttachment(tb, s.URL+"/att/doc/evil.html")
		if !hasSession(tb, s.URL+"/att/doc/evil.html") {
			t.Fatalf("control: the browser holds no AuthSession cookie for the attachment")
		}
		if csp, ok := header(resp.Headers, "Content-Security-Policy"); ok {
			t.Errorf("control: evil.html still carries Content-Security-Policy %q", csp)
		}
		// the script runs: its marks, then its fetches all answered
		get(tb, "the script ran", chromedp.Poll[bool](`document.title === "ran" && window.name === "ran" && window.attack && window.attack.pending === 0`,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
		statuses := get(tb, "fetch statuses", chromedp.Evaluate[map[string]any](`window.attack`))
		t.Logf("control: the script's fetches were answered %v", statuses)
		tb.screenshot("control-evil.html")

		resp = openAttachment(tb, s.URL+"/att/doc/evil.svg")
		if csp, ok := header(resp.Headers, "Content-Security-Policy"); ok {
			t.Errorf("control: evil.svg still carries Content-Security-Policy %q", csp)
		}
		get(tb, "the svg's script ran", chromedp.Poll[bool](`document.title === "ran"`,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
		tb.clearProblems()

		// the fetches went out with the admin's cookie (same origin, no
		// sandbox) and did what an admin may: this is what the sandbox
		// prevents above. The svg's fetch was not awaited by the page:
		// poll the server for it.
		var e effects
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			e = readEffects(t, s)
			if e.admins["pwnedsvg"] || time.Now().After(end) {
				break
			}
		}
		if !e.admins["pwned"] {
			t.Errorf("control: evil.html's script ran but made no admin pwned (%s): the sandboxed case proves nothing", e.adminsRaw)
		}
		if !e.admins["pwnedsvg"] {
			t.Errorf("control: evil.svg's script ran but made no admin pwnedsvg (%s)", e.adminsRaw)
		}
		if !e.user2r {
			t.Errorf("control: no user pwned2r, whose role only an admin may set (fetch statuses %v)", statuses)
		}
		// pwned2 asks for the _admin role, which the _users rules refuse
		// to everyone, server admins included
		if e.user2 {
			t.Errorf("control: user pwned2 with the _admin role was stored: %s", e.user2resp)
		}
		if !e.db3 {
			t.Errorf("control: the console's form posted with the token read from /_utils/ made no database pwned3 (fetch statuses %v)", statuses)
		}
	})
}

// TestAttackConsoleVDU: a doc saved through the console's editor meets
// the database's validate_doc_update like any API write: the refusal
// (403 forbidden, its reason) is shown on the page, the text kept, and
// nothing is stored; a doc the function lets through is stored.
func TestAttackConsoleVDU(t *testing.T) {
	chromiumPath(t)
	s := testserver.Start(t)
	must(t, s, "PUT", "/guarded", "", 201, 202)
	must(t, s, "PUT", "/guarded/_design/guard",
		`{"validate_doc_update":"function(newDoc, oldDoc, userCtx, secObj) { if (newDoc.forbidden) { throw({forbidden: 'docs marked forbidden are refused'}); } }"}`, 201, 202)
	tb := newTab(t)
	tb.login(s.URL)

	tb.run("new doc refused", 20*time.Second,
		chromedp.Navigate(s.URL+"/_utils/db/guarded"),
		chromedp.Click(`//a[text()="New document"]`),
		chromedp.WaitVisible(chromedp.ID("json")),
		chromedp.SetValue(chromedp.ID("json"), `{"_id":"x","forbidden":true}`),
		chromedp.Submit(chromedp.ID("json")),
		chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	tb.screenshot("vdu-refused")
	p := tb.text(".problem")
	if !strings.Contains(p, "forbidden") || !strings.Contains(p, "docs marked forbidden are refused") || !strings.Contains(p, "403") {
		t.Errorf("the page's refusal: %q, want the API's 403 forbidden and the function's reason", p)
	}
	if v := get(tb, "editor", chromedp.Value(chromedp.ID("json"))); !strings.Contains(v, `"forbidden":true`) {
		t.Errorf("the refused text is not kept in the editor: %q", v)
	}
	resp := s.Do(t, "GET", "/guarded/x", nil)
	if out := readAll(t, resp); resp.StatusCode != 404 {
		t.Errorf("GET /guarded/x after the refusal: %d %s, want 404", resp.StatusCode, out)
	}
	tb.clearProblems() // the 403 page's status

	// the same form stores what the function lets through
	tb.run("new doc allowed", 20*time.Second,
		chromedp.Navigate(s.URL+"/_utils/doc/guarded/_new"),
		chromedp.WaitVisible(chromedp.ID("json")),
		chromedp.SetValue(chromedp.ID("json"), `{"_id":"y","forbidden":false}`),
		chromedp.Submit(chromedp.ID("json")),
		chromedp.WaitVisible(`//h2[text()="Revisions"]`))
	resp = s.Do(t, "GET", "/guarded/y", nil)
	if out := readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("GET /guarded/y: %d %s, want 200", resp.StatusCode, out)
	}
	tb.noProblems()
}
