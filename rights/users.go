package rights

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// UserDoc is a _users doc as the write rules and the login both read it:
// its top-level members by exact name, a repeated name's last value.
type UserDoc struct {
	m    map[string]any
	nums map[string]string // the text of top-level numbers
}

// ParseUserDoc parses a _users doc's JSON body (an object).
func ParseUserDoc(b []byte) (*UserDoc, error) {
	m, nums, err := decodeTopObject(b)
	if err != nil {
		return nil, err
	}
	return &UserDoc{m: m, nums: nums}, nil
}

// Get is the member of that exact name, decoded as Decode does (nil and
// false when absent).
func (d *UserDoc) Get(name string) (any, bool) {
	if d == nil {
		return nil, false
	}
	v, ok := d.m[name]
	return v, ok
}

// Value is the member of that exact name, nil when absent.
func (d *UserDoc) Value(name string) any {
	v, _ := d.Get(name)
	return v
}

// String is the member when it is a JSON string.
func (d *UserDoc) String(name string) (string, bool) {
	s, ok := d.Value(name).(string)
	return s, ok
}

// Why the roles of a user doc are not a list of roles (the reasons are
// _design/_auth's).
var (
	ErrRolesMissing    = errors.New("doc.roles must exist")
	ErrRolesNotArray   = errors.New("doc.roles must be an array")
	ErrRolesNotStrings = errors.New("doc.roles can only contain strings")
)

// Roles is the one rule for a user doc's roles, which the write rules
// check and the login grants: the member named exactly "roles" (its last
// value when repeated), which must be an array of strings. Missing or falsy (null, false, 0, "") is ErrRolesMissing, as
// _design/_auth's `if (!newDoc.roles)`; any other non-array is
// ErrRolesNotArray; an array with a non-string is ErrRolesNotStrings. An
// empty array is an empty, non-nil list.
func (d *UserDoc) Roles() ([]string, error) {
	v := d.Value("roles")
	if !Truthy(v) {
		return nil, ErrRolesMissing
	}
	list, ok := v.([]any)
	if !ok {
		return nil, ErrRolesNotArray
	}
	roles := make([]string, len(list))
	for i, r := range list {
		s, ok := r.(string)
		if !ok {
			return nil, ErrRolesNotStrings
		}
		roles[i] = s
	}
	return roles, nil
}

// Credential is the password hash a user doc stores, by its exact
// member names; a member that is absent or of another JSON type is its
// zero value.
type Credential struct {
	Name        string // "name"
	Scheme      string // "password_scheme"
	PRF         string // "pbkdf2_prf"
	Salt        string // "salt"
	DerivedKey  string // "derived_key"
	PasswordSHA string // "password_sha"
	// "iterations" as CouchDB 3.5's login reads it: 10000 when absent;
	// a JSON integer (no fraction, no exponent) its value, held at the
	// bounds of an int beyond them; any other value (1.5, 1e11, "10",
	// null) sets IterationsNotInteger, which CouchDB answers with a 500
	// (verify_iterations has no clause for it) and computes no hash.
	Iterations           int
	IterationsNotInteger bool
}

// DefaultIterations is CouchDB's count for a pbkdf2 user doc without
// "iterations" (couch_httpd_auth's authenticate_int_pbkdf2).
const DefaultIterations = 10000

// Credential is the doc's stored password hash.
func (d *UserDoc) Credential() Credential {
	c := Credential{}
	c.Name, _ = d.String("name")
	c.Scheme, _ = d.String("password_scheme")
	c.PRF, _ = d.String("pbkdf2_prf")
	c.Salt, _ = d.String("salt")
	c.DerivedKey, _ = d.String("derived_key")
	c.PasswordSHA, _ = d.String("password_sha")
	c.Iterations, c.IterationsNotInteger = d.iterations()
	return c
}

func (d *UserDoc) iterations() (int, bool) {
	if _, ok := d.Get("iterations"); !ok {
		return DefaultIterations, false
	}
	lit, ok := d.nums["iterations"]
	if !ok || strings.ContainsAny(lit, ".eE") {
		return 0, true
	}
	n, err := strconv.ParseInt(lit, 10, 0)
	if errors.Is(err, strconv.ErrRange) {
		if strings.HasPrefix(lit, "-") {
			return math.MinInt, false
		}
		return math.MaxInt, false
	}
	if err != nil {
		return 0, true
	}
	return int(n), false
}

// Truthy is JavaScript's truth of a decoded JSON value (as Decode makes
// it), which _design/_auth's rules test members with.
func Truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case float64:
		return t != 0 && !math.IsNaN(t)
	case string:
		return t != ""
	}
	return true
}
