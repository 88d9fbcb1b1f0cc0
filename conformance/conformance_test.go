package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// The user the security scenario creates (README "request.headers").
const (
	userName      = "alice"
	userPassword  = "golden-alice-pw"
	wrongPassword = "golden-wrong-pw"
	userDocPath   = "/_users/org.couchdb.user:alice"
)

// The corpus's server admin is named "admin" (in _session bodies and userCtx);
// the test server's must be too.
const corpusAdmin = "admin"

const (
	requestTimeout = 60 * time.Second // feeds end after their timeout=1000
	batchOKWait    = 5 * time.Second  // how long a read after batch=ok may wait for the write
)

// corpusDir is the directory of the corpus replayed: testdata (in the
// repository, always present), or $SETTEE_CORPUS_DIR to replay another
// corpus of the same format (e.g. a fresh recording, see doc.go).
func corpusDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("SETTEE_CORPUS_DIR")
	if d == "" {
		d = "testdata"
	}
	if m, _ := filepath.Glob(filepath.Join(d, "*.jsonl")); len(m) == 0 {
		t.Fatalf("no corpus (*.jsonl) in %s", d)
	}
	return d
}

func loadAll(t *testing.T) ([]*scenario, map[string]knownFailure) {
	t.Helper()
	dir := corpusDir(t)
	scs, n, err := loadCorpus(dir)
	if err != nil {
		t.Fatalf("corpus %s: %v", dir, err)
	}
	valid := map[string]bool{}
	for _, sc := range scs {
		for _, r := range sc.records {
			valid[r.Name] = true
		}
	}
	known, errs := loadKnownFailures("known_failures.txt", valid)
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("corpus %s: %d records in %d scenarios; %d listed in known_failures.txt", dir, n, len(scs), len(known))
	return scs, known
}

type summary struct{ passed, known, failed int }

func (s summary) String() string {
	return fmt.Sprintf("golden: %d passed, %d known failures, %d failed", s.passed, s.known, s.failed)
}

// lastSummary is TestGolden's summary, printed again by TestMain after the
// subtest report so that it is the last thing `go test -v` shows.
var lastSummary string

func TestMain(m *testing.M) {
	code := m.Run()
	if lastSummary != "" {
		fmt.Println(lastSummary)
	}
	os.Exit(code)
}

func TestGolden(t *testing.T) {
	scs, known := loadAll(t)
	if testserver.AdminUser != corpusAdmin {
		t.Fatalf("the corpus expects the server admin to be %q, testserver uses %q", corpusAdmin, testserver.AdminUser)
	}
	s := testserver.Start(t)
	h := newHarness(s.URL, testserver.AdminUser, testserver.AdminPassword)
	var sum summary
	for _, sc := range scs {
		t.Run(sc.name, func(t *testing.T) { h.runScenario(t, sc, known, &sum) })
	}
	t.Log(sum)
	lastSummary = sum.String()
}

type harness struct {
	base   string
	host   string
	client *http.Client
	// the server admin's credentials, for <admin> and <admin-password>
	adminUser, adminPassword string
}

func newHarness(base, adminUser, adminPassword string) *harness {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	return &harness{
		base:          strings.TrimSuffix(base, "/"),
		host:          u.Host,
		adminUser:     adminUser,
		adminPassword: adminPassword,
		client: &http.Client{
			// no transparent gzip: bodies are compared as the server sent them
			Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4},
			// the 301 of _design%2F must be observed, not followed
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       requestTimeout,
		},
	}
}

// scenarioState is what one scenario accumulates.
type scenarioState struct {
	names         names
	b             *bindings
	cookies       map[string]string // "<admin>"/"<user>" -> AuthSession value
	adminPassword string            // what <admin-password> stands for
}

func newScenarioState(sc *scenario, h *harness) *scenarioState {
	db := "golden-" + strings.ToLower(sc.name)
	return &scenarioState{
		names:         names{db: db, db2: db + "-2", base: h.base},
		b:             newBindings(),
		cookies:       map[string]string{},
		adminPassword: h.adminPassword,
	}
}

// stepResult is the outcome of one record.
type stepResult struct {
	request string // method and path as sent
	status  int
	body    []byte
	diffs   []diff
	note    string // e.g. a 4xx accepted instead of CouchDB's 500
}

