package auth

import (
	"fmt"
	"regexp"
	"strings"
)

// Handler names as CouchDB's _session answers them ("authentication_handlers").
const (
	HandlerCookie  = "cookie"
	HandlerDefault = "default" // basic auth
	HandlerJWT     = "jwt"
	HandlerProxy   = "proxy"
)

// DefaultHandlers is CouchDB 3.5's chttpd/authentication_handlers.
const DefaultHandlers = "{chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}"

var handlerTuple = regexp.MustCompile(`\{\s*([a-z_]+)\s*,\s*([a-z_]+)\s*\}`)

// ParseHandlers reads chttpd/authentication_handlers, a list of Erlang
// tuples {Module, Function}, into handler names in their order. CouchDB
// would take any function of any module and fail each request that meets
// one it cannot call; settee knows four and refuses the rest when the
// value is written, so a typo cannot lock every client out.
func ParseHandlers(v string) ([]string, error) {
	rest := strings.TrimSpace(v)
	var out []string
	for rest != "" {
		m := handlerTuple.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return nil, fmt.Errorf("want a list of {chttpd_auth, NAME_authentication_handler}, at %q", rest)
		}
		mod, fn := rest[m[2]:m[3]], rest[m[4]:m[5]]
		if mod != "chttpd_auth" && mod != "couch_httpd_auth" {
			return nil, fmt.Errorf("unknown module %s (want chttpd_auth)", mod)
		}
		name, ok := strings.CutSuffix(fn, "_authentication_handler")
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown handler %s", fn)
		case name != HandlerCookie && name != HandlerDefault && name != HandlerJWT && name != HandlerProxy:
			return nil, fmt.Errorf("unknown handler %s (settee has cookie, default, jwt and proxy)", fn)
		}
		out = append(out, name)
		rest = strings.TrimSpace(rest[m[1]:])
		if r, ok := strings.CutPrefix(rest, ","); ok {
			rest = strings.TrimSpace(r)
			if rest == "" {
				return nil, fmt.Errorf("a trailing comma")
			}
		}
	}
	return out, nil
}
