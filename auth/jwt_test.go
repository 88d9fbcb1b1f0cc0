package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testKeys are one key of each type, made for the test run.
type testKeys struct {
	hmac []byte
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
}

func newTestKeys(t testing.TB) *testKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKeys{hmac: []byte("settee-jwt-test-secret"), rsa: r, ec: e}
}

// pemLine is a public key as a jwt_keys value: PEM with "\n" written out,
// the way CouchDB's docs put it on one ini line.
func pemLine(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), "\n", `\n`)
}

// jwtKeys is the jwt_keys section for k: hmac as _default and "h1", rsa
// as "r1", ec as "e1".
func (k *testKeys) jwtKeys(t testing.TB) map[string]string {
	b64 := base64.StdEncoding.EncodeToString(k.hmac)
	return map[string]string{
		"hmac:_default": b64, "hmac:h1": b64,
		"rsa:r1": pemLine(t, &k.rsa.PublicKey),
		"ec:e1":  pemLine(t, &k.ec.PublicKey),
	}
}

// sign makes a token with the library (the good tokens).
func (k *testKeys) sign(t testing.TB, alg, kid string, claims jwt.MapClaims) string {
	t.Helper()
	m := jwt.GetSigningMethod(alg)
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	var key any = k.hmac
	switch alg[:2] {
	case "RS":
		key = k.rsa
	case "ES":
		key = k.ec
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rawHS256 builds a token from header and claims JSON as written, HMAC'd
// with secret (the bad tokens the library would not make).
func rawHS256(header, claims string, secret []byte) string {
	enc := base64.RawURLEncoding.EncodeToString
	msg := enc([]byte(header)) + "." + enc([]byte(claims))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(msg))
	return msg + "." + enc(m.Sum(nil))
}

func str(s string) *string { return &s }

func TestJWTVerify(t *testing.T) {
	k := newTestKeys(t)
	now := time.Unix(1_700_000_000, 0)
	future, past := now.Add(time.Hour).Unix(), now.Add(-time.Hour).Unix()
	keys := k.jwtKeys(t)
	good := jwt.MapClaims{"sub": "bob", "exp": future, "_couchdb.roles": []string{"r1", "_admin"}}
	e := func(status int, code, reason string) *Error { return &Error{status, code, reason} }
	cases := []struct {
		name  string
		conf  JWTConfig
		token string
		user  string
		roles []string
		err   *Error
	}{
		{name: "HS256", token: k.sign(t, "HS256", "", good), user: "bob", roles: []string{"r1", "_admin"}},
		{name: "HS512 kid", token: k.sign(t, "HS512", "h1", good), user: "bob", roles: []string{"r1", "_admin"}},
		{name: "RS256", token: k.sign(t, "RS256", "r1", good), user: "bob", roles: []string{"r1", "_admin"}},
		{name: "RS384 same rsa key", token: k.sign(t, "RS384", "r1", good), user: "bob", roles: []string{"r1", "_admin"}},
		{name: "ES256", token: k.sign(t, "ES256", "e1", good), user: "bob", roles: []string{"r1", "_admin"}},
		{name: "no roles", token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future}), user: "bob", roles: []string{}},
		{name: "roles as a string", token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"_couchdb.roles":" a ,b, "}`, k.hmac),
			user: "bob", roles: []string{" a", "b"}},
		{name: "roles empty string", token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"_couchdb.roles":""}`, k.hmac),
			user: "bob", roles: []string{""}},
		{name: "roles not strings", token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"_couchdb.roles":[1]}`, k.hmac),
			err: e(400, "bad_request", "Malformed token")},
		{name: "roles_claim_name", conf: JWTConfig{RolesClaimName: str("groups")},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"groups":["g"],"_couchdb.roles":["x"]}`, k.hmac), user: "bob", roles: []string{"g"}},
		{name: "roles_claim_name is literal", conf: JWTConfig{RolesClaimName: str("a.b")},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"a":{"b":["nested"]}}`, k.hmac), user: "bob", roles: []string{}},
		{name: "roles_claim_path", conf: JWTConfig{RolesClaimPath: str("a.b"), RolesClaimName: str("groups")},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"a":{"b":["p"]},"groups":["g"]}`, k.hmac), user: "bob", roles: []string{"p"}},
		{name: "roles_claim_path escaped dot", conf: JWTConfig{RolesClaimPath: str(`a\.b.c`)},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"a.b":{"c":["esc"]}}`, k.hmac), user: "bob", roles: []string{"esc"}},
		{name: "roles_claim_path missing", conf: JWTConfig{RolesClaimPath: str("a.b")},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999}`, k.hmac), err: e(404, "not_found", "missing json key: a")},
		{name: "roles_claim_path through a list", conf: JWTConfig{RolesClaimPath: str("a.b")},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"a":[1]}`, k.hmac), err: e(404, "not_found", "json_mismatch")},
		{name: "exp required by default", token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob"}), err: e(400, "bad_request", "Missing exp claim")},
		{name: "expired", token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": past}), err: e(401, "unauthorized", "exp not in future")},
		{name: "expired and wrong key: exp first", token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":1}`, []byte("x")),
			err: e(401, "unauthorized", "exp not in future")},
		{name: "nbf unchecked by default", token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future, "nbf": future}), user: "bob", roles: []string{}},
		{name: "not yet valid", conf: JWTConfig{RequiredClaims: str("exp, nbf")},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future, "nbf": future}), err: e(401, "unauthorized", "nbf not in past")},
		{name: "nbf missing", conf: JWTConfig{RequiredClaims: str("nbf")},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob"}), err: e(400, "bad_request", "Missing nbf claim")},
		{name: "iat float", conf: JWTConfig{RequiredClaims: str("exp, iat")},
			token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"iat":1.5}`, k.hmac), err: e(400, "bad_request", "Invalid iat claim")},
		{name: "iss tuple missing", conf: JWTConfig{RequiredClaims: str(`{iss, "https://x"}`)},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob"}), err: e(400, "bad_request", "Missing iss claim")},
		{name: "iss tuple wrong", conf: JWTConfig{RequiredClaims: str(`exp, {iss, "https://x"}`)},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future, "iss": "https://y"}), err: e(400, "bad_request", "Invalid iss claim")},
		{name: "iss tuple right", conf: JWTConfig{RequiredClaims: str(`{iss, "https://x"}`)},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "iss": "https://x"}), user: "bob", roles: []string{}},
		{name: "no required claims", conf: JWTConfig{RequiredClaims: str("")},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob"}), user: "bob", roles: []string{}},
		{name: "kid required", conf: JWTConfig{RequiredClaims: str("kid")},
			token: k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob"}), err: e(400, "bad_request", "Missing kid claim")},
		{name: "typ required", conf: JWTConfig{RequiredClaims: str("typ")},
			token: rawHS256(`{"alg":"HS256","typ":"jwt"}`, `{"sub":"bob"}`, k.hmac), err: e(400, "bad_request", "Invalid typ header parameter")},
		{name: "required_claims unknown", conf: JWTConfig{RequiredClaims: str("sub")},
			token: k.sign(t, "HS256", "", good), err: e(500, "unknown_checks", "[sub]")},
		{name: "required_claims duplicate", conf: JWTConfig{RequiredClaims: str("exp exp")},
			token: k.sign(t, "HS256", "", good), err: e(500, "duplicate_checks", "[exp]")},
		{name: "required_claims unparsable", conf: JWTConfig{RequiredClaims: str("EXP")},
			token: k.sign(t, "HS256", "", good), err: e(500, "misconfigured_server", "JWT is not configured correctly")},
		{name: "alg none", token: rawHS256(`{"alg":"none"}`, `{"sub":"bob","exp":9999999999}`, nil), err: e(400, "bad_request", "Invalid alg header parameter")},
		{name: "alg none unsigned", token: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJib2IiLCJleHAiOjk5OTk5OTk5OTl9.",
			err: e(400, "bad_request", "Invalid alg header parameter")},
		{name: "duplicate alg: first wins", token: rawHS256(`{"alg":"HS256","alg":"none"}`, `{"sub":"bob","exp":9999999999}`, k.hmac), user: "bob", roles: []string{}},
		{name: "alg missing", token: rawHS256(`{}`, `{"sub":"bob","exp":9999999999}`, k.hmac), err: e(400, "bad_request", "Missing alg header parameter")},
		{name: "wrong key", token: rawHS256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999}`, []byte("wrong")), err: e(400, "bad_request", "Bad HMAC")},
		{name: "RS256 signed by another key", token: func() string {
			other := newTestKeys(t)
			return other.sign(t, "RS256", "r1", good)
		}(), err: e(400, "bad_request", "Bad signature")},
		{name: "HS256 against an rsa-only kid", token: k.sign(t, "HS256", "r1", good), err: e(400, "bad_request", "Unknown kid")},
		{name: "RS256 with no rsa _default", token: k.sign(t, "RS256", "", good), err: e(400, "bad_request", "Unknown kid")},
		{name: "unknown kid", token: k.sign(t, "HS256", "nope", good), err: e(400, "bad_request", "Unknown kid")},
		{name: "bad hmac key", conf: JWTConfig{Keys: map[string]string{"hmac:_default": "!!!"}}, token: k.sign(t, "HS256", "", good),
			err: e(400, "bad_request", "Not a valid key")},
		{name: "ec key as rsa", conf: JWTConfig{Keys: map[string]string{"rsa:_default": keys["ec:e1"]}}, token: k.sign(t, "RS256", "", good),
			err: e(400, "bad_request", "not an RSA public key")},
		{name: "missing sub", token: k.sign(t, "HS256", "", jwt.MapClaims{"exp": future}), err: e(401, "unauthorized", "Token missing sub claim.")},
		{name: "malformed: two parts", token: "a.b", err: e(400, "bad_request", "Malformed token")},
		{name: "malformed: four parts", token: "a.b.c.d", err: e(400, "bad_request", "Malformed token")},
		{name: "garbage base64", token: "!!!.e30.x", err: e(400, "bad_request", "Malformed token")},
		{name: "header not an object", token: rawHS256(`[]`, `{}`, k.hmac), err: e(400, "bad_request", "Not an object")},
		{name: "garbage signature", token: strings.Join(strings.Split(k.sign(t, "HS256", "", good), ".")[:2], ".") + ".!!!",
			err: e(400, "bad_request", "Bad HMAC")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.conf.Keys == nil {
				c.conf.Keys = keys
			}
			user, roles, err := NewJWTVerifier(c.conf).Verify(c.token, now)
			if c.err != nil {
				ae, ok := err.(*Error)
				if !ok || *ae != *c.err {
					t.Fatalf("Verify = %q %v %v, want error %v", user, roles, err, c.err)
				}
				return
			}
			if err != nil || user != c.user || !slices.Equal(roles, c.roles) || roles == nil {
				t.Fatalf("Verify = %q %#v %v, want %q %#v", user, roles, err, c.user, c.roles)
			}
		})
	}
}

