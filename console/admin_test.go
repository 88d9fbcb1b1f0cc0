package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

func adminBrowser(t *testing.T, s *testserver.Server) *browser {
	b := newBrowser(t, s)
	if st, page := b.login(testserver.AdminUser, testserver.AdminPassword); st != 200 {
		t.Fatalf("login: %d\n%s", st, page)
	}
	return b
}

func TestDesignAndView(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	api(t, s, "PUT", "/lib", nil)
	for i := range 5 {
		api(t, s, "POST", "/lib", fmt.Sprintf(`{"_id":"b%d","genre":"g%d","pages":%d}`, i, i%2, 100+i))
	}
	if st, m := api(t, s, "PUT", "/lib/_design/books", `{"views":{"by_genre":{"map":"function(d){emit(d.genre,d.pages)}","reduce":"_sum"},"ids":{"map":"function(d){emit(d._id,null)}"}}}`); st != 201 {
		t.Fatalf("ddoc: %d %v", st, m)
	}
	b := adminBrowser(t, s)
	st, page := b.get("/_utils/db/lib/design")
	if st != 200 {
		t.Fatalf("design: %d\n%s", st, page)
	}
	mustContain(t, "design", page, "_design/books", `href="/_utils/db/lib/view?ddoc=books&view=by_genre"`, "(reduce)", "ids")

	_, page = b.get("/_utils/db/lib/view?ddoc=books&view=by_genre")
	mustContain(t, "view form", page, `name="startkey"`, "default (reduce)")
	// reduced and grouped
	st, page = b.get("/_utils/db/lib/view?ddoc=books&view=by_genre&run=1&group=true&limit=20")
	if st != 200 {
		t.Fatalf("grouped: %d\n%s", st, page)
	}
	mustContain(t, "grouped", page, `<code>"g0"</code>`, "<code>306</code>", `<code>"g1"</code>`, "<code>204</code>")
	// a range without reduce
	_, page = b.get("/_utils/db/lib/view?ddoc=books&view=by_genre&run=1&reduce=false&startkey=%22g1%22&endkey=%22g1%22")
	mustContain(t, "range", page, `href="/_utils/doc/lib/b1"`, `href="/_utils/doc/lib/b3"`)
	if strings.Contains(page, `href="/_utils/doc/lib/b0"`) {
		t.Errorf("range: b0 listed")
	}
	// a key that is not JSON: the API's 400 shown
	st, page = b.get("/_utils/db/lib/view?ddoc=books&view=ids&run=1&key=notjson")
	if st != 400 {
		t.Errorf("bad key: %d, want 400", st)
	}
	mustContain(t, "bad key", page, "The view query failed.", "bad_request")
}

// The admin pages show a user who is not an admin the API's refusal.
func TestAdminPagesRefuseNonAdmin(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	if st, m := api(t, s, "PUT", "/_users/org.couchdb.user:bob", `{"name":"bob","password":"pw","roles":[],"type":"user"}`); st != 201 {
		t.Fatalf("bob: %d %v", st, m)
	}
	b := newBrowser(t, s)
	b.login("bob", "pw")
	for _, path := range []string{"/_utils/tasks", "/_utils/replication", "/_utils/cluster", "/_utils/config", "/_utils/graphs"} {
		st, page := b.get(path)
		if st != http.StatusUnauthorized {
			t.Errorf("bob on %s: %d, want the API's 401", path, st)
		}
		mustContain(t, "bob on "+path, page, "a server admin's page", "unauthorized", "You are not a server admin.")
	}
	tok := b.token("/_utils/login")
	st, page := b.post("/_utils/config", url.Values{"csrf": {tok}, "section": {"log"}, "key": {"level"}, "value": {"debug"}, "step": {"apply"}})
	if st != http.StatusUnauthorized {
		t.Errorf("bob sets config: %d, want 401", st)
	}
	mustContain(t, "bob sets config", page, "Nothing was changed", "You are not a server admin.")
	st, page = b.post("/_utils/replication", url.Values{"csrf": {tok}, "source": {"a"}, "target": {"b"}})
	if st == 200 || st == 303 {
		t.Errorf("bob creates a replication: %d", st)
	}
	_ = page
}

