package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestProxyUser(t *testing.T) {
	sha1Tok := func(secret, name string) string {
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(name))
		return hex.EncodeToString(m.Sum(nil))
	}
	secured := ProxyConfig{UseSecret: true, Secret: "proxysecret"}
	cases := []struct {
		name  string
		conf  ProxyConfig
		hdr   map[string]string
		ok    bool
		user  string
		roles []string
	}{
		{name: "no user header", hdr: map[string]string{"X-Auth-CouchDB-Roles": "a"}},
		{name: "no secret asked", hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Roles": "a, b,_admin"},
			ok: true, user: "carol", roles: []string{"a", "b", "_admin"}},
		{name: "empty roles header", hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Roles": ""},
			ok: true, user: "carol", roles: []string{""}},
		{name: "roles a,,b", hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Roles": "a,,b"},
			ok: true, user: "carol", roles: []string{"a", "", "b"}},
		{name: "roles ,", hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Roles": ","},
			ok: true, user: "carol", roles: []string{}},
		{name: "good sha256 token", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": ProxyToken("proxysecret", "carol")},
			ok: true, user: "carol", roles: []string{}},
		{name: "upper-case token", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": strings.ToUpper(ProxyToken("proxysecret", "carol"))},
			ok: true, user: "carol", roles: []string{}},
		{name: "good sha1 token", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": sha1Tok("proxysecret", "carol")},
			ok: true, user: "carol", roles: []string{}},
		{name: "sha256 token, hash_algorithms sha", conf: ProxyConfig{UseSecret: true, Secret: "proxysecret", HashAlgorithms: str("sha")},
			hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": ProxyToken("proxysecret", "carol")}},
		{name: "token of another name", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": ProxyToken("proxysecret", "dave")}},
		{name: "token by another secret", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": ProxyToken("other", "carol")}},
		{name: "token not hex", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol", "X-Auth-CouchDB-Token": "abc"}},
		{name: "token missing", conf: secured, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol"}},
		{name: "use_secret without a secret", conf: ProxyConfig{UseSecret: true}, hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol"}},
		{name: "renamed headers", conf: ProxyConfig{UserHeader: "X-User", RolesHeader: "X-Roles", TokenHeader: "X-Tok", UseSecret: true, Secret: "s"},
			hdr: map[string]string{"X-User": "dave", "X-Roles": "r", "X-Tok": ProxyToken("s", "dave")}, ok: true, user: "dave", roles: []string{"r"}},
		{name: "renamed: the default header is not read", conf: ProxyConfig{UserHeader: "X-User"},
			hdr: map[string]string{"X-Auth-CouchDB-UserName": "carol"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.hdr {
				h.Set(k, v)
			}
			user, roles, ok := NewProxyAuth(c.conf).User(h)
			if ok != c.ok || user != c.user || (ok && (!slices.Equal(roles, c.roles) || roles == nil)) {
				t.Fatalf("User = %q %#v %v, want %q %#v %v", user, roles, ok, c.user, c.roles, c.ok)
			}
		})
	}
}
