package auth

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/settee/settee/rights"
)

// The _users database's rules, as CouchDB 3.5 applies them to every write
// (couch_users_db's before-update step and the validate_doc_update
// function of _users/_design/_auth). settee runs them here, in Go: the
// rules are fixed, and a write to _users must not wait for a JavaScript VM.

// UserDocPrefix starts every user doc's id: org.couchdb.user:NAME.
const UserDocPrefix = "org.couchdb.user:"

// ErrForbidden is a write the rules refuse (HTTP 403, "forbidden", with the
// rule's reason).
var ErrForbidden = errors.New("forbidden")

// RuleError is a refused write: its Reason is CouchDB's text.
type RuleError struct{ Reason string }

func (e *RuleError) Error() string { return "forbidden: " + e.Reason }
func (e *RuleError) Unwrap() error { return ErrForbidden }

func forbid(reason string) error { return &RuleError{Reason: reason} }

// DocName is the user name a _users doc id names; false for any other id
// (design and local docs, and ids without the prefix).
func DocName(id string) (string, bool) { return strings.CutPrefix(id, UserDocPrefix) }

// Writer is who writes: its name and roles, and whether it is a server or
// database admin of _users.
type Writer struct {
	Name  string
	Roles []string
	Admin bool
}

// ValidateUserDoc checks a write of newDoc over oldDoc (nil: the doc is
// new) in _users, as _design/_auth's validate_doc_update does; newDoc has
// its password hashed already. deleted is the write's _deleted. Both docs
// are read by package rights, which the login reads them with too: the
// roles checked here (rights.UserDoc.Roles) are the roles a login grants.
func ValidateUserDoc(id string, newDoc, oldDoc *rights.UserDoc, deleted bool, w Writer) error {
	oldName, _ := oldDoc.String("name")
	if deleted {
		if w.Admin || slices.Contains(w.Roles, "_admin") || (oldDoc != nil && w.Name == oldName) {
			return nil
		}
		return forbid("Only admins may delete other user docs.")
	}
	if t, _ := newDoc.String("type"); t != "user" {
		return forbid("doc.type must be user")
	}
	name, isString := newDoc.String("name")
	if !rights.Truthy(newDoc.Value("name")) {
		return forbid("doc.name is required")
	}
	if !isString {
		// JavaScript would fail on the string methods below
		return forbid("doc.name must be a string")
	}
	roles, err := newDoc.Roles()
	if err != nil {
		return forbid(err.Error())
	}
	if id != UserDocPrefix+name {
		return forbid("Doc ID must be of the form org.couchdb.user:name")
	}
	if oldDoc != nil && oldName != name {
		return forbid("Usernames can not be changed.")
	}
	if rights.Truthy(newDoc.Value("password_sha")) && !rights.Truthy(newDoc.Value("salt")) {
		return forbid("Users with password_sha must have a salt.See /_utils/script/couch.js for example code.")
	}
	if v, ok := newDoc.Get("password_scheme"); ok && rights.Truthy(v) {
		s, _ := v.(string)
		if s != "simple" && s != "pbkdf2" && s != "simple+pbkdf2" {
			return forbid("Password scheme `" + jsString(v) + "` not supported.")
		}
	}
	if s, _ := newDoc.String("password_scheme"); s == "pbkdf2" {
		if _, ok := newDoc.Value("iterations").(float64); !ok {
			return forbid("iterations must be a number.")
		}
		if _, ok := newDoc.String("derived_key"); !ok {
			return forbid("derived_key must be a string.")
		}
	}
	if !w.Admin && !slices.Contains(w.Roles, "_admin") {
		if oldDoc != nil {
			if w.Name != name {
				return forbid("You may only update your own user document.")
			}
			// the old doc passed these rules when it was written; one
			// that did not (roles not a list) has no roles to keep
			old, _ := oldDoc.Roles()
			slices.Sort(old)
			nr := slices.Sorted(slices.Values(roles))
			if !slices.Equal(old, nr) {
				return forbid("Only _admin may edit roles")
			}
		} else if len(roles) > 0 {
			return forbid("Only _admin may set roles")
		}
	}
	for _, r := range roles {
		if r != "_metrics" && strings.HasPrefix(r, "_") {
			return forbid("No system roles (starting with underscore) in users db.")
		}
	}
	if strings.HasPrefix(name, "_") {
		return forbid("Username may not start with underscore.")
	}
	if strings.Contains(name, ":") {
		return forbid("Character `:` is not allowed in usernames.")
	}
	return nil
}

// jsString is a value as JavaScript's string concatenation shows it.
func jsString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