func (h *harness) runScenario(t *testing.T, sc *scenario, known map[string]knownFailure, sum *summary) {
	st := newScenarioState(sc, h)
	defer h.cleanup(t, sc, st)

	var setupDiffs []diff
	for _, s := range sc.records[0].Setup {
		method, path, _ := strings.Cut(st.names.apply(s), " ")
		status, body, err := h.adminCall(method, path)
		if err != nil || (status != 201 && status != 202) {
			setupDiffs = append(setupDiffs, diff{"/setup", fmt.Sprintf("%s answered %d %s %v", st.names.apply(s), status, clip(string(body), 200), errOrEmpty(err))})
		}
	}
	for i, r := range sc.records {
		// Steps run even when filtered out with -run, so later steps have their bindings.
		res := h.runStep(st, r, sc.records[:i])
		if i == 0 {
			res.diffs = append(setupDiffs, res.diffs...)
		}
		t.Run(r.Name, func(t *testing.T) { report(t, r, res, known, sum) })
	}
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}

func report(t *testing.T, r *record, res *stepResult, known map[string]knownFailure, sum *summary) {
	kf, listed := known[r.Name]
	if res.note != "" {
		t.Log(res.note)
	}
	switch {
	case len(res.diffs) == 0 && listed:
		sum.failed++
		t.Errorf("%s passes now: remove %s from known_failures.txt (line %d)", r.Name, r.Name, kf.line)
	case len(res.diffs) == 0:
		sum.passed++
	case listed:
		sum.known++
		t.Skipf("known failure (%s)\n%s", kf.reason, res.describe(r))
	default:
		sum.failed++
		t.Errorf("%s", res.describe(r))
	}
}

func (res *stepResult) describe(r *record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s\n", r.Name, r.where, res.request)
	for i, d := range res.diffs {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "  first difference: %s\n", d)
		case i == 1:
			fmt.Fprintf(&b, "  also (%d more):\n    %s\n", len(res.diffs)-1, d)
		case i < 12:
			fmt.Fprintf(&b, "    %s\n", d)
		case i == 12:
			fmt.Fprintf(&b, "    …\n")
		}
	}
	if res.status != 0 {
		fmt.Fprintf(&b, "  got: %d %s", res.status, clip(string(res.body), 600))
	}
	return strings.TrimRight(b.String(), "\n")
}

// runStep sends one record's request and compares the answer.
func (h *harness) runStep(st *scenarioState, r *record, earlier []*record) *stepResult {
	res := &stepResult{request: r.Request.Method + " " + st.names.apply(r.Request.Path)}
	// README: "batch=ok: 202 with no rev; the write lands a moment later".
	retry := r.Request.Method == "GET" && len(earlier) > 0 &&
		strings.Contains(earlier[len(earlier)-1].Request.Path, "batch=ok")
	start := time.Now()
	deadline := start.Add(batchOKWait)
	for attempt := 1; ; attempt++ {
		req, err := h.buildRequest(st, r)
		if err != nil {
			res.diffs = []diff{{"/request", "cannot send: " + err.Error()}}
			return res
		}
		res.request = req.Method + " " + req.URL.RequestURI()
		status, hdr, body, err := h.do(req)
		if err != nil {
			res.diffs = []diff{{"/response", "request failed: " + err.Error()}}
			res.status, res.body = status, body
			return res
		}
		res.status, res.body = status, body
		m := &matcher{b: st.b.clone(), names: st.names, norm: r.norm, unordered: r.unorderedLists()}
		m.compareResponse(r, status, hdr, body)
		if len(m.diffs) > 0 && retry && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		st.b = m.b // placeholders bind on first sight, even when something else differs
		res.diffs = m.diffs
		if attempt > 1 {
			res.note = fmt.Sprintf("read after batch=ok: %d attempts over %v", attempt, time.Since(start).Round(time.Millisecond))
		}
		if len(res.diffs) > 0 && r.couchDB500() && isCouchError4xx(status, body) {
			res.note = fmt.Sprintf("CouchDB answers 500 %s here; settee's %d %s is accepted instead", render(r.resBody.json), status, clip(string(body), 200))
			res.diffs = nil
		}
		st.afterResponse(r, status, hdr)
		return res
	}
}

