package httpgw_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// allHandlers puts jwt and proxy before cookie and default. CouchDB 3.5.2
// reads chttpd/authentication_handlers only at start (a _config write
// does not change its chain), so its servers get it in local.ini; settee
// reads it live and gets it through _config.
const allHandlers = "{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}"

// authTarget is a server under test with its admin's credentials.
type authTarget struct {
	url, user, pw string
}

// authTargets runs f on a settee and on a real CouchDB 3.5.2, each with
// every auth handler enabled and the given _config written; the CouchDB
// half is skipped (with a message) when there is none here.
func authTargets(t *testing.T, config [][3]string, f func(t *testing.T, s authTarget)) {
	t.Run("settee", func(t *testing.T) {
		s := testserver.Start(t)
		tg := authTarget{s.URL, testserver.AdminUser, testserver.AdminPassword}
		putConfig(t, tg, "chttpd", "authentication_handlers", allHandlers)
		for _, c := range config {
			putConfig(t, tg, c[0], c[1], c[2])
		}
		f(t, tg)
	})
	t.Run("couchdb", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a CouchDB")
		}
		cs := testcouch.Start(t, "[chttpd]\nauthentication_handlers = "+allHandlers+"\n")
		tg := authTarget{cs.URL, cs.User, cs.Password}
		for _, c := range config {
			putConfig(t, tg, c[0], c[1], c[2])
		}
		f(t, tg)
	})
}

func putConfig(t *testing.T, s authTarget, section, key, value string) {
	t.Helper()
	b, _ := json.Marshal(value)
	req, _ := http.NewRequest("PUT", s.url+"/_node/_local/_config/"+section+"/"+key, strings.NewReader(string(b)))
	req.SetBasicAuth(s.user, s.pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT _config/%s/%s: %d %s", section, key, resp.StatusCode, body)
	}
}

// sessionCase is one request and CouchDB 3.5.2's answer to it.
type sessionCase struct {
	name   string
	path   string // "" : /_session
	hdr    map[string]string
	basic  bool   // also send the admin's basic auth
	status int    // 200 unless set
	err    string // with status != 200
	reason string
	// for 200 on /_session: the userCtx and info.authenticated ("" :
	// anonymous, name null)
	user    string
	roles   []string
	handler string
}

func runSessionCases(t *testing.T, s authTarget, cases []sessionCase) {
	t.Helper()
	for _, c := range cases {
		path := c.path
		if path == "" {
			path = "/_session"
		}
		req, _ := http.NewRequest("GET", s.url+path, nil)
		req.Header.Set("Accept", "application/json")
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		if c.basic {
			req.SetBasicAuth(s.user, s.pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := c.status
		if want == 0 {
			want = 200
		}
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, want, b)
			continue
		}
		if want != 200 {
			var e struct{ Error, Reason string }
			if json.Unmarshal(b, &e) != nil || e.Error != c.err || e.Reason != c.reason {
				t.Errorf("%s: %s, want %q/%q", c.name, b, c.err, c.reason)
			}
			continue
		}
		if c.path != "" {
			continue
		}
		var sess struct {
			UserCtx struct {
				Name  *string  `json:"name"`
				Roles []string `json:"roles"`
			} `json:"userCtx"`
			Info struct {
				Authenticated string `json:"authenticated"`
			} `json:"info"`
		}
		if err := json.Unmarshal(b, &sess); err != nil {
			t.Fatalf("%s: %s: %v", c.name, b, err)
		}
		name := ""
		if sess.UserCtx.Name != nil {
			name = *sess.UserCtx.Name
		}
		roles := c.roles
		if roles == nil {
			roles = []string{}
		}
		if name != c.user || (c.user == "") != (sess.UserCtx.Name == nil) || !slices.Equal(sess.UserCtx.Roles, roles) ||
			sess.Info.Authenticated != c.handler {
			t.Errorf("%s: %s, want user %q roles %q by %q", c.name, b, c.user, roles, c.handler)
		}
	}
}

// jwtKeys are one key of each type for a test.
type jwtKeys struct {
	hmac []byte
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
}

func newJWTKeys(t *testing.T) *jwtKeys {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtKeys{hmac: []byte("side-by-side-secret"), rsa: r, ec: e}
}

// pemValue is a public key the way CouchDB's docs write it into
// jwt_keys: PEM on one line, "\n" for each newline.
func pemValue(t *testing.T, pub any) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), "\n", `\n`)
}

func (k *jwtKeys) config(t *testing.T) [][3]string {
	return [][3]string{
		{"jwt_keys", "hmac:_default", base64.StdEncoding.EncodeToString(k.hmac)},
		{"jwt_keys", "rsa:r1", pemValue(t, &k.rsa.PublicKey)},
		{"jwt_keys", "ec:e1", pemValue(t, &k.ec.PublicKey)},
	}
}

