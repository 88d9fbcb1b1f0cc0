package httpgw_test

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/internal/testserver"
)

// The bounds of a stored password hash's PBKDF2 iteration count, as
// Apache CouchDB 3.5.2 has them ([chttpd_auth] min_iterations, default 1;
// max_iterations, default 1000000000; asked 2026-12-08 with
// couchdb/users_db_security_editable true and _users open):
//
//   - a _users doc is never refused for its count: a user editing their
//     own doc, or an admin, writes "iterations":100000000000 (or 0, -5,
//     1.5, 1e11) and gets 201, the doc stored as sent; only a count that
//     is no number is refused, by _design/_auth (403 forbidden
//     "iterations must be a number."), the doc left as it was;
//   - the login checks it before computing anything, by Basic auth and
//     POST /_session alike, for _users docs and _config's server admins:
//     403 {"error":"forbidden","reason":"Iteration count is too high for
//     this server"} above max_iterations, "...too low..." below
//     min_iterations, in milliseconds, not counted toward the lockout; a
//     count that is no JSON integer (1.5, 1e11, which jiffy reads as a
//     float) answers 500 {"error":"unknown_error","reason":
//     "function_clause"} (settee sends no "ref");
//   - a user whose doc has more iterations than a lowered max_iterations
//     gets that 403, unless CouchDB's credentials cache still holds the
//     same password verified before the change: then 200. settee checks
//     the bounds before its cache (docs/security.md).

// iterationVariants: the doc's "iterations" (raw JSON), what the write
// answers and what the logins then answer, with min_iterations 1000 and
// max_iterations 700000. A derived key is the right one for "pw" where
// the count is an integer in bounds.
var iterationVariants = []struct {
	name, it    string
	write       int    // 201, or 403 with writeReason
	writeReason string // the refusal's reason
	login       int    // Basic and POST /_session
	loginErr    string // error, reason (for a 403/500)
	loginReason string
}{
	{"zero", `0`, 201, "", 403, "forbidden", "Iteration count is too low for this server"},
	{"below min", `999`, 201, "", 403, "forbidden", "Iteration count is too low for this server"},
	{"at min", `1000`, 201, "", 200, "", ""},
	{"at max", `700000`, 201, "", 200, "", ""},
	{"above max", `700001`, 201, "", 403, "forbidden", "Iteration count is too high for this server"},
	{"1e11 integer", `100000000000`, 201, "", 403, "forbidden", "Iteration count is too high for this server"},
	{"1e11 float", `1e11`, 201, "", 500, "unknown_error", "function_clause"},
	{"non-integer", `1.5`, 201, "", 500, "unknown_error", "function_clause"},
	{"negative", `-5`, 201, "", 403, "forbidden", "Iteration count is too low for this server"},
	{"string", `"5"`, 403, "iterations must be a number.", 200, "", ""},
	{"null", `null`, 403, "iterations must be a number.", 200, "", ""},
}

