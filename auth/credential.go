// Package auth holds what settee knows of CouchDB credentials, apart from
// any transport: passwords stored as PBKDF2-SHA256 hashes in the shape of a
// _users doc (and of the node's server admin). The HTTP layer checks them;
// node stores the admin's.
package auth

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// DefaultIterations is CouchDB 3.4+'s PBKDF2 iteration count.
const DefaultIterations = 600000

// Credential is a stored password: PBKDF2-SHA256, as CouchDB's _users docs.
type Credential struct {
	Name       string   `json:"name"`
	Roles      []string `json:"roles,omitempty"`
	Scheme     string   `json:"password_scheme"`
	PRF        string   `json:"pbkdf2_prf"`
	Salt       string   `json:"salt"`
	Iterations int      `json:"iterations"`
	DerivedKey string   `json:"derived_key"`
}

// NewCredential hashes a password with a fresh salt.
func NewCredential(name, password string, iterations int) *Credential {
	var salt [16]byte
	_, _ = rand.Read(salt[:])
	c := &Credential{Name: name, Scheme: "pbkdf2", PRF: "sha256", Salt: hex.EncodeToString(salt[:]), Iterations: iterations}
	c.DerivedKey = hex.EncodeToString(c.derive(password))
	return c
}

func (c *Credential) derive(password string) []byte {
	if c.PRF == "sha1" || c.PRF == "sha" {
		// CouchDB's older -pbkdf2- admin hashes: PBKDF2-SHA-1, 20 bytes
		k, _ := pbkdf2.Key(sha1.New, password, []byte(c.Salt), c.Iterations, sha1.Size)
		return k
	}
	k, _ := pbkdf2.Key(sha256.New, password, []byte(c.Salt), c.Iterations, 32)
	return k
}

// Verify checks a password against the stored hash.
func (c *Credential) Verify(password string) bool {
	if c.Scheme != "pbkdf2" || c.Iterations <= 0 {
		return false
	}
	want, err := hex.DecodeString(c.DerivedKey)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(c.derive(password), want) == 1
}
