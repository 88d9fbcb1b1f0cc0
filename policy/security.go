package policy

import (
	"github.com/settee/settee/rights"
)

// ParseSecurity reads a stored _security object through package rights:
// exact member names (never a Go struct, whose fields match without
// case), a repeated member's last value, as CouchDB decodes it. An empty
// or absent object names nobody: the database is open to all and only
// server admins administer it.
func ParseSecurity(raw []byte) (*Security, error) {
	if len(raw) == 0 {
		return &Security{Raw: []byte("{}")}, nil
	}
	rs, err := rights.ParseSecurity(raw)
	if err != nil {
		return nil, err
	}
	return &Security{Raw: raw,
		Admins:  Group{Names: rs.Admins.Names, Roles: rs.Admins.Roles},
		Members: Group{Names: rs.Members.Names, Roles: rs.Members.Roles}}, nil
}