// isCouchError4xx: a 4xx with a CouchDB error body {"error": "...", "reason": "..."}.
func isCouchError4xx(status int, body []byte) bool {
	if status < 400 || status > 499 {
		return false
	}
	v, err := decodeJSON(body)
	if err != nil {
		return false
	}
	o, ok := v.(*object)
	if !ok {
		return false
	}
	e, ok1 := o.vals["error"].(string)
	_, ok2 := o.vals["reason"].(string)
	return ok1 && ok2 && e != ""
}

// afterResponse remembers the AuthSession cookie of a successful POST /_session
// for the user that logged in.
func (st *scenarioState) afterResponse(r *record, status int, hdr http.Header) {
	if r.Request.Method != "POST" || r.Request.Path != "/_session" || status != 200 {
		return
	}
	var label string
	switch loginName(r) {
	case corpusAdmin:
		label = "<admin>"
	case userName:
		label = "<user>"
	default:
		return
	}
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == "AuthSession" && c.Value != "" {
			st.cookies[label] = c.Value
		}
	}
}

func loginName(r *record) string {
	switch r.reqBody.kind {
	case bodyJSON:
		if o, ok := r.reqBody.json.(*object); ok {
			if s, ok := o.vals["name"].(string); ok {
				return s
			}
		}
	case bodyText:
		if q, err := url.ParseQuery(r.reqBody.text); err == nil {
			return q.Get("name")
		}
	}
	return ""
}

// buildRequest makes the record's request: substitutions, bound placeholders,
// credentials, the path sent byte for byte as recorded.
func (h *harness) buildRequest(st *scenarioState, r *record) (*http.Request, error) {
	path, err := st.substPath(r.Request.Path)
	if err != nil {
		return nil, fmt.Errorf("path: %v", err)
	}
	var body []byte
	switch r.reqBody.kind {
	case bodyJSON:
		v, err := st.substJSON(r.reqBody.json)
		if err != nil {
			return nil, fmt.Errorf("body: %v", err)
		}
		body = encodeJSON(v)
	case bodyText:
		gen, isGen, err := generatedBody(r.reqBody.text)
		switch {
		case err != nil:
			return nil, fmt.Errorf("body: %v", err)
		case isGen:
			body = gen
		default:
			esc := func(s string) string { return s }
			if strings.HasPrefix(r.Request.Headers["Content-Type"], "application/x-www-form-urlencoded") {
				esc = url.QueryEscape
			}
			s, err := st.substText(r.reqBody.text, esc)
			if err != nil {
				return nil, fmt.Errorf("body: %v", err)
			}
			body = []byte(s)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(r.Request.Method, h.base+"/", rd)
	if err != nil {
		return nil, err
	}
	// Opaque + RawQuery go on the request line unchanged: %2F stays encoded and
	// JSON in the query stays unencoded, as recorded.
	p, q, hasQ := strings.Cut(path, "?")
	req.URL = &url.URL{Scheme: "http", Host: h.host, Opaque: p, RawQuery: q, ForceQuery: hasQ && q == ""}

	for k, v := range r.Request.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", "Cookie": // labels, below
		default:
			s, err := st.substText(v, func(s string) string { return s })
			if err != nil {
				return nil, fmt.Errorf("header %s: %v", k, err)
			}
			req.Header.Set(k, s)
		}
	}
	// "Every request not labelled otherwise is sent as <admin>."
	auth, cookie := r.Request.Headers["Authorization"], r.Request.Headers["Cookie"]
	if auth == "" {
		auth = "<admin>"
		if cookie != "" {
			auth = "<none>"
		}
	}
	switch auth {
	case "<admin>":
		req.SetBasicAuth(h.adminUser, h.adminPassword)
	case "<user>":
		req.SetBasicAuth(userName, userPassword)
	case "<wrong>":
		req.SetBasicAuth(userName, wrongPassword)
	case "<none>":
	default:
		return nil, fmt.Errorf("unknown Authorization label %q", auth)
	}
	if cookie != "" {
		v, ok := st.cookies[cookie]
		if !ok {
			return nil, fmt.Errorf("no AuthSession cookie for %s (no successful POST /_session for that user earlier in the scenario)", cookie)
		}
		req.Header.Set("Cookie", "AuthSession="+v)
	}
	return req, nil
}

