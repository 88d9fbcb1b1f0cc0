package httpgw

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestNodeIdentity(t *testing.T) {
	key := []byte("k1")
	now := time.UnixMilli(1_800_000_000_000)
	admin := &User{Name: "admin", Roles: []string{"_admin"}, Admin: true, Handler: "cookie"}
	signed := func(u *User, method, path string, at time.Time) *http.Request {
		r := httptest.NewRequest(method, path, nil)
		signForNode(key, r, u, at)
		return r
	}
	cases := []struct {
		name string
		r    func() *http.Request
		key  []byte
		want *User
	}{
		{"signed", func() *http.Request { return signed(admin, "GET", "/_node/_local/_history?since=1", now) }, key,
			&User{Name: "admin", Roles: []string{"_admin"}, Admin: true, Handler: "node"}},
		{"a user without roles", func() *http.Request {
			return signed(&User{Name: "bob"}, "GET", "/_node/_local/_stats", now)
		}, key, &User{Name: "bob", Roles: []string{}, Handler: "node"}},
		{"an escaped path", func() *http.Request {
			return signed(admin, "PUT", "/_node/_local/_config/a%2Fb/c", now)
		}, key, &User{Name: "admin", Roles: []string{"_admin"}, Admin: true, Handler: "node"}},
		{"59 s old", func() *http.Request { return signed(admin, "GET", "/_node/_local/_history", now.Add(-59*time.Second)) }, key,
			&User{Name: "admin", Roles: []string{"_admin"}, Admin: true, Handler: "node"}},
		{"61 s old", func() *http.Request { return signed(admin, "GET", "/_node/_local/_history", now.Add(-61*time.Second)) }, key, nil},
		{"61 s early", func() *http.Request { return signed(admin, "GET", "/_node/_local/_history", now.Add(61*time.Second)) }, key, nil},
		{"another key", func() *http.Request { return signed(admin, "GET", "/_node/_local/_history", now) }, []byte("k2"), nil},
		{"no key here", func() *http.Request { return signed(admin, "GET", "/_node/_local/_history", now) }, nil, nil},
		{"another method", func() *http.Request {
			r := signed(admin, "GET", "/_node/_local/_config/x/y", now)
			r.Method = "DELETE"
			return r
		}, key, nil},
		{"another path", func() *http.Request {
			r := signed(admin, "GET", "/_node/_local/_history", now)
			r.URL.Path = "/_node/_local/_config"
			return r
		}, key, nil},
		{"another user", func() *http.Request {
			r := signed(&User{Name: "bob"}, "GET", "/_node/_local/_history", now)
			a := signed(admin, "GET", "/_node/_local/_history", now)
			r.Header.Set(nodeUserHeader, a.Header.Get(nodeUserHeader))
			return r
		}, key, nil},
		{"no signature", func() *http.Request {
			r := signed(admin, "GET", "/_node/_local/_history", now)
			r.Header.Del(nodeSigHeader)
			return r
		}, key, nil},
		{"a time that is no number", func() *http.Request {
			r := signed(admin, "GET", "/_node/_local/_history", now)
			r.Header.Set(nodeAtHeader, "soon")
			return r
		}, key, nil},
		{"headers a client made up", func() *http.Request {
			r := httptest.NewRequest("GET", "/_node/_local/_history", nil)
			r.Header.Set(nodeUserHeader, "eyJuYW1lIjoiYWRtaW4iLCJyb2xlcyI6WyJfYWRtaW4iXX0")
			r.Header.Set(nodeAtHeader, "1800000000000")
			r.Header.Set(nodeSigHeader, "00")
			return r
		}, key, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := nodeUser(c.key, c.r(), now)
			if (got == nil) != (c.want == nil) || got != nil &&
				(got.Name != c.want.Name || !slices.Equal(got.Roles, c.want.Roles) || got.Admin != c.want.Admin || got.Handler != c.want.Handler) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	// forwarding replaces what the client sent, and without a key or a
	// user sends none
	r := httptest.NewRequest("GET", "/_node/_local/_history", nil)
	r.Header.Set(nodeUserHeader, "forged")
	r.Header.Set(nodeSigHeader, "forged")
	signForNode(nil, r, admin, now)
	if r.Header.Get(nodeUserHeader) != "" || r.Header.Get(nodeSigHeader) != "" {
		t.Fatalf("no key: headers %v", r.Header)
	}
	signForNode(key, r, nil, now)
	if r.Header.Get(nodeUserHeader) != "" {
		t.Fatalf("anonymous: headers %v", r.Header)
	}
}
