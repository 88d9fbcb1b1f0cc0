//go:build !race

// Package console_test drives the web console at /_utils/ in a real
// headless chromium (github.com/chromedp/chromedp) against real settee
// nodes: one node, and a 3-node cluster. The tests skip, saying so, when
// no chromium binary is found. They start several nodes in one process
// and so cannot run under -race (node/cluster_test.go says why), and a
// browser under -race would be slow anyway: `make test` runs them without
// it, beside the race pass.
//
// Screenshots go to $SETTEE_ARTIFACTS (default: a test temp dir).
package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settee/settee/internal/testcluster"
	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// chromiumPath is the browser to drive: $SETTEE_CHROMIUM, or the first
// of Debian's and others' names on $PATH.
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("SETTEE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary found (apt-get install chromium, or set SETTEE_CHROMIUM): the console's browser tests are skipped")
	return ""
}

func artifacts(t *testing.T) string {
	dir := os.Getenv("SETTEE_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tab is one browser tab; problems are what its console and its page
// reported (errors, exceptions, failed loads).
type tab struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	mu   sync.Mutex
	errs []string
	shot int
}

func newTab(t *testing.T) *tab {
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 800),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	tb := &tab{t: t, ctx: ctx, dir: artifacts(t)}
	t.Cleanup(func() { cancelC(); cancelA() })
	// start the browser, then read its console until the test ends
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Skipf("chromium at %s does not start (%v): the console's browser tests are skipped", path, err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				tb.problem(fmt.Sprintf("%s (%s) %s", m, m.Source, m.URL))
			}
		}
	}()
	return tb
}

func (tb *tab) problem(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.errs = append(tb.errs, s)
}

// noProblems fails the test on anything the browser's console reported.
func (tb *tab) noProblems() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, e := range tb.errs {
		tb.t.Errorf("browser console: %s", e)
	}
	tb.errs = nil
}

// run runs actions with a deadline, failing the test (with a screenshot)
// when they do not complete.
func (tb *tab) run(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.screenshot("failed-" + what)
		html, _ := chromedp.Run(tb.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		tb.t.Fatalf("%s: %v\npage:\n%s", what, err, html)
	}
}

// screenshot saves the page as NN-name.png in the artifacts dir.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return
	}
	tb.shot++
	p := filepath.Join(tb.dir, fmt.Sprintf("%02d-%s.png", tb.shot, name))
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s", p)
}

// get runs one action that answers a value.
func get[T any](tb *tab, what string, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.screenshot("failed-" + what)
		tb.t.Fatalf("%s: %v", what, err)
	}
	return v
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return get(tb, "text of "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// clearProblems forgets what the console said so far (a page answered
// 4xx on purpose, which chromium logs as a failed load).
func (tb *tab) clearProblems() {
	tb.mu.Lock()
	tb.errs = nil
	tb.mu.Unlock()
}

// login logs in through the console's form.
func (tb *tab) login(base string) {
	tb.t.Helper()
	tb.run("login", 30*time.Second,
		chromedp.Navigate(base+"/_utils/"),
		chromedp.WaitVisible(chromedp.ID("name")),
		chromedp.SendKeys(chromedp.ID("name"), testserver.AdminUser),
		chromedp.SendKeys(chromedp.ID("password"), testserver.AdminPassword),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.ID("newdb")),
	)
}

func historyEvery(d time.Duration) testserver.Option {
	return func(c *node.Config) { c.HistoryInterval = d }
}

func withAuth(base string) string {
	return strings.Replace(base, "http://", "http://"+testserver.AdminUser+":"+testserver.AdminPassword+"@", 1)
}

