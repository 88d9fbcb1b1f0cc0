package httpgw

import (
	"slices"

	"github.com/settee/settee/auth"
)

// proxyConf is the proxy authentication settings, parsed.
type proxyConf struct{ p *auth.ProxyAuth }

func loadProxyConf(s Settings) *proxyConf {
	var c auth.ProxyConfig
	if s != nil {
		get := func(key string) string { v, _ := authValue(s, key); return v }
		c.UserHeader, c.RolesHeader, c.TokenHeader = get("x_auth_username"), get("x_auth_roles"), get("x_auth_token")
		// CouchDB's config:get_boolean: "true" is true, anything else false
		c.UseSecret = get("proxy_use_secret") == "true"
		// only a configured secret: the node's own cookie secret is
		// nothing a proxy could know
		c.Secret = get("secret")
		if v, ok := authValue(s, "hash_algorithms"); ok {
			c.HashAlgorithms = &v
		}
	}
	return &proxyConf{p: auth.NewProxyAuth(c)}
}

// proxyUser authenticates a request by the X-Auth-CouchDB-* headers a
// trusted proxy sets; nil, nil when it has none, or (as CouchDB) when
// the token it needs is missing or wrong: the next handler decides.
func (a *authenticator) proxyUser(rq *req, c *authConf) (*User, error) {
	name, roles, ok := c.proxy.p.User(rq.r.Header)
	if !ok {
		return nil, nil
	}
	return &User{Name: name, Roles: roles, Admin: slices.Contains(roles, "_admin"), Handler: auth.HandlerProxy}, nil
}
