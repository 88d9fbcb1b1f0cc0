package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Error is an authentication failure with CouchDB's answer to it: the
// HTTP status, the error name and the reason, exactly as CouchDB 3.5
// words them (httpgw turns it into the response as it is).
type Error struct {
	Status int
	Code   string
	Reason string
}

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

func badRequest(reason string) *Error { return &Error{400, "bad_request", reason} }

func unauthorized(reason string) *Error { return &Error{401, "unauthorized", reason} }

// errMalformed is jwtf's answer to anything that is not three base64url
// parts of JSON.
var errMalformed = badRequest("Malformed token")

var errMisconfigured = &Error{500, "misconfigured_server", "JWT is not configured correctly"}

// JWTConfig is what JWT authentication reads from _config. A nil pointer
// is a key that is not set: CouchDB tells "unset" (its default applies)
// from "set to the empty string" (which it uses as it is).
type JWTConfig struct {
	// Keys is the jwt_keys section: "hmac:KID" (base64 secret),
	// "rsa:KID" and "ec:KID" (PEM public keys, newlines written "\n").
	Keys map[string]string
	// RequiredClaims is jwt_auth/required_claims (unset: "exp").
	RequiredClaims *string
	// RolesClaimName is jwt_auth/roles_claim_name (unset: "_couchdb.roles"),
	// a top-level claim's name taken literally, dots and all.
	RolesClaimName *string
	// RolesClaimPath is jwt_auth/roles_claim_path: a dotted path into
	// nested claims ("\." is a dot inside a name); when set it wins over
	// RolesClaimName.
	RolesClaimPath *string
}

// JWTVerifier checks bearer tokens as CouchDB 3.5's jwt handler (jwtf)
// does. It is built once per config generation and is safe for
// concurrent use: it is never changed after NewJWTVerifier.
type JWTVerifier struct {
	checks    checks
	configErr *Error         // required_claims does not parse: every token gets it
	keys      map[string]key // by "hmac:KID", "rsa:KID", "ec:KID"
	rolesName string
	rolesPath []string // nil: roles come from rolesName
}

// key is a parsed jwt_keys value, or why it does not parse: CouchDB
// answers a bad key only when a token asks for it, so a bad key does not
// stop the good ones from working.
type key struct {
	k   any // []byte, *rsa.PublicKey or *ecdsa.PublicKey
	err *Error
}

// checks is jwtf's check list beside the always-present alg.
type checks struct {
	exp, iat, nbf, kid, typ bool
	iss                     *string // {iss, "value"}
	bareISS                 bool    // "iss" without a value (see validate)
}

// NewJWTVerifier parses the configuration. It never fails: what CouchDB
// would refuse at request time is refused at request time here too.
func NewJWTVerifier(c JWTConfig) *JWTVerifier {
	v := &JWTVerifier{keys: map[string]key{}, rolesName: "_couchdb.roles"}
	rc := "exp"
	if c.RequiredClaims != nil {
		rc = *c.RequiredClaims
	}
	v.checks, v.configErr = parseRequiredClaims(rc)
	if c.RolesClaimName != nil {
		v.rolesName = *c.RolesClaimName
	}
	if c.RolesClaimPath != nil {
		v.rolesPath = splitClaimPath(*c.RolesClaimPath)
	}
	for name, val := range c.Keys {
		kty, _, ok := strings.Cut(name, ":")
		if !ok {
			continue
		}
		v.keys[name] = parseKey(kty, val)
	}
	return v
}

// requiredClaim is CouchDB's pattern for one entry of required_claims: a
// claim name, or {name, "value"}. Anything between matches is ignored,
// as CouchDB's re:run over the whole value does.
var requiredClaim = regexp.MustCompile(`([a-z]+)|\{([a-z]+) *, *"([^"]+)"\}`)

