package rights

import "errors"

// Principals is one side of a _security object: user names and roles.
type Principals struct {
	Names []string
	Roles []string
}

// Empty reports whether no name and no role is listed.
func (p Principals) Empty() bool { return len(p.Names) == 0 && len(p.Roles) == 0 }

// Security is a database's _security object: its admins and members.
// Members other than "admins" and "members" (and, inside them, other than
// "names" and "roles") grant nothing and are ignored; "Members" or
// "ADMINS" are such other members.
type Security struct {
	Admins  Principals
	Members Principals
}

// ErrSecurity is a _security object CouchDB refuses: admins or members
// present but not an object, or names or roles present but not an array
// of strings (null included).
var ErrSecurity = errors.New("rights: admins and members must be JSON objects with string arrays names and roles")

// ParseSecurity parses a _security object. Its names are exact and a
// repeated one keeps its last value, at every level, as CouchDB: of
// {"admins":{"names":["a"]},"admins":{"names":[]}} no name is admin.
// An empty body is the empty object. Not an object: ErrInvalid; a side
// of the wrong shape: a *SecurityError (wrapping ErrSecurity)
// that names it.
func ParseSecurity(b []byte) (*Security, error) {
	s := &Security{}
	if len(b) == 0 {
		return s, nil
	}
	m, err := DecodeObject(b)
	if err != nil {
		return nil, err
	}
	if s.Admins, err = principals(m, "admins"); err != nil {
		return nil, err
	}
	if s.Members, err = principals(m, "members"); err != nil {
		return nil, err
	}
	return s, nil
}

// SecurityError names the side of a _security object that is malformed.
type SecurityError struct{ Member string }

func (e *SecurityError) Error() string { return "rights: bad " + e.Member + " in _security" }
func (e *SecurityError) Unwrap() error { return ErrSecurity }

func principals(m map[string]any, side string) (Principals, error) {
	var p Principals
	v, ok := m[side]
	if !ok {
		return p, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return p, &SecurityError{side}
	}
	var err error
	if p.Names, err = stringList(o, "names"); err != nil {
		return p, &SecurityError{side}
	}
	if p.Roles, err = stringList(o, "roles"); err != nil {
		return p, &SecurityError{side}
	}
	return p, nil
}

func stringList(o map[string]any, name string) ([]string, error) {
	v, ok := o[name]
	if !ok {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, ErrSecurity
	}
	out := make([]string, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, ErrSecurity
		}
		out[i] = s
	}
	return out, nil
}