func runIterationVariants(t *testing.T, s rightsServer, couch bool) {
	s.must(t, 200, "PUT", "/_node/_local/_config/couchdb/users_db_security_editable", "", `"true"`)
	s.must(t, 200, "PUT", "/_users/_security", "", `{}`)
	// users made with "password" get 1000 iterations, in bounds; the
	// admin (settee's test admin 1000, CouchDB's 600000) stays in them
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth/iterations", "", `"1000"`)
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth/min_iterations", "", `"1000"`)
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth/max_iterations", "", `"700000"`)
	const salt = "00112233445566778899aabbccddeeff"
	keys := map[int]string{}
	for i, v := range iterationVariants {
		for _, writer := range []string{"self", "admin"} {
			what := v.name + " by " + writer
			name := fmt.Sprintf("it%d%s", i, writer)
			s.must(t, 201, "PUT", "/_users/org.couchdb.user:"+name, "", `{"name":"`+name+`","type":"user","roles":[],"password":"pw"}`)
			var before map[string]any
			_ = json.Unmarshal(s.must(t, 200, "GET", "/_users/org.couchdb.user:"+name, "", ""), &before)
			dk := strings.Repeat("00", 32)
			var n int
			if _, err := fmt.Sscanf(v.it, "%d", &n); err == nil && fmt.Sprint(n) == v.it && n >= 1000 && n <= 700000 {
				if keys[n] == "" {
					k, _ := pbkdf2.Key(sha256.New, "pw", []byte(salt), n, 32)
					keys[n] = hex.EncodeToString(k)
				}
				dk = keys[n]
			}
			body := `{"_rev":"` + before["_rev"].(string) + `","name":"` + name + `","type":"user","roles":[],` +
				`"password_scheme":"pbkdf2","pbkdf2_prf":"sha256","salt":"` + salt + `","iterations":` + v.it + `,"derived_key":"` + dk + `"}`
			as := ""
			if writer == "self" {
				as = name + ":pw"
			}
			st, b, _ := s.rq(t, "PUT", "/_users/org.couchdb.user:"+name, as, body, nil)
			if st != v.write || v.write == 403 && !strings.Contains(string(b), `"reason":"`+v.writeReason+`"`) {
				t.Fatalf("%s: write answered %d %s, want %d %s", what, st, b, v.write, v.writeReason)
			}
			var after map[string]any
			_ = json.Unmarshal(s.must(t, 200, "GET", "/_users/org.couchdb.user:"+name, "", ""), &after)
			if v.write != 201 {
				if after["_rev"] != before["_rev"] || after["iterations"] != before["iterations"] || after["derived_key"] != before["derived_key"] {
					t.Fatalf("%s: a refused write changed the doc: %v, was %v", what, after, before)
				}
			} else {
				var want any
				_ = json.Unmarshal([]byte(v.it), &want)
				if after["iterations"] != want {
					t.Fatalf("%s: stored iterations %v, want %v", what, after["iterations"], want)
				}
			}
			// the logins, by Basic auth and POST /_session: an answer
			// before any hash is computed comes in well under a second
			for _, login := range []string{"basic", "session"} {
				start := time.Now()
				var st int
				var b []byte
				if login == "basic" {
					st, b, _ = s.rq(t, "GET", "/_session", name+":pw", "", nil)
				} else {
					st, b, _ = s.rq(t, "POST", "/_session", "-", `{"name":"`+name+`","password":"pw"}`, nil)
				}
				took := time.Since(start)
				// CouchDB's credentials cache learns of a user doc's write
				// from _users' changes, a moment later: a login just after
				// the user's own write (which logged them in) can still be
				// the old doc's. settee's logins read the doc as written.
				for wait := time.Now(); couch && st == 200 && v.login != 200 && time.Since(wait) < 5*time.Second; {
					time.Sleep(200 * time.Millisecond)
					start = time.Now()
					if login == "basic" {
						st, b, _ = s.rq(t, "GET", "/_session", name+":pw", "", nil)
					} else {
						st, b, _ = s.rq(t, "POST", "/_session", "-", `{"name":"`+name+`","password":"pw"}`, nil)
					}
					took = time.Since(start)
				}
				if st != v.login {
					t.Fatalf("%s: %s login answered %d %s, want %d", what, login, st, b, v.login)
				}
				if v.login == 200 {
					if !strings.Contains(string(b), `"name":"`+name+`"`) {
						t.Fatalf("%s: %s login: %s", what, login, b)
					}
					continue
				}
				var e struct{ Error, Reason string }
				_ = json.Unmarshal(b, &e)
				if e.Error != v.loginErr || e.Reason != v.loginReason {
					t.Fatalf("%s: %s login answered %d %s, want %s %q", what, login, st, b, v.loginErr, v.loginReason)
				}
				if took > 500*time.Millisecond {
					t.Fatalf("%s: %s login took %v to refuse", what, login, took)
				}
			}
		}
	}
}

func TestUserDocIterations(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	runIterationVariants(t, rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword}, false)
}

func TestUserDocIterationsAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	s := rightsServer{cs.URL, cs.User, cs.Password}
	s.waitAuthDDoc(t)
	runIterationVariants(t, s, true)
}

