package revtree

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
)

// NewRevHash is settee's deterministic rev hash, the part after "N-" of a
// new_edits=true revision: 32 lowercase hex chars of md5 over, in order, the
// deleted flag, the parent rev (pos and hash, or none), the body bytes and
// the attachment digests. Every variable-length field is length-prefixed, so
// no two different inputs share an encoding. The doc id is not an input (as
// in CouchDB), so the same edit of the same parent yields the same rev on
// every copy. Changing this encoding changes every future rev id: don't.
func NewRevHash(deleted bool, parent *Rev, body []byte, attDigests []string) string {
	h := md5.New()
	var buf [2*binary.MaxVarintLen64 + 2]byte
	b := buf[:0]
	if deleted {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	if parent == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, parent.Pos)
		b = binary.AppendUvarint(b, uint64(len(parent.Hash)))
		h.Write(b)
		h.Write([]byte(parent.Hash))
		b = buf[:0]
	}
	b = binary.AppendUvarint(b, uint64(len(body)))
	h.Write(b)
	h.Write(body)
	b = binary.AppendUvarint(buf[:0], uint64(len(attDigests)))
	h.Write(b)
	for _, d := range attDigests {
		h.Write(binary.AppendUvarint(buf[:0], uint64(len(d))))
		h.Write([]byte(d))
	}
	var sum [md5.Size]byte
	var out [2 * md5.Size]byte
	hex.Encode(out[:], h.Sum(sum[:0]))
	return string(out[:])
}
