package rights_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/rights"
)

func roles(t *testing.T, body string) ([]string, error) {
	t.Helper()
	d, err := rights.ParseUserDoc([]byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return d.Roles()
}

// The user docs of CouchDB 3.5.2's answers (docs/security.md).
func TestUserDocRoles(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string
		err  error
	}{
		{`{"roles":[],"Roles":["_admin"]}`, []string{}, nil},
		{`{"ROLES":["_admin"],"roles":["a"]}`, []string{"a"}, nil},
		{`{"roles":[],"roles":["_admin"]}`, []string{"_admin"}, nil},
		{`{"roles":["_admin"],"roles":[]}`, []string{}, nil},
		{`{"roles":[],"\u0072oles":["_admin"]}`, []string{"_admin"}, nil},
		{`{"x":{"roles":["_admin"]},"roles":["b"]}`, []string{"b"}, nil},
		{`{"Roles":["_admin"]}`, nil, rights.ErrRolesMissing},
		{`{"roles":null}`, nil, rights.ErrRolesMissing},
		{`{"roles":"x"}`, nil, rights.ErrRolesNotArray},
		{`{"roles":{}}`, nil, rights.ErrRolesNotArray},
		{`{"roles":[1]}`, nil, rights.ErrRolesNotStrings},
	} {
		got, err := roles(t, c.body)
		if err != c.err || !slices.Equal(got, c.want) || (c.want != nil && got == nil) {
			t.Errorf("%s: %q %v, want %q %v", c.body, got, err, c.want, c.err)
		}
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{"a":}`, `{"a":1`} {
		if _, err := rights.ParseUserDoc([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCredential(t *testing.T) {
	d, _ := rights.ParseUserDoc([]byte(`{"name":"u","Salt":"S","salt":"s","derived_key":"dk","DERIVED_KEY":"x","iterations":10,"password_scheme":"pbkdf2","pbkdf2_prf":"sha256"}`))
	c := d.Credential()
	if c != (rights.Credential{Name: "u", Scheme: "pbkdf2", PRF: "sha256", Salt: "s", DerivedKey: "dk", Iterations: 10}) {
		t.Fatalf("%+v", c)
	}
	// "iterations" as CouchDB 3.5.2's login reads it (jiffy: an integer
	// has no fraction and no exponent): absent is 10000; an integer is
	// itself (bounded to an int); anything else is no integer, which
	// CouchDB answers 500 function_clause at login
	for _, tc := range []struct {
		it     string
		n      int
		notInt bool
	}{
		{``, 10000, false}, {`10`, 10, false}, {`0`, 0, false}, {`-1`, -1, false},
		{`100000000000`, 100000000000, false},
		{`123456789012345678901234567890`, math.MaxInt, false}, {`-123456789012345678901234567890`, math.MinInt, false},
		{`1e11`, 0, true}, {`10.5`, 0, true}, {`10.0`, 0, true}, {`1E3`, 0, true}, {`1e300`, 0, true},
		{`"10"`, 0, true}, {`null`, 0, true}, {`true`, 0, true}, {`[10]`, 0, true}, {`{}`, 0, true},
		{`10,"iterations":"x"`, 0, true}, {`"x","iterations":10`, 10, false},
	} {
		body := `{"name":"u"}`
		if tc.it != "" {
			body = `{"iterations":` + tc.it + `}`
		}
		d, err := rights.ParseUserDoc([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if c := d.Credential(); c.Iterations != tc.n || c.IterationsNotInteger != tc.notInt {
			t.Errorf("iterations %s: %d, not integer %v; want %d, %v", tc.it, c.Iterations, c.IterationsNotInteger, tc.n, tc.notInt)
		}
	}
}

func TestDedupe(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b":2,"a":3}`:                                                        `{"b":2,"a":3}`,
		`{"admins":{"names":["a"]},"admins":{"names":[]}}`:                           `{"admins":{"names":[]}}`,
		`{"admins":{"names":[]},"admins":{"names":["x"]},"members":{"names":["y"]}}`: `{"admins":{"names":["x"]},"members":{"names":["y"]}}`,
		`{"c":{"x":1,"y":2,"x":3}, "n": 1.50e3, "s":"<\u00e9>"}`:                     `{"c":{"y":2,"x":3},"n":1.50e3,"s":"<é>"}`,
		`{"\u0061":1,"a":2}`:                                                         `{"a":2}`,
		`[{"a":1,"a":2}]`:                                                            `[{"a":2}]`,
	} {
		got, err := rights.Dedupe([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
}

func TestParseSecurity(t *testing.T) {
	s, err := rights.ParseSecurity([]byte(`{"members":{"names":["y"],"\u006eames":["x"]},"Members":{"names":["z"]},"admins":{"roles":["r"]},"admins":{"names":["a"]}}`))
	if err != nil || !slices.Equal(s.Members.Names, []string{"x"}) || s.Members.Roles != nil ||
		!slices.Equal(s.Admins.Names, []string{"a"}) || s.Admins.Roles != nil {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{`{"admins":null}`, `{"admins":[]}`, `{"admins":{"names":"a"}}`, `{"members":{"roles":null}}`, `{"members":{"names":[1]}}`} {
		if _, err := rights.ParseSecurity([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
	if s, err := rights.ParseSecurity(nil); err != nil || !s.Members.Empty() || !s.Admins.Empty() {
		t.Fatalf("empty: %+v %v", s, err)
	}
}

func TestParseConfigAdmin(t *testing.T) {
	c, ok := rights.ParseConfigAdmin("Admin", "-pbkdf2:sha256-dk,salt,10")
	if !ok || c != (rights.Credential{Name: "Admin", Scheme: "pbkdf2", PRF: "sha256", DerivedKey: "dk", Salt: "salt", Iterations: 10}) {
		t.Fatalf("%+v %v", c, ok)
	}
	for _, bad := range []string{"pw", "-hashed-x,y", "-pbkdf2:sha256-dk,salt", "-pbkdf2-dk,salt,0", "-PBKDF2-dk,salt,1"} {
		if _, ok := rights.ParseConfigAdmin("a", bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestParseReplicatorDoc(t *testing.T) {
	d, err := rights.ParseReplicatorDoc([]byte(`{"owner":"a","owner":"b","Owner":"c","user_ctx":{"name":"u","roles":["r"],"Roles":["_admin"]},"userCtx":{"roles":["_admin"]},
		"source":{"url":"http://s","headers":{"Authorization":"Basic x","authorization":"y"},"auth":{"basic":{"username":"n"}}},"target":"http://t"}`))
	if err != nil || d.Owner != "b" || !d.HasOwner || d.UserCtx == nil || d.UserCtx.Name != "u" || !slices.Equal(d.UserCtx.Roles, []string{"r"}) ||
		d.Source.URL != "http://s" || d.Source.Headers["Authorization"] != "Basic x" || d.Source.Headers["authorization"] != "y" ||
		d.Source.Auth["basic"] == nil || d.Target.URL != "http://t" {
		t.Fatalf("%+v %v", d, err)
	}
}

// FuzzUserDocRoles: over user docs with hostile member names (case
// variants, repeats, escapes, nesting), the roles a login derives equal
// the roles the write rules saw. The write rules (auth.ValidateUserDoc)
// read the doc written; the login reads the doc stored (as written, or
// as CouchDB stores it, deduplicated): both through rights, and both
// agree with an exact, last-wins oracle (encoding/json into a map). A
// user who edits their own doc with roles [] and is let through logs in
// with roles [].
func FuzzUserDocRoles(f *testing.F) {
	for _, s := range []string{
		`{"name":"u","type":"user","roles":[],"Roles":["_admin"]}`,
		`{"name":"u","type":"user","roles":[],"roles":["_admin"]}`,
		`{"name":"u","type":"user","roles":["_admin"],"roles":[]}`,
		`{"name":"u","type":"user","roles":[],"\u0072oles":["_admin"]}`,
		`{"name":"u","type":"user","ROLES":["_admin"],"rOles":["x"],"roles":[]}`,
		`{"name":"u","type":"user","roles":[],"x":{"roles":["_admin"],"roles":[]}}`,
		`{"\u006eame":"u","type":"user","name":"v","roles":[]}`,
	} {
		f.Add([]byte(s))
	}
	old, err := rights.ParseUserDoc([]byte(`{"name":"u","type":"user","roles":[]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := rights.ParseUserDoc(body)
		var oracle map[string]any
		if oerr := json.Unmarshal(body, &oracle); (err == nil) != (oerr == nil && oracle != nil) {
			t.Fatalf("rights %v, encoding/json %v", err, oerr)
		}
		if err != nil {
			return
		}
		written, werr := doc.Roles()
		if ov, ok := oracle["roles"]; ok && werr == nil {
			l, _ := ov.([]any)
			if len(l) != len(written) {
				t.Fatalf("roles %q, oracle %v", written, ov)
			}
			for i := range l {
				if l[i] != written[i] {
					t.Fatalf("roles %q, oracle %v", written, ov)
				}
			}
		} else if werr == nil {
			t.Fatalf("roles %q without a member named roles", written)
		}
		deduped, err := rights.Dedupe(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, stored := range [][]byte{body, deduped} {
			sd, err := rights.ParseUserDoc(stored)
			if err != nil {
				t.Fatal(err)
			}
			login, lerr := sd.Roles()
			if lerr != werr || !slices.Equal(login, written) {
				t.Fatalf("login %q %v, write rules %q %v (stored %s)", login, lerr, written, werr, stored)
			}
		}
		if auth.ValidateUserDoc("org.couchdb.user:u", doc, old, false, auth.Writer{Name: "u"}) == nil && len(written) != 0 {
			t.Fatalf("a user's own edit let through with roles %q", written)
		}
	})
}