// A user doc written while max_iterations was higher: once it is
// lowered below the doc's count, every login as that user is refused at
// once, a cached one too (CouchDB 3.5.2: 403 "Iteration count is too
// high for this server" for a password its cache does not hold, 200 for
// one it does); a _config server admin's hash likewise (CouchDB: 403 for
// "-pbkdf2:sha256-00,abc,100000000000", in 10 ms).
func TestLoweredMaxIterations(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	s := rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword}
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth/iterations", "", `"20000"`)
	s.must(t, 201, "PUT", "/_users/org.couchdb.user:low", "", `{"name":"low","type":"user","roles":[],"password":"pw"}`)
	s.must(t, 200, "GET", "/_session", "low:pw", "") // cached now
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth/max_iterations", "", `"10000"`)
	tooHigh := `{"error":"forbidden","reason":"Iteration count is too high for this server"}`
	for _, c := range []struct{ method, path, as, body string }{
		{"GET", "/_session", "low:pw", ""},
		{"GET", "/_all_dbs", "low:wrong", ""},
		{"POST", "/_session", "-", `{"name":"low","password":"pw"}`},
		{"POST", "/_session?fail=/x", "-", `{"name":"low","password":"wrong"}`},
	} {
		start := time.Now()
		st, b, h := s.rq(t, c.method, c.path, c.as, c.body, nil)
		if st != 403 || strings.TrimSpace(string(b)) != tooHigh || h.Get("Location") != "" || h.Get("Set-Cookie") != "" {
			t.Fatalf("%s %s as %s: %d %s %v, want 403 %s", c.method, c.path, c.as, st, b, h, tooHigh)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("%s %s: refused in %v", c.method, c.path, d)
		}
	}
	// a refusal of the count is no failed login: more than the lockout's
	// five leave the user free once the count is allowed again
	for range 6 {
		s.must(t, 403, "GET", "/_session", "low:wrong", "")
	}
	s.must(t, 200, "PUT", "/_node/_local/_config/admins/big", "", `"-pbkdf2:sha256-00,abc,100000000000"`)
	if st, b, _ := s.rq(t, "GET", "/_session", "big:pw", "", nil); st != 403 || strings.TrimSpace(string(b)) != tooHigh {
		t.Fatalf("admin big: %d %s", st, b)
	}
	s.must(t, 200, "DELETE", "/_node/_local/_config/chttpd_auth/max_iterations", "", "")
	s.must(t, 200, "GET", "/_session", "low:pw", "")
}

// loginCtx sends GET /_session as name:pw with ctx (no answer read when
// ctx ends first).
func loginCtx(ctx context.Context, url, name, pw string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/_session", nil)
	req.SetBasicAuth(name, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// slowUser writes a user whose hash takes 200,000,000 iterations (in
// bounds: the default max_iterations is 1e9): a minute or more of a core
// per login.
func slowUser(t *testing.T, s rightsServer, name string) {
	s.must(t, 201, "PUT", "/_users/org.couchdb.user:"+name, "", `{"name":"`+name+`","type":"user","roles":[],`+
		`"password_scheme":"pbkdf2","pbkdf2_prf":"sha256","salt":"abc","iterations":200000000,"derived_key":"00"}`)
}

// waitIterating waits until the process computes PBKDF2 iterations.
func waitIterating(t *testing.T) {
	t.Helper()
	from := auth.IterationsDone()
	for end := time.Now().Add(10 * time.Second); auth.IterationsDone()-from < 20*auth.CheckEvery; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no hash is being computed")
		}
	}
}

// assertIdle checks no PBKDF2 is computed any more (within d).
func assertIdle(t *testing.T, d time.Duration) {
	t.Helper()
	var a, b int64
	ok := false
	for end := time.Now().Add(d); !ok && time.Now().Before(end); {
		a = auth.IterationsDone()
		time.Sleep(300 * time.Millisecond)
		b = auth.IterationsDone()
		ok = b == a
	}
	if !ok {
		t.Fatalf("still hashing: %d iterations in 300 ms", b-a)
	}
}

