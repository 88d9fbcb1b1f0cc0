package policy

import (
	"encoding/json"
)

// ParseSecurity reads a stored _security object: exact member names (a
// map, never a struct, whose fields Go matches without case), the last of
// duplicate members winning as in CouchDB's decoding. An empty or absent
// object grants nothing to anyone but admins and leaves the database open.
func ParseSecurity(raw []byte) (*Security, error) {
	sec := &Security{Raw: raw}
	if len(raw) == 0 {
		sec.Raw = []byte("{}")
		return sec, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, errNoSecurityParsed
	}
	sec.Admins = parseGroup(top["admins"])
	sec.Members = parseGroup(top["members"])
	return sec, nil
}

func parseGroup(raw json.RawMessage) Group {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return Group{}
	}
	return Group{Names: stringList(m["names"]), Roles: stringList(m["roles"])}
}

// stringList is a JSON array's string members (others are skipped).
func stringList(raw json.RawMessage) []string {
	var l []any
	if json.Unmarshal(raw, &l) != nil {
		return nil
	}
	var out []string
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
