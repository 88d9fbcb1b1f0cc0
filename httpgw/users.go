package httpgw

import (
	"encoding/json"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/docjson"
)

// prepareUserDoc hashes a plain "password" in a _users doc, as CouchDB's
// _users database does before storing it.
func (g *Gateway) prepareUserDoc(d *docjson.Doc) (*docjson.Doc, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Body, &m); err != nil {
		return nil, errInvalidJSON
	}
	raw, ok := m["password"]
	if !ok {
		return d, nil
	}
	var pw string
	if err := json.Unmarshal(raw, &pw); err != nil {
		return nil, newErr(400, "doc_validation", "password must be a string")
	}
	delete(m, "password")
	var name string
	_ = json.Unmarshal(m["name"], &name)
	cred := auth.NewCredential(name, pw, auth.DefaultIterations)
	for k, v := range map[string]any{"password_scheme": cred.Scheme, "pbkdf2_prf": cred.PRF,
		"salt": cred.Salt, "iterations": cred.Iterations, "derived_key": cred.DerivedKey} {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := *d
	out.Body = body
	return &out, nil
}
