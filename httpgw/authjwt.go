package httpgw

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/settee/settee/auth"
)

// jwtConf is the jwt_keys and jwt_auth settings, parsed into a verifier
// once per config generation (keys are PEM-decoded then, not per request).
type jwtConf struct{ v *auth.JWTVerifier }

func loadJWTConf(s Settings) *jwtConf {
	var c auth.JWTConfig
	if s != nil {
		c.Keys, _ = s.ConfigSection("jwt_keys")
		opt := func(key string) *string {
			if v, err := s.ConfigValue("jwt_auth", key); err == nil {
				return &v
			}
			return nil
		}
		c.RequiredClaims = opt("required_claims")
		c.RolesClaimName = opt("roles_claim_name")
		c.RolesClaimPath = opt("roles_claim_path")
	}
	return &jwtConf{v: auth.NewJWTVerifier(c)}
}

// jwtUser authenticates a request's "Authorization: Bearer" JWT; nil, nil
// when it has none. CouchDB matches "Bearer " exactly (case and the one
// space): any other Authorization passes to the next handler. A token
// that does not verify ends the request with CouchDB's error for it.
func (a *authenticator) jwtUser(rq *req, c *authConf) (*User, error) {
	tok, ok := strings.CutPrefix(rq.r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, nil
	}
	name, roles, err := c.jwt.v.Verify(tok, time.Now())
	if err != nil {
		return nil, authErr(err)
	}
	return &User{Name: name, Roles: roles, Admin: slices.Contains(roles, "_admin"), Handler: auth.HandlerJWT}, nil
}

// authErr is an auth package error as the client sees it.
func authErr(err error) error {
	var ae *auth.Error
	if errors.As(err, &ae) {
		return newErr(ae.Status, ae.Code, ae.Reason)
	}
	return err
}