func TestSplitClaimPath(t *testing.T) {
	for in, want := range map[string][]string{
		"a.b": {"a", "b"}, `a\.b.c`: {"a.b", "c"}, "roles": {"roles"}, "": {""}, "a..b": {"a", "", "b"},
	} {
		if got := splitClaimPath(in); !slices.Equal(got, want) {
			t.Errorf("splitClaimPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzJWT: no token panics the verifier, every failure is an *Error with
// a status, and a token it accepts carries a signature that the key
// configured for its alg and kid verifies.
func FuzzJWT(f *testing.F) {
	k := newTestKeys(f)
	keys := k.jwtKeys(f)
	good := jwt.MapClaims{"sub": "bob", "exp": int64(9999999999), "_couchdb.roles": []string{"r"}}
	f.Add(k.sign(f, "HS256", "", good))
	f.Add(k.sign(f, "RS256", "r1", good))
	f.Add(k.sign(f, "ES256", "e1", good))
	f.Add(rawHS256(`{"alg":"none"}`, `{"sub":"bob"}`, nil))
	f.Add("a.b.c")
	v := NewJWTVerifier(JWTConfig{Keys: keys, RequiredClaims: str("exp, nbf, iat"), RolesClaimPath: str(`a\.b.c`)})
	plain := NewJWTVerifier(JWTConfig{Keys: keys})
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, token string) {
		for _, v := range []*JWTVerifier{v, plain} {
			_, _, err := v.Verify(token, now)
			if err != nil {
				if ae, ok := err.(*Error); !ok || ae.Status == 0 {
					t.Fatalf("error %v is not an *Error with a status", err)
				}
				continue
			}
			parts := strings.Split(token, ".")
			h, e := decodePart(parts[0])
			if e != nil {
				t.Fatalf("accepted a token whose header does not decode: %v", e)
			}
			alg, _ := jsonString(h["alg"])
			key, kerr := v.key(alg, h)
			sig, serr := base64.RawURLEncoding.DecodeString(parts[2])
			if kerr != nil || serr != nil || jwt.GetSigningMethod(alg).Verify(parts[0]+"."+parts[1], sig, key) != nil {
				t.Fatalf("accepted %q, whose signature does not verify", token)
			}
		}
	})
}
