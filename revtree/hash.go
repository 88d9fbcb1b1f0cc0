package revtree

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/settee/settee/etf"
	pb "github.com/settee/settee/proto"
)

// NewRevHash is the part after "N-" of a new_edits=true revision, as
// CouchDB computes it (couch_db:new_revid): the md5 of
//
//	term_to_binary([Deleted, OldStart, OldRev, Body, Atts], [{minor_version, 1}])
//
// where OldStart and OldRev are the parent's position and hash (0 and 0
// for a new doc; a 32-hex-digit hash as its 16 bytes, any other as its
// text), Body is the body as jiffy decodes it (no _id, _rev or other
// special member) and Atts is {Name, ContentType, Md5} of each
// attachment, last first (CouchDB folds its list of them into a new
// one). So the same edit gets the same revision on settee and on
// CouchDB, and replication between them finds nothing to do. The doc id
// is not an input: the same edit of the same parent yields the same rev
// on every copy.
//
// The digest is of the stored bytes: for an attachment of a
// compressible type those are CouchDB's zlib output, which settee makes
// byte for byte too (cdeflate), so such a doc's revs are CouchDB's.
func NewRevHash(deleted bool, parent *Rev, body []byte, atts []*pb.AttMeta) string {
	tb := termBufs.Get().(*termBuf)
	defer termBufs.Put(tb)
	b := append(tb.b[:0], etf.Version)
	b = etf.AppendList(b, 5)
	b = etf.AppendBool(b, deleted)
	if parent == nil {
		b = etf.AppendInt(b, 0)
		b = etf.AppendInt(b, 0)
	} else {
		b = etf.AppendInt(b, int64(parent.Pos))
		b = appendRevID(b, parent.Hash)
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	if out, err := tb.enc.AppendJSON(b, body); err == nil {
		b = out
	} else {
		// a stored body is JSON settee accepted: this does not happen,
		// but a write must not fail for it, and the rev must stay
		// deterministic
		b = etf.AppendBinary(b, body)
	}
	if len(atts) == 0 {
		b = etf.AppendNil(b)
	} else {
		b = etf.AppendList(b, len(atts))
		for i := len(atts) - 1; i >= 0; i-- {
			a := atts[i]
			b = etf.AppendTuple(b, 3)
			b = etf.AppendBinaryString(b, a.Name)
			b = etf.AppendBinaryString(b, a.ContentType)
			b = appendMD5(b, a.Digest)
		}
		b = etf.AppendNil(b)
	}
	b = etf.AppendNil(b)
	tb.b = b
	sum := md5.Sum(b)
	var out [32]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// termBufs keeps the buffers terms are written into: a body's term is
// about as long as the body, and a bulk write hashes many.
var termBufs = sync.Pool{New: func() any { return &termBuf{b: make([]byte, 0, 4096)} }}

type termBuf struct {
	b   []byte
	enc etf.Encoder
}

// appendRevID appends a rev hash as couch_doc:parse_revid reads it: 32
// hex digits are the 16 bytes they spell, anything else its text.
func appendRevID(b []byte, h string) []byte {
	if len(h) == 32 {
		var src [32]byte // a copy on the stack: []byte(h) would allocate
		var raw [16]byte
		copy(src[:], h)
		if _, err := hex.Decode(raw[:], src[:]); err == nil {
			return etf.AppendBinary(b, raw[:])
		}
	}
	return etf.AppendBinaryString(b, h)
}

// appendMD5 appends an attachment's md5 from its "md5-<base64>" digest.
func appendMD5(b []byte, digest string) []byte {
	if s, ok := strings.CutPrefix(digest, "md5-"); ok {
		var raw [18]byte // DecodedLen of 24 chars
		if n, err := base64.StdEncoding.Decode(raw[:], []byte(s)); err == nil && n == 16 {
			return etf.AppendBinary(b, raw[:n])
		}
	}
	return etf.AppendBinaryString(b, digest)
}