// A login whose client goes away stops computing its hash. Not parallel:
// it watches the process's PBKDF2 iteration count (auth.IterationsDone).
func TestAbandonedLoginStopsHashing(t *testing.T) {
	ts := testserver.Start(t)
	s := rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword}
	slowUser(t, s, "slow")
	for _, login := range []string{"basic", "session"} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			var err error
			if login == "basic" {
				_, err = loginCtx(ctx, ts.URL, "slow", "pw")
			} else {
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/_session", strings.NewReader(`{"name":"slow","password":"pw"}`))
				req.Header.Set("Content-Type", "application/json")
				var resp *http.Response
				if resp, err = http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			done <- err
		}()
		waitIterating(t)
		cancel()
		if err := <-done; err == nil {
			t.Fatalf("%s: the login answered before its client went away", login)
		}
		assertIdle(t, 3*time.Second)
	}
}

// Logins are counted toward the lockout as they start: of many sent at
// once for one user from one client, threshold compute a hash and the
// rest are refused (403, locked out) without computing one. Not parallel
// (auth.IterationsDone).
func TestLockoutCountsLoginsAsTheyStart(t *testing.T) {
	ts := testserver.Start(t)
	s := rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword}
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth_lockout/threshold", "", `"3"`)
	slowUser(t, s, "many")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 8
	answers := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := loginCtx(ctx, ts.URL, "many", "wrong")
			if err != nil {
				st = 0 // abandoned
			}
			answers <- st
		}()
	}
	refused := 0
	for timeout := time.After(3 * time.Second); refused < n-3; {
		select {
		case st := <-answers:
			if st != 403 {
				t.Fatalf("a login answered %d while 3 hashes run, want 403", st)
			}
			refused++
		case <-timeout:
			t.Fatalf("%d of %d logins refused in 3 s, want %d", refused, n, n-3)
		}
	}
	select {
	case st := <-answers:
		t.Fatalf("a %dth login answered %d: more than the threshold computed or were refused", refused+1, st)
	case <-time.After(500 * time.Millisecond):
	}
	cancel() // the three still hashing: their client goes
	wg.Wait()
	assertIdle(t, 3*time.Second)
	// the abandoned three stay counted
	if st, b, _ := s.rq(t, "GET", "/_session", "many:pw", "", nil); st != 403 || !strings.Contains(string(b), "temporarily locked") {
		t.Fatalf("after 3 abandoned logins: %d %s, want locked out", st, b)
	}
}

// A login counted as it starts takes its count back when it succeeds: a
// user whose failures are below the threshold is never locked out by its
// own right password.
func TestLockoutSuccessfulLoginNotCounted(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t)
	s := rightsServer{ts.URL, testserver.AdminUser, testserver.AdminPassword}
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth_lockout/threshold", "", `"3"`)
	s.must(t, 200, "PUT", "/_node/_local/_config/chttpd_auth/iterations", "", `"1000"`)
	s.must(t, 201, "PUT", "/_users/org.couchdb.user:ok", "", `{"name":"ok","type":"user","roles":[],"password":"pw"}`)
	s.must(t, 401, "GET", "/_session", "ok:wrong", "")
	s.must(t, 401, "GET", "/_session", "ok:wrong", "")
	for range 5 {
		// the first computes its hash, counted as it starts (3, the
		// threshold, while it runs) and taken back; the rest are cached
		s.must(t, 200, "GET", "/_session", "ok:pw", "")
		s.must(t, 200, "POST", "/_session", "-", `{"name":"ok","password":"pw"}`)
	}
	s.must(t, 401, "GET", "/_session", "ok:wrong", "")
	// three failures: locked out, the right password too (as CouchDB)
	if st, b, _ := s.rq(t, "GET", "/_session", "ok:pw", "", nil); st != 403 || !strings.Contains(string(b), "temporarily locked") {
		t.Fatalf("after 3 failures: %d %s, want locked out", st, b)
	}
}
