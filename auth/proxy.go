package auth

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"net/http"
)

// ProxyConfig is what proxy authentication reads from chttpd_auth (else
// couch_httpd_auth). Empty header names take CouchDB's defaults.
type ProxyConfig struct {
	UserHeader, RolesHeader, TokenHeader string // x_auth_username, x_auth_roles, x_auth_token
	// UseSecret is proxy_use_secret (CouchDB's default: false, and then
	// no token is asked for at all).
	UseSecret bool
	// Secret is chttpd_auth/secret; "" when it is not set.
	Secret string
	// HashAlgorithms is hash_algorithms (unset: "sha256, sha"): a token
	// made with any of them is accepted.
	HashAlgorithms *string
}

// ProxyAuth is CouchDB 3.5's proxy_authentication_handler: a trusted
// proxy in front of the server names the user and roles in headers and,
// with proxy_use_secret, proves it knows the secret by a token, the hex
// HMAC of the user name. Built once per config generation; never changed
// after, so safe for concurrent use.
type ProxyAuth struct {
	user, roles, token string
	useSecret          bool
	secret             []byte
	hashes             []func() hash.Hash
}

// NewProxyAuth parses the configuration.
func NewProxyAuth(c ProxyConfig) *ProxyAuth {
	p := &ProxyAuth{user: c.UserHeader, roles: c.RolesHeader, token: c.TokenHeader,
		useSecret: c.UseSecret, secret: []byte(c.Secret)}
	if p.user == "" {
		p.user = "X-Auth-CouchDB-UserName"
	}
	if p.roles == "" {
		p.roles = "X-Auth-CouchDB-Roles"
	}
	if p.token == "" {
		p.token = "X-Auth-CouchDB-Token"
	}
	algs := "sha256, sha"
	if c.HashAlgorithms != nil {
		algs = *c.HashAlgorithms
	}
	for _, name := range SplitList(algs) {
		if h := hashByName[name]; h != nil {
			p.hashes = append(p.hashes, h)
		}
	}
	if len(p.hashes) == 0 {
		// CouchDB falls back to sha256 when it knows none of the names
		p.hashes = []func() hash.Hash{sha256.New}
	}
	return p
}

// hashByName are Erlang crypto's names for the hashes CouchDB may be
// told to use.
var hashByName = map[string]func() hash.Hash{
	"sha": sha1.New, "sha224": sha256.New224, "sha256": sha256.New,
	"sha384": sha512.New384, "sha512": sha512.New, "md5": md5.New,
}

// User answers the user the headers name; ok is false when the request
// has no user header, or when a token is required and is missing or does
// not match: CouchDB then passes the request to the next handler rather
// than refusing it.
func (p *ProxyAuth) User(h http.Header) (name string, roles []string, ok bool) {
	names, present := h[http.CanonicalHeaderKey(p.user)]
	if !present || len(names) == 0 {
		return "", nil, false
	}
	name = names[0]
	roles = []string{}
	if rs, present := h[http.CanonicalHeaderKey(p.roles)]; present && len(rs) > 0 {
		roles = SplitList(rs[0])
	}
	if !p.useSecret {
		return name, roles, true
	}
	if len(p.secret) == 0 {
		// CouchDB accepts any proxy headers here until a secret is set
		// (its first cookie login writes one); settee never writes one,
		// so that window would never close: refuse instead.
		return "", nil, false
	}
	// CouchDB crashes (500) on a missing or odd-length token; settee
	// treats both as a wrong token
	tok, err := hex.DecodeString(h.Get(p.token))
	if err != nil || !p.validToken(name, tok) {
		return "", nil, false
	}
	return name, roles, true
}

// validToken: the token is the HMAC of the name by one of the hash
// algorithms whose size is the token's (couch_secrets:verify).
func (p *ProxyAuth) validToken(name string, tok []byte) bool {
	for _, nh := range p.hashes {
		m := hmac.New(nh, p.secret)
		if m.Size() != len(tok) {
			continue
		}
		m.Write([]byte(name))
		if hmac.Equal(m.Sum(nil), tok) {
			return true
		}
	}
	return false
}

// ProxyToken is the token a proxy sends for name: the hex HMAC-SHA256 of
// the name keyed by the secret (what CouchDB's docs tell proxies to send).
func ProxyToken(secret, name string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(name))
	return hex.EncodeToString(m.Sum(nil))
}
