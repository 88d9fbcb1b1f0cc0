package httpgw

// jwtConf is the jwt_keys and jwt_auth settings, parsed.
type jwtConf struct{}

func loadJWTConf(s Settings) *jwtConf { return &jwtConf{} }

// jwtUser authenticates a request's "Authorization: Bearer" JWT; nil, nil
// when it has none.
func (a *authenticator) jwtUser(rq *req, c *authConf) (*User, error) { return nil, nil }
