package rights

import (
	"strconv"
	"strings"
)

// AdminHashPrefix is how CouchDB 3.5 writes a server admin's
// PBKDF2-SHA256 hash in _config's admins section:
// -pbkdf2:sha256-<derived key>,<salt>,<iterations>.
const AdminHashPrefix = "-pbkdf2:sha256-"

// ParseConfigAdmin reads a server admin's value from _config's admins
// section: CouchDB's -pbkdf2:sha256- hash, or its older -pbkdf2- one of
// PBKDF2-SHA-1. false for anything else (a plain password to hash, a
// -hashed- SHA-1 one, or a malformed hash). The name is the section's key
// itself, exact: "Admin" and "admin" are two admins.
func ParseConfigAdmin(name, v string) (Credential, bool) {
	prf, rest := "sha256", ""
	switch {
	case strings.HasPrefix(v, AdminHashPrefix):
		rest = v[len(AdminHashPrefix):]
	case strings.HasPrefix(v, "-pbkdf2-"):
		prf, rest = "sha1", v[len("-pbkdf2-"):]
	default:
		return Credential{}, false
	}
	parts := strings.Split(rest, ",")
	if len(parts) != 3 {
		return Credential{}, false
	}
	it, err := strconv.Atoi(parts[2])
	if err != nil || it <= 0 {
		return Credential{}, false
	}
	return Credential{Name: name, Scheme: "pbkdf2", PRF: prf, DerivedKey: parts[0], Salt: parts[1], Iterations: it}, true
}