func TestTasks(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := adminBrowser(t, s)
	st, page := b.get("/_utils/tasks")
	if st != 200 {
		t.Fatalf("tasks: %d\n%s", st, page)
	}
	mustContain(t, "tasks", page, `id="tasks" data-poll="/_active_tasks"`, "Progress", `src="/_utils/static/console.js"`)
}

func TestReplication(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	api(t, s, "PUT", "/src", nil)
	for i := range 30 {
		api(t, s, "POST", "/src", fmt.Sprintf(`{"_id":"d%02d"}`, i))
	}
	b := adminBrowser(t, s)
	tok := b.token("/_utils/replication")
	// a source and no target: refused by the console, nothing written
	st, page := b.post("/_utils/replication", url.Values{"csrf": {tok}, "id": {"r0"}, "source": {"src"}})
	if st != 400 {
		t.Errorf("no target: %d, want 400", st)
	}
	mustContain(t, "no target", page, "Not created: a replication needs a source and a target.")
	if st, _ := api(t, s, "GET", "/_replicator/r0", nil); st != 404 {
		t.Errorf("r0 written: %d", st)
	}
	// without a token: refused
	if st, _ := b.post("/_utils/replication", url.Values{"id": {"r0"}, "source": {"src"}, "target": {"dst"}}); st != 403 {
		t.Errorf("no token: %d, want 403", st)
	}
	st, page = b.post("/_utils/replication", url.Values{"csrf": {tok}, "id": {"r1"}, "source": {withAuth(s.URL) + "/src"}, "target": {"dst"}, "create_target": {"true"}})
	if st != 200 {
		t.Fatalf("create: %d\n%s", st, page)
	}
	mustContain(t, "created", page, "Replication document created.", `data-doc="r1"`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, page = b.get("/_utils/replication")
		if strings.Contains(page, `class="state state-completed">completed<`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r1 not completed:\n%s", page)
		}
		time.Sleep(300 * time.Millisecond)
	}
	mustContain(t, "completed", page, `<progress max="100" value="100">`, "admin:*****@")
	if strings.Contains(page, testserver.AdminPassword) {
		t.Errorf("the source's password is on the page")
	}
	if _, m := api(t, s, "GET", "/dst", nil); m["doc_count"] != float64(30) {
		t.Errorf("dst: %v", m)
	}
	// cancel deletes the doc
	st, page = b.post("/_utils/replication/cancel", url.Values{"csrf": {tok}, "doc_id": {"r1"}})
	if st != 200 {
		t.Fatalf("cancel: %d\n%s", st, page)
	}
	mustContain(t, "cancelled", page, "Replication cancelled")
	if st, _ := api(t, s, "GET", "/_replicator/r1", nil); st != 404 {
		t.Errorf("r1 after cancel: %d", st)
	}
	// a doc that is not there: the API's 404 shown
	st, page = b.post("/_utils/replication/cancel", url.Values{"csrf": {tok}, "doc_id": {"nope"}})
	if st != 404 {
		t.Errorf("cancel nope: %d", st)
	}
	mustContain(t, "cancel nope", page, "Not cancelled", "not_found")
}

func TestClusterPage(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	api(t, s, "PUT", "/grid?q=4", nil)
	b := adminBrowser(t, s)
	st, page := b.get("/_utils/cluster?db=grid")
	if st != 200 {
		t.Fatalf("cluster: %d\n%s", st, page)
	}
	name := nodeName(t, s)
	mustContain(t, "cluster", page, name, `<span class="up">up</span>`, `<code>00000000-3fffffff</code>`, `<code>c0000000-ffffffff</code>`, `class="held"`)
	_, page = b.get("/_utils/cluster?db=nope")
	mustContain(t, "missing db", page, `The shards of "nope" could not be read.`, "not_found")
}