// substText replaces {db}, {db2}, {base}, <admin-password> and bound
// placeholders; esc escapes the inserted values for their context.
func (st *scenarioState) substText(s string, esc func(string) string) (string, error) {
	s = st.names.apply(s)
	s = strings.ReplaceAll(s, "<admin-password>", esc(st.adminPassword))
	var firstErr error
	s = placeholderRe.ReplaceAllStringFunc(s, func(ph string) string {
		p, _ := fullPlaceholder(ph)
		if p.key == "" {
			if firstErr == nil {
				firstErr = fmt.Errorf("placeholder %s cannot be sent", ph)
			}
			return ph
		}
		v, ok := st.b.text(p)
		if !ok {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s is unbound (the step that should have bound it failed)", ph)
			}
			return ph
		}
		return esc(v)
	})
	return s, firstErr
}

func (st *scenarioState) substPath(path string) (string, error) {
	p, q, hasQ := strings.Cut(path, "?")
	p, err := st.substText(p, url.PathEscape)
	if err != nil || !hasQ {
		return p, err
	}
	q, err = st.substText(q, url.QueryEscape)
	return p + "?" + q, err
}

// substJSON substitutes inside a request body; a string that is one bound
// placeholder becomes the bound value itself (a seq may be a number).
func (st *scenarioState) substJSON(v any) (any, error) {
	switch v := v.(type) {
	case string:
		if p, ok := fullPlaceholder(v); ok && p.key != "" {
			if bv, bound := st.b.vals[p.key]; bound {
				return bv, nil
			}
		}
		return st.substText(v, func(s string) string { return s })
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			y, err := st.substJSON(x)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	case *object:
		out := newObject()
		for _, k := range v.keys {
			y, err := st.substJSON(v.vals[k])
			if err != nil {
				return nil, err
			}
			out.set(st.names.apply(k), y)
		}
		return out, nil
	}
	return v, nil
}

func (h *harness) do(req *http.Request) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	resp, err := h.client.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("the answer did not end within %v: %w", requestTimeout, err)
		}
		return resp.StatusCode, resp.Header, body, fmt.Errorf("reading the body: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

func (h *harness) adminCall(method, path string) (int, []byte, error) {
	req, err := http.NewRequest(method, h.base+"/", nil)
	if err != nil {
		return 0, nil, err
	}
	p, q, _ := strings.Cut(path, "?")
	req.URL = &url.URL{Scheme: "http", Host: h.host, Opaque: p, RawQuery: q}
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(h.adminUser, h.adminPassword)
	status, _, body, err := h.do(req)
	return status, body, err
}

// cleanup deletes the scenario's databases and, after the security scenario,
// the user alice. Problems are logged, not failed: the server is thrown away.
func (h *harness) cleanup(t testing.TB, sc *scenario, st *scenarioState) {
	for _, db := range []string{st.names.db, st.names.db2} {
		status, body, err := h.adminCall("DELETE", "/"+db)
		if err != nil || (status != 200 && status != 202 && status != 404) {
			t.Logf("cleanup: DELETE /%s: %d %s %v", db, status, clip(string(body), 200), errOrEmpty(err))
		}
	}
	usesAlice := false
	for _, r := range sc.records {
		usesAlice = usesAlice || strings.HasPrefix(r.Request.Path, userDocPath)
	}
	if !usesAlice {
		return
	}
	status, body, err := h.adminCall("GET", userDocPath)
	if err != nil || status != 200 {
		t.Logf("cleanup: GET %s: %d %s %v", userDocPath, status, clip(string(body), 200), errOrEmpty(err))
		return
	}
	var doc struct {
		Rev string `json:"_rev"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Rev == "" {
		t.Logf("cleanup: %s has no _rev: %s", userDocPath, clip(string(body), 200))
		return
	}
	status, body, err = h.adminCall("DELETE", userDocPath+"?rev="+url.QueryEscape(doc.Rev))
	if err != nil || (status != 200 && status != 202) {
		t.Logf("cleanup: DELETE %s: %d %s %v", userDocPath, status, clip(string(body), 200), errOrEmpty(err))
	}
}
