package rights

// ReplicatorDoc is what of a _replicator doc decides whose rights a
// replication runs with: its owner, the user_ctx it asks for, and the
// credentials it carries to its endpoints. Names are exact, a repeated
// one keeps its last value (so {"owner":"a","owner":"b"} is owned by b,
// and "Owner" or "userCtx" are other members that grant nothing).
type ReplicatorDoc struct {
	Owner    string // "owner" when a string
	HasOwner bool   // "owner" present, whatever its value
	// UserCtx is "user_ctx" when it is an object: its "name" (a string)
	// and "roles" (the strings of an array; HasUserCtx without them when
	// it is another shape).
	UserCtx    *UserCtx
	HasUserCtx bool
	Source     Endpoint
	Target     Endpoint
}

// UserCtx is a replication's user_ctx.
type UserCtx struct {
	Name  string
	Roles []string
}

// Endpoint is a replication's source or target: a URL string, or an
// object with "url", "headers" (their string values, by exact member
// name) and "auth" (decoded, as Decode makes it).
type Endpoint struct {
	URL     string
	Headers map[string]string
	Auth    map[string]any
}

// ParseReplicatorDoc parses a _replicator doc's body (an object).
func ParseReplicatorDoc(b []byte) (*ReplicatorDoc, error) {
	m, err := DecodeObject(b)
	if err != nil {
		return nil, err
	}
	d := &ReplicatorDoc{}
	if v, ok := m["owner"]; ok {
		d.HasOwner = true
		d.Owner, _ = v.(string)
	}
	if v, ok := m["user_ctx"]; ok {
		d.HasUserCtx = true
		if o, ok := v.(map[string]any); ok {
			uc := &UserCtx{}
			uc.Name, _ = o["name"].(string)
			if l, ok := o["roles"].([]any); ok {
				for _, r := range l {
					if s, ok := r.(string); ok {
						uc.Roles = append(uc.Roles, s)
					}
				}
			}
			d.UserCtx = uc
		}
	}
	d.Source = endpoint(m["source"])
	d.Target = endpoint(m["target"])
	return d, nil
}

func endpoint(v any) Endpoint {
	var e Endpoint
	switch t := v.(type) {
	case string:
		e.URL = t
	case map[string]any:
		e.URL, _ = t["url"].(string)
		if h, ok := t["headers"].(map[string]any); ok {
			e.Headers = map[string]string{}
			for k, hv := range h {
				if s, ok := hv.(string); ok {
					e.Headers[k] = s
				}
			}
		}
		e.Auth, _ = t["auth"].(map[string]any)
	}
	return e
}