func TestConfigEdit(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := adminBrowser(t, s)
	st, page := b.get("/_utils/config")
	if st != 200 {
		t.Fatalf("config: %d\n%s", st, page)
	}
	mustContain(t, "config", page, "[couchdb]", "[chttpd]", `href="/_utils/config?section=couchdb&key=database_dir#edit"`)
	tok := b.token("/_utils/config")
	// the first POST only asks for a confirmation
	st, page = b.post("/_utils/config", url.Values{"csrf": {tok}, "section": {"console_test"}, "key": {"k"}, "value": {"v1"}, "step": {"confirm"}})
	if st != 200 {
		t.Fatalf("confirm: %d\n%s", st, page)
	}
	mustContain(t, "confirm", page, "Change [console_test] k?", "(not set)", "<code>v1</code>", `name="step" value="apply"`)
	if st, _ := api(t, s, "GET", "/_node/_local/_config/console_test/k", nil); st != 404 {
		t.Errorf("set before the confirmation: %d", st)
	}
	// a cross-site apply: refused
	if st, _ := b.post("/_utils/config", url.Values{"csrf": {tok}, "section": {"console_test"}, "key": {"k"}, "value": {"v1"}, "step": {"apply"}}, "Origin", "http://evil.example"); st != 403 {
		t.Errorf("cross-site apply: %d, want 403", st)
	}
	st, page = b.post("/_utils/config", url.Values{"csrf": {tok}, "section": {"console_test"}, "key": {"k"}, "value": {"v1"}, "step": {"apply"}})
	if st != 200 {
		t.Fatalf("apply: %d\n%s", st, page)
	}
	mustContain(t, "applied", page, "Set [console_test] k.", "<code>v1</code>")
	resp := s.Do(t, "GET", "/_node/_local/_config/console_test/k", nil)
	_, body := read(t, resp)
	if strings.TrimSpace(body) != `"v1"` {
		t.Errorf("console_test/k in the API: %s", body)
	}
	// a value the API refuses: its error shown
	st, page = b.post("/_utils/config", url.Values{"csrf": {tok}, "section": {"couchdb"}, "key": {"max_document_size"}, "value": {"lots"}, "step": {"apply"}})
	if st < 400 {
		t.Errorf("bad value: %d", st)
	}
	mustContain(t, "bad value", page, "The value was not set.")
}

func TestGraphsPage(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	b := adminBrowser(t, s)
	st, page := b.get("/_utils/graphs")
	if st != 200 {
		t.Fatalf("graphs: %d\n%s", st, page)
	}
	mustContain(t, "graphs", page, `data-node="`+nodeName(t, s)+`"`, "Loading…")
	// the history the page's script polls
	resp := s.Do(t, "GET", "/_node/"+nodeName(t, s)+"/_history", nil)
	st, body := read(t, resp)
	if st != 200 || !strings.Contains(body, `"interval_seconds"`) {
		t.Errorf("_history: %d %s", st, body)
	}
}

func TestStaticAssets(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, p := range []string{"/_utils/static/console.js", "/_utils/static/style.css"} {
		resp, err := http.Get(s.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		st, body := read(t, resp)
		if st != 200 || len(body) < 100 {
			t.Errorf("%s: %d, %d bytes", p, st, len(body))
		}
	}
}

// nodeName is the node's name, as GET /_node/_local gives it.
func nodeName(t *testing.T, s *testserver.Server) string {
	t.Helper()
	_, m := api(t, s, "GET", "/_node/_local", nil)
	n, _ := m["name"].(string)
	if n == "" {
		t.Fatalf("no node name: %v", m)
	}
	return n
}

func withAuth(base string) string {
	return strings.Replace(base, "http://", "http://"+testserver.AdminUser+":"+testserver.AdminPassword+"@", 1)
}
