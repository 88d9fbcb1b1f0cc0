package coordinator

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
)

// ErrBadSeq is returned for a since value that is not a sequence this
// database gave out.
var ErrBadSeq = errors.New("coordinator: malformed sequence")

const seqVersion = 1

// EncodeSeq packs per-range sequences into CouchDB's opaque clustered form,
// "<sum>-<base64url payload>". Clients must treat it as opaque; the sum
// prefix only makes it readable.
func EncodeSeq(ranges []Range, seqs []uint64) string {
	var sum uint64
	buf := make([]byte, 1, 1+len(ranges)*10)
	buf[0] = seqVersion
	for i, r := range ranges {
		buf = binary.AppendUvarint(buf, uint64(r.Begin))
		buf = binary.AppendUvarint(buf, seqs[i])
		sum += seqs[i]
	}
	return strconv.FormatUint(sum, 10) + "-" + base64.RawURLEncoding.EncodeToString(buf)
}

// DecodeSeq unpacks since into per-range sequences. "0", "" and plain 0
// mean the beginning; a plain integer is accepted for q=1 databases.
func DecodeSeq(ranges []Range, since string) ([]uint64, error) {
	out := make([]uint64, len(ranges))
	if since == "" || since == "0" {
		return out, nil
	}
	i := strings.IndexByte(since, '-')
	if i < 0 {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return nil, ErrBadSeq
		}
		if len(ranges) == 1 {
			out[0] = n
		}
		return out, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(since[i+1:])
	if err != nil || len(b) == 0 || b[0] != seqVersion {
		return nil, ErrBadSeq
	}
	b = b[1:]
	if len(b) == 0 {
		return nil, ErrBadSeq
	}
	for len(b) > 0 {
		begin, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, ErrBadSeq
		}
		b = b[n:]
		s, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, ErrBadSeq
		}
		b = b[n:]
		for j, r := range ranges {
			if uint64(r.Begin) == begin {
				out[j] = s
			}
		}
	}
	return out, nil
}