// parseRequiredClaims turns required_claims into checks, with the
// errors CouchDB answers for a value it cannot use (its
// validate_checks): duplicates, then unknown checks, in its words.
func parseRequiredClaims(s string) (checks, *Error) {
	var c checks
	ms := requiredClaim.FindAllStringSubmatch(s, -1)
	if ms == nil {
		if s != "" {
			return c, errMisconfigured
		}
		return c, nil
	}
	type term struct{ name, val string } // val != "": a tuple
	terms := []term{{name: "alg"}}       // the handler always checks alg
	for _, m := range ms {
		if m[1] != "" {
			terms = append(terms, term{name: m[1]})
		} else {
			terms = append(terms, term{name: m[2], val: m[3]})
		}
	}
	show := func(t term) string {
		if t.val == "" {
			return t.name
		}
		return "{" + t.name + `,<<"` + t.val + `">>}`
	}
	// duplicates: the sorted list less one of each distinct term
	// (Erlang's L2 -- L1), atoms before tuples
	sorted := slices.Clone(terms)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if (a.val == "") != (b.val == "") {
			return a.val == ""
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.val < b.val
	})
	var dups []string
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			dups = append(dups, show(sorted[i]))
		}
	}
	if len(dups) > 0 {
		return c, &Error{500, "duplicate_checks", "[" + strings.Join(dups, ",") + "]"}
	}
	var unknown []string
	for _, t := range terms {
		switch t.name {
		case "alg", "exp", "iat", "iss", "kid", "nbf", "sig", "typ":
		default:
			unknown = append(unknown, show(t))
		}
	}
	if len(unknown) > 0 {
		return c, &Error{500, "unknown_checks", "[" + strings.Join(unknown, ",") + "]"}
	}
	seen := map[string]bool{}
	for _, t := range terms {
		// jwtf reads each check with proplists:get_value: the first
		// entry of a name decides
		if seen[t.name] {
			continue
		}
		seen[t.name] = true
		switch {
		case t.name == "iss" && t.val != "":
			val := t.val
			c.iss = &val
		case t.name == "iss":
			c.bareISS = true
		case t.val != "" && (t.name == "exp" || t.name == "iat" || t.name == "nbf" || t.name == "typ"):
			// CouchDB crashes (500 case_clause) on every token with
			// these; settee says the configuration is wrong instead
			return c, errMisconfigured
		case t.val != "":
			// {kid, …}, {alg, …}, {sig, …}: CouchDB ignores the value
		case t.name == "exp":
			c.exp = true
		case t.name == "iat":
			c.iat = true
		case t.name == "nbf":
			c.nbf = true
		case t.name == "kid":
			c.kid = true
		case t.name == "typ":
			c.typ = true
		}
	}
	return c, nil
}

// splitClaimPath splits roles_claim_path at dots not escaped by a
// backslash, then unescapes "\." in each name, as CouchDB's
// tokenize_json_path.
func splitClaimPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' && (i == 0 || p[i-1] != '\\') {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	out = append(out, p[start:])
	for i, s := range out {
		out[i] = strings.ReplaceAll(s, `\.`, ".")
	}
	return out
}

// parseKey reads one jwt_keys value the way jwtf_keystore does, with its
// reasons for a value it cannot use.
func parseKey(kty, val string) key {
	switch kty {
	case "hmac":
		b, err := base64.StdEncoding.DecodeString(val)
		if err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(val); err != nil {
				return key{err: badRequest("Not a valid key")}
			}
		}
		return key{k: b}
	case "rsa", "ec":
		// CouchDB's docs write a PEM on one ini line with "\n" for
		// each newline
		raw := []byte(strings.ReplaceAll(val, `\n`, "\n"))
		blk, rest := pem.Decode(raw)
		if blk == nil || bytes.Contains(rest, []byte("-----BEGIN")) {
			return key{err: badRequest("Not a valid key")}
		}
		var pub any
		var err error
		switch blk.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(blk.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(blk.Bytes)
		}
		_, isRSA := pub.(*rsa.PublicKey)
		_, isEC := pub.(*ecdsa.PublicKey)
		switch {
		case err == nil && kty == "rsa" && isRSA, err == nil && kty == "ec" && isEC:
			return key{k: pub}
		case kty == "rsa":
			return key{err: badRequest("not an RSA public key")}
		default:
			return key{err: badRequest("not an EC public key")}
		}
	}
	return key{err: badRequest("Unknown kty")}
}

