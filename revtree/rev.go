package revtree

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrBadRev is wrapped by every error ParseRev and ParseRevID return.
var ErrBadRev = errors.New("revtree: invalid rev format")

// Rev is a revision id "Pos-Hash".
type Rev struct {
	Pos  uint64
	Hash string
}

// ParseRev parses "N-hash" the way couch_doc:parse_rev does: N is everything
// before the first '-' and must be a decimal integer (leading zeros allowed,
// no sign, > 0); hash is everything after it (it may itself contain '-') and
// must be non-empty. A 32-char hash must be hex, as CouchDB stores those as 16
// raw bytes; uppercase hex is folded to lowercase, so "1-ABC…" and "1-abc…"
// are the same rev, as in CouchDB.
func ParseRev(s string) (Rev, error) {
	dash := strings.IndexByte(s, '-')
	if dash <= 0 {
		return Rev{}, fmt.Errorf("%w: %q", ErrBadRev, s)
	}
	var pos uint64
	for i := 0; i < dash; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return Rev{}, fmt.Errorf("%w: %q", ErrBadRev, s)
		}
		d := uint64(c - '0')
		if pos > (math.MaxUint64-d)/10 {
			return Rev{}, fmt.Errorf("%w: %q", ErrBadRev, s)
		}
		pos = pos*10 + d
	}
	if pos == 0 {
		return Rev{}, fmt.Errorf("%w: %q", ErrBadRev, s)
	}
	h, ok := normHash(s[dash+1:])
	if !ok {
		return Rev{}, fmt.Errorf("%w: %q", ErrBadRev, s)
	}
	return Rev{Pos: pos, Hash: h}, nil
}

// ParseRevID checks and normalises one hash of a _revisions "ids" list with
// ParseRev's rules for the part after "N-".
func ParseRevID(id string) (string, error) {
	h, ok := normHash(id)
	if !ok {
		return "", fmt.Errorf("%w: rev id %q", ErrBadRev, id)
	}
	return h, nil
}

// normHash validates a hash and lowercases a 32-char hex hash; it allocates
// only when the input holds uppercase hex. An empty hash is one: CouchDB's
// parse_rev takes "1-" and a replication can store it.
func normHash(h string) (string, bool) {
	if len(h) != 32 {
		return h, true
	}
	upper := false
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			upper = true
		default:
			return "", false
		}
	}
	if upper {
		h = strings.ToLower(h)
	}
	return h, true
}

// String returns "Pos-Hash".
func (r Rev) String() string {
	var sb strings.Builder
	sb.Grow(21 + len(r.Hash))
	var buf [20]byte
	sb.Write(strconv.AppendUint(buf[:0], r.Pos, 10))
	sb.WriteByte('-')
	sb.WriteString(r.Hash)
	return sb.String()
}

// AppendTo appends "Pos-Hash" to dst (no allocation when dst has room).
func (r Rev) AppendTo(dst []byte) []byte {
	dst = strconv.AppendUint(dst, r.Pos, 10)
	dst = append(dst, '-')
	return append(dst, r.Hash...)
}

// equalsString reports whether s is r.String(), without allocating.
func (r Rev) equalsString(s string) bool {
	var buf [20]byte
	p := strconv.AppendUint(buf[:0], r.Pos, 10)
	n := len(p)
	return len(s) == n+1+len(r.Hash) && s[:n] == string(p) && s[n] == '-' && s[n+1:] == r.Hash
}
