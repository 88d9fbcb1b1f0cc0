// Package testcouch starts a real Apache CouchDB 3.5.2 for tests that
// compare settee with it: the build in shared/couchdb beside the
// repository (or $SETTEE_COUCHDB_DIR). A test that cannot have one is
// skipped with a message, never failed: it is an optional input.
package testcouch

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Server is a running CouchDB single node (q=2, n=1).
type Server struct {
	// URL is the base URL without credentials.
	URL            string
	User, Password string

	data  string     // this node's data dir
	owner testing.TB // the test that started it
}

// Dir is $SETTEE_COUCHDB_DIR, else shared/couchdb beside the repository
// or beside a directory above it (a git worktree); it may not exist.
func Dir() string {
	if d := os.Getenv("SETTEE_COUCHDB_DIR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	for d := filepath.Dir(repo); ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "shared", "couchdb")
		if _, err := os.Stat(filepath.Join(cand, "start.sh")); err == nil {
			return cand
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return filepath.Join(filepath.Dir(repo), "shared", "couchdb")
}

// Start starts a CouchDB on a free 127.0.0.1 port with a fresh data dir,
// stopped when t ends; extra is appended to its local.ini (settings
// CouchDB reads only at start). t is skipped when there is no CouchDB
// here or it will not start.
func Start(t testing.TB, extraIni string) *Server {
	t.Helper()
	dir := Dir()
	start := filepath.Join(dir, "start.sh")
	if _, err := os.Stat(start); err != nil {
		t.Skipf("no Apache CouchDB to compare with: %s not found (set SETTEE_COUCHDB_DIR or put shared/couchdb beside the repository)", start)
	}
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		data := t.TempDir()
		args := []string{"--port", strconv.Itoa(port), "--data", data}
		if extraIni != "" {
			ini := filepath.Join(t.TempDir(), "extra.ini")
			if err := os.WriteFile(ini, []byte(extraIni), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--ini", ini)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, start, args...).CombinedOutput()
		cancel()
		stop := func() {
			if out, err := exec.Command(filepath.Join(dir, "stop.sh"), "--data", data).CombinedOutput(); err != nil {
				t.Logf("stop.sh --data %s: %v %s", data, err, out)
			}
		}
		if err != nil {
			stop()
			lastErr = fmt.Errorf("%s --port %d: %v\n%s", start, port, err, out)
			continue
		}
		t.Cleanup(stop)
		m := regexp.MustCompile(`(?m)^COUCHDB_URL=(\S+)$`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s printed no COUCHDB_URL:\n%s", start, out)
		}
		u, err := url.Parse(string(m[1]))
		if err != nil || u.User == nil || u.Hostname() != "127.0.0.1" {
			t.Fatalf("CouchDB URL %q: want http://user:pw@127.0.0.1:port", m[1])
		}
		pw, _ := u.User.Password()
		return &Server{URL: u.Scheme + "://" + u.Host, User: u.User.Username(), Password: pw, data: data, owner: t}
	}
	t.Skipf("CouchDB would not start here: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