func (k *jwtKeys) sign(t *testing.T, alg, kid string, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims)
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

// hs256 signs header and claims JSON as written (tokens the library
// would not make).
func hs256(header, claims string, secret []byte) string {
	enc := base64.RawURLEncoding.EncodeToString
	msg := enc([]byte(header)) + "." + enc([]byte(claims))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(msg))
	return msg + "." + enc(m.Sum(nil))
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// TestJWTSideBySide sends the same tokens to settee and to CouchDB 3.5.2;
// the table is CouchDB's answers.
func TestJWTSideBySide(t *testing.T) {
	t.Parallel()
	k := newJWTKeys(t)
	future, past := time.Now().Add(time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	good := jwt.MapClaims{"sub": "bob", "exp": future, "_couchdb.roles": []string{"r1"}}
	admin := jwt.MapClaims{"sub": "root", "exp": future, "_couchdb.roles": []string{"_admin"}}
	other := newJWTKeys(t)
	cases := []sessionCase{
		{name: "HS256", hdr: bearer(k.sign(t, "HS256", "", good)), user: "bob", roles: []string{"r1"}, handler: "jwt"},
		{name: "RS256", hdr: bearer(k.sign(t, "RS256", "r1", good)), user: "bob", roles: []string{"r1"}, handler: "jwt"},
		{name: "ES256", hdr: bearer(k.sign(t, "ES256", "e1", good)), user: "bob", roles: []string{"r1"}, handler: "jwt"},
		{name: "roles as a string", hdr: bearer(hs256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"_couchdb.roles":"a, b ,c"}`, k.hmac)),
			user: "bob", roles: []string{"a", "b", "c"}, handler: "jwt"},
		{name: "nbf in the future, not required", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future, "nbf": future})),
			user: "bob", handler: "jwt"},
		{name: "exp missing", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob"})), status: 400, err: "bad_request", reason: "Missing exp claim"},
		{name: "expired", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": past})), status: 401, err: "unauthorized", reason: "exp not in future"},
		{name: "alg none", hdr: bearer(hs256(`{"alg":"none"}`, `{"sub":"bob","exp":9999999999}`, nil)), status: 400, err: "bad_request", reason: "Invalid alg header parameter"},
		{name: "alg none unsigned", hdr: bearer(strings.Join(strings.Split(hs256(`{"alg":"none"}`, `{"sub":"bob","exp":9999999999}`, nil), ".")[:2], ".") + "."),
			status: 400, err: "bad_request", reason: "Invalid alg header parameter"},
		{name: "wrong hmac key", hdr: bearer(hs256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999}`, []byte("wrong"))), status: 400, err: "bad_request", reason: "Bad HMAC"},
		{name: "RS256 by another key", hdr: bearer(other.sign(t, "RS256", "r1", good)), status: 400, err: "bad_request", reason: "Bad signature"},
		{name: "ES256 by another key", hdr: bearer(other.sign(t, "ES256", "e1", good)), status: 400, err: "bad_request", reason: "Bad signature"},
		{name: "HS256 against the rsa-only kid", hdr: bearer(k.sign(t, "HS256", "r1", good)), status: 400, err: "bad_request", reason: "Unknown kid"},
		{name: "RS256 with no rsa _default", hdr: bearer(k.sign(t, "RS256", "", good)), status: 400, err: "bad_request", reason: "Unknown kid"},
		{name: "unknown kid", hdr: bearer(k.sign(t, "HS256", "nope", good)), status: 400, err: "bad_request", reason: "Unknown kid"},
		{name: "missing sub", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"exp": future})), status: 401, err: "unauthorized", reason: "Token missing sub claim."},
		{name: "malformed", hdr: bearer("a.b"), status: 400, err: "bad_request", reason: "Malformed token"},
		{name: "garbage base64", hdr: bearer("!!!.e30.x"), status: 400, err: "bad_request", reason: "Malformed token"},
		{name: "header not an object", hdr: bearer(hs256(`[]`, `{}`, k.hmac)), status: 400, err: "bad_request", reason: "Not an object"},
		{name: "roles not strings", hdr: bearer(hs256(`{"alg":"HS256"}`, `{"sub":"bob","exp":9999999999,"_couchdb.roles":[1]}`, k.hmac)),
			status: 400, err: "bad_request", reason: "Malformed token"},
		{name: "lower-case bearer is not the jwt handler's", hdr: map[string]string{"Authorization": "bearer x.y.z"}},
		{name: "a jwt _admin is a server admin", path: "/_node/_local/_config/jwt_auth", hdr: bearer(k.sign(t, "HS256", "", admin))},
		{name: "a jwt user is not", path: "/_node/_local/_config/jwt_auth", hdr: bearer(k.sign(t, "HS256", "", good)),
			status: 401, err: "unauthorized", reason: "You are not a server admin."},
	}
	authTargets(t, k.config(t), func(t *testing.T, s authTarget) {
		runSessionCases(t, s, cases)
		// a database whose members are role r1
		for _, st := range []struct{ method, path, body string }{
			{"PUT", "/jwtdb", ""},
			{"PUT", "/jwtdb/_security", `{"members":{"roles":["r1"]}}`},
		} {
			req, _ := http.NewRequest(st.method, s.url+st.path, strings.NewReader(st.body))
			req.SetBasicAuth(s.user, s.pw)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				t.Fatalf("%s %s: %d", st.method, st.path, resp.StatusCode)
			}
		}
		runSessionCases(t, s, []sessionCase{
			{name: "member by jwt role", path: "/jwtdb", hdr: bearer(k.sign(t, "ES256", "e1", good))},
			{name: "jwt user without the role", path: "/jwtdb", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"sub": "eve", "exp": future})),
				status: 403, err: "forbidden", reason: "You are not allowed to access this db."},
		})
	})
}

