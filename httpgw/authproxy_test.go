package httpgw_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"testing"

	"github.com/settee/settee/auth"
)

// TestProxySideBySide sends the same X-Auth-CouchDB-* headers to settee
// and to CouchDB 3.5.2; the table is CouchDB's answers.
func TestProxySideBySide(t *testing.T) {
	t.Parallel()
	const secret = "proxysecret"
	sha1Tok := func(name string) string {
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(name))
		return hex.EncodeToString(m.Sum(nil))
	}
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	open := []sessionCase{
		{name: "no token asked", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Roles", "a, b,_admin"),
			user: "carol", roles: []string{"a", "b", "_admin"}, handler: "proxy"},
		{name: "roles a,,b", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Roles", "a,,b"),
			user: "carol", roles: []string{"a", "", "b"}, handler: "proxy"},
		{name: "any token ignored", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Token", "zz"), user: "carol", handler: "proxy"},
		{name: "proxy _admin is a server admin", path: "/_node/_local/_config/chttpd_auth",
			hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Roles", "_admin")},
	}
	secured := []sessionCase{
		{name: "sha256 token", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Token", auth.ProxyToken(secret, "carol")),
			user: "carol", handler: "proxy"},
		{name: "sha1 token", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Roles", "r", "X-Auth-CouchDB-Token", sha1Tok("carol")),
			user: "carol", roles: []string{"r"}, handler: "proxy"},
		{name: "token of another name: anonymous", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Token", auth.ProxyToken(secret, "dave"))},
		{name: "token by another secret: anonymous", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Token", auth.ProxyToken("x", "carol"))},
		{name: "bad token, basic auth decides", basic: true,
			hdr:  hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Token", "0000"),
			user: "admin", roles: []string{"_admin"}, handler: "default"},
		{name: "bad token on an admin path", path: "/_node/_local/_config/chttpd_auth",
			hdr:    hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Roles", "_admin", "X-Auth-CouchDB-Token", "0000"),
			status: 401, err: "unauthorized", reason: "You are not a server admin."},
	}
	renamed := []sessionCase{
		{name: "renamed user header", hdr: hdr("X-User", "dave", "X-Auth-CouchDB-Token", auth.ProxyToken(secret, "dave")), user: "dave", handler: "proxy"},
		{name: "the default header no longer read", hdr: hdr("X-Auth-CouchDB-UserName", "carol", "X-Auth-CouchDB-Token", auth.ProxyToken(secret, "carol"))},
	}
	authTargets(t, nil, func(t *testing.T, s authTarget) {
		runSessionCases(t, s, open)
		putConfig(t, s, "chttpd_auth", "secret", secret)
		putConfig(t, s, "chttpd_auth", "proxy_use_secret", "true")
		runSessionCases(t, s, secured)
		putConfig(t, s, "chttpd_auth", "x_auth_username", "X-User")
		runSessionCases(t, s, renamed)
	})
}