// methods are jwtf's algorithms; the prefix names the key type that may
// verify them, so an HS256 token is only ever checked against an hmac:
// key, an RS256 one against an rsa: key. "none" is not among them.
var methods = map[string]jwt.SigningMethod{
	"HS256": jwt.SigningMethodHS256, "HS384": jwt.SigningMethodHS384, "HS512": jwt.SigningMethodHS512,
	"RS256": jwt.SigningMethodRS256, "RS384": jwt.SigningMethodRS384, "RS512": jwt.SigningMethodRS512,
	"ES256": jwt.SigningMethodES256, "ES384": jwt.SigningMethodES384, "ES512": jwt.SigningMethodES512,
}

// Verify checks a bearer token at time now and answers its user: the
// name (sub) and roles. The checks run in jwtf's order, so a token
// wrong in several ways gets the answer CouchDB gives: the token's
// shape, the header (typ, alg), the claims (iss, iat, nbf, exp), the key
// (kid), the signature, then roles and sub. An error is always an *Error.
func (v *JWTVerifier) Verify(token string, now time.Time) (name string, roles []string, err error) {
	if v.configErr != nil {
		return "", nil, v.configErr
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", nil, errMalformed
	}
	header, e := decodePart(parts[0])
	if e != nil {
		return "", nil, e
	}
	if e := v.checkHeader(header); e != nil {
		return "", nil, e
	}
	claims, e := decodePart(parts[1])
	if e != nil {
		return "", nil, e
	}
	if e := v.checkClaims(claims, now.Unix()); e != nil {
		return "", nil, e
	}
	alg, _ := jsonString(header["alg"])
	k, e := v.key(alg, header)
	if e != nil {
		return "", nil, e
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || methods[alg].Verify(parts[0]+"."+parts[1], sig, k) != nil {
		if strings.HasPrefix(alg, "HS") {
			return "", nil, badRequest("Bad HMAC")
		}
		return "", nil, badRequest("Bad signature")
	}
	roles, e = v.roles(claims)
	if e != nil {
		return "", nil, e
	}
	sub, ok := claims["sub"]
	if !ok {
		return "", nil, unauthorized("Token missing sub claim.")
	}
	name, ok = jsonString(sub)
	if !ok {
		// CouchDB takes a number or an object as the user's name;
		// settee's names are strings
		return "", nil, errMalformed
	}
	return name, roles, nil
}

func (v *JWTVerifier) checkHeader(h map[string]json.RawMessage) *Error {
	if v.checks.typ {
		typ, ok := h["typ"]
		if !ok {
			return badRequest("Missing typ header parameter")
		}
		if s, _ := jsonString(typ); s != "JWT" {
			return badRequest("Invalid typ header parameter")
		}
	}
	raw, ok := h["alg"]
	if !ok {
		return badRequest("Missing alg header parameter")
	}
	if alg, _ := jsonString(raw); methods[alg] == nil {
		return badRequest("Invalid alg header parameter")
	}
	return nil
}

// checkClaims is jwtf's validate_payload. Only the checks in
// required_claims run: an nbf in the future is accepted unless nbf is
// required (CouchDB's default is exp alone). Like CouchDB, which compares
// in Erlang's term order, a non-number exp is "in the future" and a
// non-number nbf is never "in the past".
func (v *JWTVerifier) checkClaims(c map[string]json.RawMessage, now int64) *Error {
	if v.checks.iss != nil || v.checks.bareISS {
		raw, ok := c["iss"]
		switch {
		case !ok:
			return badRequest("Missing iss claim")
		case v.checks.iss != nil:
			if s, isStr := jsonString(raw); !isStr || s != *v.checks.iss {
				return badRequest("Invalid iss claim")
			}
		case string(raw) != "true":
			// a bare "iss" expects the atom true, which only a JSON
			// true equals
			return badRequest("Invalid iss claim")
		}
	}
	if v.checks.iat {
		raw, ok := c["iat"]
		if !ok {
			return badRequest("Missing iat claim")
		}
		if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil && !isBigInteger(raw) {
			return badRequest("Invalid iat claim")
		}
	}
	if v.checks.nbf {
		raw, ok := c["nbf"]
		if !ok {
			return badRequest("Missing nbf claim")
		}
		if f, isNum := jsonNumber(raw); !isNum || !(f < float64(now)) {
			return unauthorized("nbf not in past")
		}
	}
	if v.checks.exp {
		raw, ok := c["exp"]
		if !ok {
			return badRequest("Missing exp claim")
		}
		if f, isNum := jsonNumber(raw); isNum && !(f > float64(now)) {
			return unauthorized("exp not in future")
		}
	}
	return nil
}

// key is the key that may verify alg: jwt_keys' "KTY:KID", the kid from
// the header or "_default".
func (v *JWTVerifier) key(alg string, h map[string]json.RawMessage) (any, *Error) {
	kid := "_default"
	if raw, ok := h["kid"]; ok {
		s, isStr := jsonString(raw)
		if !isStr {
			// CouchDB crashes on a kid that is not a string
			return nil, badRequest("Unknown kid")
		}
		kid = s
	} else if v.checks.kid {
		return nil, badRequest("Missing kid claim")
	}
	kty := map[byte]string{'H': "hmac", 'R': "rsa", 'E': "ec"}[alg[0]]
	k, ok := v.keys[kty+":"+kid]
	if !ok {
		return nil, badRequest("Unknown kid")
	}
	if k.err != nil {
		return nil, k.err
	}
	return k.k, nil
}

// roles reads the roles claim: a list of strings, or one string of
// comma-separated roles. A missing roles_claim_path is CouchDB's 404.
func (v *JWTVerifier) roles(c map[string]json.RawMessage) ([]string, *Error) {
	var raw json.RawMessage
	if v.rolesPath == nil {
		r, ok := c[v.rolesName]
		if !ok {
			return []string{}, nil
		}
		raw = r
	} else {
		obj := c
		for i, name := range v.rolesPath {
			r, ok := obj[name]
			if !ok {
				return nil, &Error{404, "not_found", "missing json key: " + name}
			}
			raw = r
			if i == len(v.rolesPath)-1 {
				break
			}
			next, err := firstWins(r)
			if err != nil {
				return nil, &Error{404, "not_found", "json_mismatch"}
			}
			obj = next
		}
	}
	if s, ok := jsonString(raw); ok {
		return SplitList(s), nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		// a number, null, true or an object: CouchDB crashes (500)
		return nil, errMalformed
	}
	roles := make([]string, 0, len(list))
	for _, r := range list {
		s, ok := jsonString(r)
		if !ok {
			return nil, errMalformed
		}
		roles = append(roles, s)
	}
	return roles, nil
}

// SplitList splits a comma-separated list as CouchDB's
// re:split(V, "\\s*,\\s*", [trim]): blanks around commas go, empty
// entries at the end go, and "" is [""].
func SplitList(s string) []string {
	if s == "" {
		return []string{""}
	}
	parts := listSep.Split(s, -1)
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if parts == nil {
		return []string{}
	}
	return parts
}

var listSep = regexp.MustCompile(`\s*,\s*`)

// decodePart decodes a header or claims part: base64url (CouchDB's b64url
// also takes "=" padding) of a JSON object.
func decodePart(p string) (map[string]json.RawMessage, *Error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p, "="))
	if err != nil || !json.Valid(b) {
		return nil, errMalformed
	}
	m, err := firstWins(b)
	if err != nil {
		return nil, badRequest("Not an object")
	}
	return m, nil
}

// firstWins decodes a JSON object's members, keeping the first of a
// repeated name as CouchDB (proplists) does, so {"alg":"HS256",
// "alg":"none"} is HS256 on both. b must be valid JSON.
func firstWins(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("first token: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not an object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("member name: %w", err)
		}
		name, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("member %q: %w", name, err)
		}
		if _, seen := m[name]; !seen {
			m[name] = val
		}
	}
	return m, nil
}

func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonNumber is a JSON number's value; false for anything else.
func jsonNumber(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	// raw is valid JSON, so the one error left is a number out of
	// float64's range, which ParseFloat answers as ±Inf: still in order
	f, _ := strconv.ParseFloat(string(raw), 64)
	return f, true
}

// isBigInteger: a JSON integer too long for int64 is still an integer
// to Erlang.
func isBigInteger(raw json.RawMessage) bool {
	s := strings.TrimPrefix(string(raw), "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}
