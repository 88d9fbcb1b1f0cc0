package httpgw

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// A request for /_node/<other>/... is authenticated by the node it
// reaches and forwarded to the other node (proxyNode). CouchDB runs such a
// request on the other node by RPC as the user already authenticated;
// settee forwards it over HTTP and names that user in headers signed with
// a key derived from the cluster secret, which every member has and no
// client does. The other node believes the headers only when the
// signature over them, the method, the path and the time holds: a
// browser's cookie (made with one node's chttpd_auth/secret) or a
// password (checked against one node's admins) need not be valid there.
const (
	nodeUserHeader = "X-Settee-Node-User" // base64url of {"name","roles"}
	nodeAtHeader   = "X-Settee-Node-At"   // unix milliseconds of the signing
	nodeSigHeader  = "X-Settee-Node-Sig"  // hex HMAC-SHA256 of the above
)

// nodeSkew is how old (or early) a signed request may be.
const nodeSkew = 60 * time.Second

type nodeIdentity struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles"`
}

func nodeSignature(key []byte, at, method, path, user string) string {
	m := hmac.New(sha256.New, key)
	for _, s := range []string{at, method, path, user} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// signForNode replaces whatever identity headers out carries with u's,
// signed; with no key or no user it only removes them.
func signForNode(key []byte, out *http.Request, u *User, now time.Time) {
	out.Header.Del(nodeUserHeader)
	out.Header.Del(nodeAtHeader)
	out.Header.Del(nodeSigHeader)
	if len(key) == 0 || u == nil {
		return
	}
	b, _ := json.Marshal(nodeIdentity{Name: u.Name, Roles: u.Roles})
	user := base64.RawURLEncoding.EncodeToString(b)
	at := strconv.FormatInt(now.UnixMilli(), 10)
	out.Header.Set(nodeUserHeader, user)
	out.Header.Set(nodeAtHeader, at)
	out.Header.Set(nodeSigHeader, nodeSignature(key, at, out.Method, out.URL.EscapedPath(), user))
}

// nodeUser is the user another member forwarded r as; nil when r names
// none or its signature, time or encoding does not hold (then the
// request's own credentials decide, as for any client).
func nodeUser(key []byte, r *http.Request, now time.Time) *User {
	user, at, sig := r.Header.Get(nodeUserHeader), r.Header.Get(nodeAtHeader), r.Header.Get(nodeSigHeader)
	if len(key) == 0 || user == "" || sig == "" {
		return nil
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil
	}
	if d := now.Sub(time.UnixMilli(ms)); d > nodeSkew || d < -nodeSkew {
		return nil
	}
	want := nodeSignature(key, at, r.Method, r.URL.EscapedPath(), user)
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(user)
	if err != nil {
		return nil
	}
	var id nodeIdentity
	if json.Unmarshal(b, &id) != nil || id.Name == "" {
		return nil
	}
	if id.Roles == nil {
		id.Roles = []string{}
	}
	return &User{Name: id.Name, Roles: id.Roles, Admin: slices.Contains(id.Roles, "_admin"), Handler: "node"}
}