// TestBrowserConsole: log in, create a database, add and edit a doc, run a
// Mango query, replicate a few hundred docs and watch the bar reach 100%,
// see the request graph move after a burst of writes, and the pages at
// phone width; no error in the browser's console throughout.
func TestBrowserConsole(t *testing.T) {
	s := testserver.Start(t, historyEvery(time.Second))
	tb := newTab(t)

	tb.run("login page", 20*time.Second, chromedp.Navigate(s.URL+"/_utils/"), chromedp.WaitVisible(chromedp.ID("password")))
	tb.screenshot("login")
	// a wrong password first: the API's message on the page
	tb.run("wrong password", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("name"), "admin"),
		chromedp.SendKeys(chromedp.ID("password"), "wrong"),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	if p := tb.text(".problem"); !strings.Contains(p, "Name or password is incorrect.") {
		t.Errorf("wrong password: %q", p)
	}
	// the 401 is the page's status, which chromium logs as a failed load
	tb.clearProblems()
	tb.login(s.URL)

	tb.run("create database", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("newdb"), "shop"),
		chromedp.Submit(chromedp.ID("newdb")),
		chromedp.WaitVisible(`//h1[text()="shop"]`))
	tb.run("new doc", 20*time.Second,
		chromedp.Click(`//a[text()="New document"]`),
		chromedp.WaitVisible(chromedp.ID("json")),
		chromedp.SetValue(chromedp.ID("json"), `{"_id":"apple","kind":"fruit","price":3}`),
		chromedp.Submit(chromedp.ID("json")),
		chromedp.WaitVisible(`//h2[text()="Revisions"]`))
	text := get(tb, "read editor", chromedp.Value(chromedp.ID("json")))
	if !strings.Contains(text, `"_rev": "1-`) {
		t.Fatalf("editor after create: %s", text)
	}
	tb.run("edit doc", 20*time.Second,
		chromedp.SetValue(chromedp.ID("json"), strings.Replace(text, `"fruit"`, `"fresh fruit"`, 1)),
		chromedp.Submit(chromedp.ID("json")),
		chromedp.WaitVisible(`//code[starts-with(text(), "2-")]`))
	tb.screenshot("doc")
	resp := s.Do(t, "GET", "/shop/apple", nil)
	var body strings.Builder
	_, _ = fmt.Fprint(&body, readAll(t, resp))
	if !strings.Contains(body.String(), `"fresh fruit"`) {
		t.Errorf("apple in the API after the edit: %s", body.String())
	}
	// malformed JSON in the editor: refused on the page, nothing sent
	tb.run("malformed", 20*time.Second,
		chromedp.SetValue(chromedp.ID("json"), `{"_id":"apple",`),
		chromedp.Submit(chromedp.ID("json")),
		chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	if p := tb.text(".problem"); !strings.Contains(p, "not a JSON object") {
		t.Errorf("malformed JSON: %q", p)
	}
	tb.clearProblems() // the 400 page's status

	tb.run("mango", 30*time.Second,
		chromedp.Navigate(s.URL+"/_utils/db/shop/find"),
		chromedp.WaitVisible(chromedp.ID("q")),
		chromedp.SetValue(chromedp.ID("q"), `{"selector":{"kind":"fresh fruit"}}`),
		chromedp.Submit(chromedp.ID("q")),
		chromedp.WaitVisible(`//h2[text()="1 documents"]`))
	tb.screenshot("mango")

	// a one-shot replication of 300 docs, watched on the page (its
	// script polls _scheduler/docs) until completed at 100%
	s.Do(t, "PUT", "/src", nil).Body.Close()
	var docs []string
	for i := range 300 {
		docs = append(docs, fmt.Sprintf(`{"_id":"d%03d","n":%d}`, i, i))
	}
	if r := s.Do(t, "POST", "/src/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`); r.StatusCode != 201 {
		t.Fatalf("bulk: %d", r.StatusCode)
	}
	tb.run("replication form", 20*time.Second,
		chromedp.Navigate(s.URL+"/_utils/replication"),
		chromedp.WaitVisible(chromedp.ID("source")),
		chromedp.SendKeys(chromedp.ID("rid"), "copy"),
		chromedp.SendKeys(chromedp.ID("source"), withAuth(s.URL)+"/src"),
		chromedp.SendKeys(chromedp.ID("target"), "dst"),
		chromedp.Click(chromedp.CSS(`input[name="create_target"]`)),
		chromedp.Submit(chromedp.ID("target")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-doc="copy"]`)))
	tb.run("replication completed", 90*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-doc="copy"] td.state-completed`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-doc="copy"] progress[value="100"]`)))
	tb.screenshot("replication")
	if w := tb.text(`tr[data-doc="copy"] td.written`); w != "300" {
		t.Errorf("docs written shown: %q", w)
	}
	// a replication the page did not list when it was made (created
	// through the API meanwhile, as a doc created by the form often is
	// when the scheduler is slower than the page) gets a row of its own
	if r := s.Do(t, "PUT", "/_replicator/later", `{"source":`+strconv.Quote(withAuth(s.URL)+"/src")+`,"target":"dst2","create_target":true}`); r.StatusCode != 201 {
		t.Fatalf("_replicator/later: %d", r.StatusCode)
	}
	tb.run("a replication created after the page", 60*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-doc="later"] td.state-completed`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-doc="later"] form button.danger`)))
	if src := tb.text(`tr[data-doc="later"] td:nth-child(2)`); strings.Contains(src, testserver.AdminPassword) || !strings.Contains(src, ":*****@") {
		t.Errorf("the new row's source shows %q, want its password hidden", src)
	}

	tb.run("tasks", 20*time.Second, chromedp.Navigate(s.URL+"/_utils/tasks"), chromedp.WaitVisible(chromedp.ID("tasks")))

	// the graphs: a burst of writes shows as PUT 2xx in the request graph
	tb.run("graphs", 30*time.Second,
		chromedp.Navigate(s.URL+"/_utils/graphs"),
		chromedp.WaitVisible(chromedp.CSS(`.chart svg`)))
	for i := range 200 {
		s.Do(t, "PUT", fmt.Sprintf("/shop/burst%03d", i), `{"x":1}`).Body.Close()
	}
	tb.run("graph moved", 30*time.Second,
		chromedp.WaitVisible(`//div[@class="chart"][1]//li[starts-with(text(), "PUT 2xx")]`),
		chromedp.WaitVisible(`//div[@class="chart"][1]//*[local-name()="polyline"]`))
	time.Sleep(1500 * time.Millisecond) // one more sample drawn
	tb.screenshot("graphs")

	tb.run("databases", 20*time.Second, chromedp.Navigate(s.URL+"/_utils/"), chromedp.WaitVisible(chromedp.ID("newdb")))
	tb.screenshot("databases")

	// phone width: nothing wider than the screen
	tb.run("phone width", 20*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, p := range []string{"/_utils/", "/_utils/doc/shop/apple", "/_utils/replication", "/_utils/graphs"} {
		tb.run("phone "+p, 20*time.Second, chromedp.Navigate(s.URL+p), chromedp.WaitVisible(chromedp.CSS(`h1`)),
			chromedp.Sleep(300*time.Millisecond))
		wide := get(tb, "width of "+p, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if wide {
			t.Errorf("%s is wider than a 390 px screen", p)
		}
	}
	tb.screenshot("phone-graphs")
	tb.run("phone doc", 20*time.Second, chromedp.Navigate(s.URL+"/_utils/doc/shop/apple"), chromedp.WaitVisible(chromedp.ID("json")))
	tb.screenshot("phone-doc")
	tb.noProblems()
}

// TestBrowserCluster: the cluster page of a 3-node cluster shows every
// node up and the shard grid; the graphs page one set per node; a stopped
// node is shown down.
func TestBrowserCluster(t *testing.T) {
	chromiumPath(t)
	c := testcluster.New(t, 3, historyEvery(time.Second))
	c.Join()
	// the graphs page reads each node's history through node1 with node1's
	// session cookie, which the others could not check themselves (each
	// node has its own cookie secret): node1 forwards it as its user,
	// signed with the cluster's key
	if st, out := c.Do(0, "PUT", "/orders?q=4&n=2", ""); st != 201 && st != 202 {
		t.Fatalf("create: %d %s", st, out)
	}
	base := c.Nodes[0].URL
	tb := newTab(t)
	tb.login(base)

	tb.run("cluster page", 30*time.Second,
		chromedp.Navigate(base+"/_utils/cluster?db=orders"),
		chromedp.WaitVisible(chromedp.ID("shards")))
	ups := get(tb, "count up", chromedp.Evaluate[int](`document.querySelectorAll("#nodes .up").length`))
	if ups != 3 {
		t.Errorf("nodes up on the page: %d, want 3", ups)
	}
	held := get(tb, "count held", chromedp.Evaluate[int](`document.querySelectorAll("#shards td.held").length`))
	if held != 8 {
		t.Errorf("copies in the grid: %d, want q*n = 8", held)
	}
	tb.screenshot("cluster")

	tb.run("graphs of 3 nodes", 40*time.Second,
		chromedp.Navigate(base+"/_utils/graphs"),
		chromedp.WaitVisible(`//section[@data-node="node3@127.0.0.1"]//p[contains(text(), "one every")]`),
		chromedp.WaitVisible(`//section[@data-node="node1@127.0.0.1"]//p[contains(text(), "one every")]`),
		chromedp.Sleep(5*time.Second)) // a few samples drawn
	sets := get(tb, "count sets", chromedp.Evaluate[int](`document.querySelectorAll(".node-graphs").length`))
	if sets != 3 {
		t.Errorf("graph sets: %d, want 3", sets)
	}
	tb.screenshot("cluster-graphs")
	// leave the graphs page before a node stops: its polls of that node
	// would fail (and say so in the console)
	tb.run("away", 20*time.Second, chromedp.Navigate(base+"/_utils/"), chromedp.WaitVisible(chromedp.ID("newdb")))
	tb.noProblems()

	c.Stop(2)
	deadline := time.Now().Add(60 * time.Second)
	for {
		tb.run("cluster page again", 30*time.Second,
			chromedp.Navigate(base+"/_utils/cluster?db=orders"),
			chromedp.WaitVisible(chromedp.ID("nodes")))
		down := get(tb, "node3 down", chromedp.Evaluate[bool](`Array.from(document.querySelectorAll("#nodes tr")).some(function (tr) { return tr.textContent.indexOf("node3@127.0.0.1") >= 0 && tr.querySelector(".down") !== null })`))
		if down {
			break
		}
		if time.Now().After(deadline) {
			tb.screenshot("node3-not-down")
			t.Fatalf("node3 not shown down after 60 s")
		}
		time.Sleep(time.Second)
	}
	tb.screenshot("cluster-node-down")
	tb.noProblems()
}

// TestBrowserKeyboard: the console is used with the keyboard alone: the
// login form has the focus first, Tab goes from field to field, Enter
// submits; the menu's links and the create form are reached by Tab, each
// focused element drawn with a visible outline.
func TestBrowserKeyboard(t *testing.T) {
	s := testserver.Start(t)
	tb := newTab(t)
	focused := func() string {
		return get(tb, "focused element", chromedp.Evaluate[string](
			`(function (e) { return e ? (e.id || e.tagName.toLowerCase() + ":" + e.textContent.trim()) : "" })(document.activeElement)`))
	}
	outlined := func() bool {
		return get(tb, "focus outline", chromedp.Evaluate[bool](
			`(function (s) { return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0 })(getComputedStyle(document.activeElement))`))
	}
	// tabTo presses Tab until the element called want has the focus
	tabTo := func(want string) {
		t.Helper()
		for range 30 {
			tb.run("tab", 5*time.Second, chromedp.KeyEvent("\t"))
			got := focused()
			if got != "" && got != "body:" && !outlined() {
				t.Errorf("%q has the focus with no visible outline", got)
			}
			if got == want {
				return
			}
		}
		t.Fatalf("30 Tabs did not reach %q", want)
	}

	tb.run("login page", 20*time.Second, chromedp.Navigate(s.URL+"/_utils/"), chromedp.WaitVisible(chromedp.ID("password")))
	if f := focused(); f != "name" {
		t.Fatalf("the login page's focus: %q, want the name field", f)
	}
	tb.run("type the name", 10*time.Second, chromedp.KeyEvent(testserver.AdminUser))
	tabTo("password")
	tb.run("type the password, Enter", 20*time.Second,
		chromedp.KeyEvent(testserver.AdminPassword+"\r"),
		chromedp.WaitVisible(chromedp.ID("newdb")))

	tabTo("newdb")
	tb.run("name a database, Enter", 20*time.Second,
		chromedp.KeyEvent("keys\r"),
		chromedp.WaitVisible(`//h1[text()="keys"]`))
	if r := s.Do(t, "GET", "/keys", nil); r.StatusCode != 200 {
		t.Errorf("the database made with the keyboard: %d", r.StatusCode)
	} else {
		r.Body.Close()
	}

	tb.run("back", 20*time.Second, chromedp.Navigate(s.URL+"/_utils/"), chromedp.WaitVisible(chromedp.ID("newdb")))
	tabTo("a:Graphs")
	tb.run("follow the link, Enter", 20*time.Second,
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`.node-graphs`)))
	tb.noProblems()
}
