package bench

import (
	"net/url"
	"os"
	"testing"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// adminURL is a test server's URL with the test admin's credentials in
// it, as the workloads take it.
func adminURL(t *testing.T, base string) *url.URL {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(testserver.AdminUser, testserver.AdminPassword)
	return u
}

// couchURL is the CouchDB 3.5.2 a workload test runs against: $env
// (http://user:pw@host:port) when set, else a testcouch of its own
// (the test is skipped where there is none).
func couchURL(t *testing.T, env string) string {
	t.Helper()
	if base := os.Getenv(env); base != "" {
		return base
	}
	c := testcouch.Start(t, "")
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(c.User, c.Password)
	return u.String()
}