// TestJWTClaimsConfig: jwt_auth's required_claims and roles claims, as
// CouchDB 3.5.2 reads them.
func TestJWTClaimsConfig(t *testing.T) {
	t.Parallel()
	k := newJWTKeys(t)
	future := time.Now().Add(time.Hour).Unix()
	tok := func(claims string) map[string]string { return bearer(hs256(`{"alg":"HS256"}`, claims, k.hmac)) }
	steps := []struct {
		config [][3]string
		cases  []sessionCase
	}{
		{[][3]string{{"jwt_auth", "required_claims", `exp, {iss, "https://idp"}`}}, []sessionCase{
			{name: "iss missing", hdr: tok(`{"sub":"bob","exp":9999999999}`), status: 400, err: "bad_request", reason: "Missing iss claim"},
			{name: "iss wrong", hdr: tok(`{"sub":"bob","exp":9999999999,"iss":"https://other"}`), status: 400, err: "bad_request", reason: "Invalid iss claim"},
			{name: "iss right", hdr: tok(`{"sub":"bob","exp":9999999999,"iss":"https://idp"}`), user: "bob", handler: "jwt"},
		}},
		{[][3]string{{"jwt_auth", "required_claims", "exp, nbf, iat"}}, []sessionCase{
			{name: "iat is checked before nbf", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future})), status: 400, err: "bad_request", reason: "Missing iat claim"},
			{name: "not yet valid", hdr: bearer(k.sign(t, "HS256", "", jwt.MapClaims{"sub": "bob", "exp": future, "iat": 1, "nbf": future})),
				status: 401, err: "unauthorized", reason: "nbf not in past"},
			{name: "iat a float", hdr: tok(`{"sub":"bob","exp":9999999999,"iat":1.5,"nbf":1}`), status: 400, err: "bad_request", reason: "Invalid iat claim"},
		}},
		{[][3]string{{"jwt_auth", "required_claims", "sub"}}, []sessionCase{
			{name: "unknown check", hdr: tok(`{"sub":"bob"}`), status: 500, err: "unknown_checks", reason: "[sub]"},
		}},
		{[][3]string{{"jwt_auth", "required_claims", "EXP"}}, []sessionCase{
			{name: "unparsable required_claims", hdr: tok(`{"sub":"bob"}`), status: 500, err: "misconfigured_server", reason: "JWT is not configured correctly"},
		}},
		{[][3]string{{"jwt_auth", "required_claims", ""}, {"jwt_auth", "roles_claim_name", "groups"}}, []sessionCase{
			{name: "roles_claim_name", hdr: tok(`{"sub":"bob","groups":["g"],"_couchdb.roles":["x"]}`), user: "bob", roles: []string{"g"}, handler: "jwt"},
		}},
		{[][3]string{{"jwt_auth", "roles_claim_path", `a\.b.c`}}, []sessionCase{
			{name: "roles_claim_path wins, dot escaped", hdr: tok(`{"sub":"bob","a.b":{"c":["esc"]},"groups":["g"]}`), user: "bob", roles: []string{"esc"}, handler: "jwt"},
			{name: "roles_claim_path missing", hdr: tok(`{"sub":"bob"}`), status: 404, err: "not_found", reason: "missing json key: a.b"},
			{name: "roles_claim_path through a list", hdr: tok(`{"sub":"bob","a.b":[1]}`), status: 404, err: "not_found", reason: "json_mismatch"},
		}},
	}
	cfg := [][3]string{{"jwt_keys", "hmac:_default", base64.StdEncoding.EncodeToString(k.hmac)}}
	authTargets(t, cfg, func(t *testing.T, s authTarget) {
		for _, st := range steps {
			for _, c := range st.config {
				putConfig(t, s, c[0], c[1], c[2])
			}
			runSessionCases(t, s, st.cases)
		}
	})
}
