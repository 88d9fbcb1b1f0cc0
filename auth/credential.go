// Package auth holds what settee knows of CouchDB credentials, apart from
// any transport: passwords stored as PBKDF2-SHA256 hashes in the shape of a
// _users doc (and of the node's server admin). The HTTP layer checks them;
// node stores the admin's.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"sync/atomic"
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
	// IterationsNotInteger: the stored "iterations" is no JSON integer
	// (1.5, 1e11, 600000.0). CouchDB's login has no clause for it and
	// answers 500; no hash is computed.
	IterationsNotInteger bool `json:"-"`
}

// NewCredential hashes a password with a fresh salt.
func NewCredential(name, password string, iterations int) *Credential {
	var salt [16]byte
	_, _ = rand.Read(salt[:])
	c := &Credential{Name: name, Scheme: "pbkdf2", PRF: "sha256", Salt: hex.EncodeToString(salt[:]), Iterations: iterations}
	c.DerivedKey = hex.EncodeToString(c.derive(context.Background(), password))
	return c
}

func (c *Credential) derive(ctx context.Context, password string) []byte {
	if c.PRF == "sha1" || c.PRF == "sha" {
		// CouchDB's older -pbkdf2- admin hashes: PBKDF2-SHA-1, 20 bytes
		return Key(ctx, sha1.New, password, c.Salt, c.Iterations, sha1.Size)
	}
	return Key(ctx, sha256.New, password, c.Salt, c.Iterations, sha256.Size)
}

// Verify checks a password against the stored hash. It computes the whole
// hash whatever its iteration count: logins use VerifyContext, after
// CheckIterations.
func (c *Credential) Verify(password string) bool {
	ok, _ := c.VerifyContext(context.Background(), password)
	return ok
}

// VerifyContext checks a password against the stored hash, and stops
// computing it when ctx ends (the login's client has gone): then it
// answers ctx's error.
func (c *Credential) VerifyContext(ctx context.Context, password string) (bool, error) {
	if c.Scheme != "pbkdf2" || c.Iterations <= 0 || c.IterationsNotInteger {
		return false, nil
	}
	want, err := hex.DecodeString(c.DerivedKey)
	if err != nil {
		return false, nil
	}
	got := c.derive(ctx, password)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// CheckEvery is how many PBKDF2 iterations Key runs between two looks at
// its context: about a millisecond and a half of SHA-256 here, and a
// look costs a few nanoseconds (BenchmarkKey: under 0.1%).
const CheckEvery = 4096

// iterationsDone counts the PBKDF2 iterations this process has computed,
// by CheckEvery (tests watch an abandoned login stop).
var iterationsDone atomic.Int64

// IterationsDone is the number of PBKDF2 iterations computed by this
// process so far, counted when Key looks at its context and when it ends.
func IterationsDone() int64 { return iterationsDone.Load() }

// Key is PBKDF2 (RFC 8018) with HMAC over h, as crypto/pbkdf2.Key, that
// looks at ctx every CheckEvery iterations and gives up when it has ended
// (its answer is then of no use: the caller checks ctx.Err()). iter < 1
// computes one iteration.
func Key[H hash.Hash](ctx context.Context, h func() H, password, salt string, iter, keyLen int) []byte {
	prf := hmac.New(func() hash.Hash { return h() }, []byte(password))
	size := prf.Size()
	blocks := (keyLen + size - 1) / size
	dk := make([]byte, 0, blocks*size)
	u := make([]byte, size)
	var n [4]byte
	done := ctx.Done()
	for block := 1; block <= blocks; block++ {
		prf.Reset()
		prf.Write([]byte(salt))
		binary.BigEndian.PutUint32(n[:], uint32(block))
		prf.Write(n[:])
		dk = prf.Sum(dk)
		t := dk[len(dk)-size:]
		copy(u, t)
		for i := 2; i <= iter; i++ {
			if i%CheckEvery == 0 {
				iterationsDone.Add(CheckEvery)
				select {
				case <-done:
					return dk[:keyLen]
				default:
				}
			}
			prf.Reset()
			prf.Write(u)
			u = prf.Sum(u[:0])
			for x := range u {
				t[x] ^= u[x]
			}
		}
		iterationsDone.Add(int64(max(iter, 1) % CheckEvery))
	}
	return dk[:keyLen]
}

// CouchDB 3.5's bounds of a stored hash's iteration count at login
// ([chttpd_auth] min_iterations, max_iterations).
const (
	DefaultMinIterations = 1
	DefaultMaxIterations = 1000000000
)

// The answers of CheckIterations: CouchDB's 403 forbidden reasons.
var (
	//lint:ignore ST1005 CouchDB's reason, answered as it is
	ErrIterationsTooLow = errors.New("Iteration count is too low for this server")
	//lint:ignore ST1005 CouchDB's reason, answered as it is
	ErrIterationsTooHigh = errors.New("Iteration count is too high for this server")
)

// CheckIterations is CouchDB's verify_iterations: a stored hash whose
// iteration count is below lo (min_iterations) or above hi
// (max_iterations) is not computed at all.
func CheckIterations(n, lo, hi int) error {
	if n < lo {
		return ErrIterationsTooLow
	}
	if n > hi {
		return ErrIterationsTooHigh
	}
	return nil
}
