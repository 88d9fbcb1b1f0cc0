package couchdoc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// InlineAtt is an attachment whose data a document carries inline, as
// base64: B64 is the data as it is in the document (not copied).
type InlineAtt struct {
	Name        string
	ContentType string
	B64         []byte
	Len         int    // decoded length
	Encoding    string // the data's encoding in the replicator's encoded form, else ""
}

// FollowsDoc is a document with inline attachment data turned into CouchDB's
// multipart/related form: JSON whose data entries became "follows" stubs,
// and the attachments to send after it, in the order of those stubs.
type FollowsDoc struct {
	ID      string
	JSON    []byte
	Atts    []InlineAtt
	DataLen int // total decoded bytes of Atts
}

// InlineToFollows rewrites a document as a replicator fetched it (_bulk_get
// with attachments=true: inline base64 data) for a multipart/related PUT.
// The data is not decoded or copied: Atts point into doc. ok is false when
// the document has no inline data or is not in the plain form every
// CouchDB-compatible server writes (escaped base64, a missing _id, ...);
// such a document is sent as JSON instead. The digests of identity inline
// entries are dropped: they are of the source's stored bytes, which may be
// compressed, while the parts carry the identity data. An entry in the
// replicator's encoded form (Options.EncodedData: "encoding", "digest"
// and "length" beside the data) keeps them: its part is the stored bytes.
func InlineToFollows(doc []byte) (*FollowsDoc, bool) {
	var fd FollowsDoc
	attsStart, attsEnd := -1, -1
	var newAtts []byte
	ok := WalkObject(doc, 0, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case `"_id"`:
			return json.Unmarshal(doc[vs:ve], &fd.ID) == nil && fd.ID != ""
		case `"_attachments"`:
			attsStart, attsEnd = vs, ve
			var ok bool
			newAtts, ok = fd.rewriteAtts(doc, vs)
			return ok
		}
		return true
	})
	if !ok || fd.ID == "" || attsStart < 0 || len(fd.Atts) == 0 {
		return nil, false
	}
	out := make([]byte, 0, attsStart+len(newAtts)+len(doc)-attsEnd)
	out = append(out, doc[:attsStart]...)
	out = append(out, newAtts...)
	fd.JSON = append(out, doc[attsEnd:]...)
	return &fd, true
}

// rewriteAtts renders the _attachments object at i with inline data as
// follows stubs, recording the data.
func (fd *FollowsDoc) rewriteAtts(doc []byte, i int) ([]byte, bool) {
	out := []byte{'{'}
	first := true
	ok := WalkObject(doc, i, func(name []byte, vs, ve int) bool {
		var att InlineAtt
		if json.Unmarshal(name, &att.Name) != nil {
			return false
		}
		var kept, encoding, digest, length []byte
		hasData := false
		ok := WalkObject(doc, vs, func(key []byte, avs, ave int) bool {
			switch string(key) {
			case `"data"`:
				b64, n, ok := plainBase64(doc[avs:ave])
				att.B64, att.Len, hasData = b64, n, ok
				return ok
			case `"content_type"`:
				if json.Unmarshal(doc[avs:ave], &att.ContentType) != nil {
					return false
				}
			case `"encoding"`:
				encoding = doc[avs:ave]
				return true
			case `"digest"`:
				digest = doc[avs:ave]
				return true
			case `"length"`:
				length = doc[avs:ave]
				return true
			case `"follows"`, `"stub"`, `"encoded_length"`:
				return true // replaced below (or about other bytes)
			}
			if len(kept) > 0 {
				kept = append(kept, ',')
			}
			kept = append(kept, key...)
			kept = append(kept, ':')
			kept = append(kept, doc[avs:ave]...)
			return true
		})
		if !ok {
			return false
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, name...)
		out = append(out, ':')
		if !hasData {
			out = append(out, doc[vs:ve]...) // a stub, as it was
			return true
		}
		out = append(out, '{')
		out = append(out, kept...)
		if len(kept) > 0 {
			out = append(out, ',')
		}
		if encoding != nil && digest != nil && length != nil {
			// the replicator's encoded form (Options.EncodedData): the
			// part is the stored bytes, which keep their digest
			out = append(out, `"digest":`...)
			out = append(out, digest...)
			out = append(out, `,"length":`...)
			out = append(out, length...)
			out = append(out, `,"encoding":`...)
			out = append(out, encoding...)
			out = append(out, `,"encoded_length":`...)
			out = strconv.AppendInt(out, int64(att.Len), 10)
			out = append(out, `,"follows":true}`...)
			if json.Unmarshal(encoding, &att.Encoding) != nil {
				return false
			}
		} else {
			out = append(out, `"length":`...)
			out = strconv.AppendInt(out, int64(att.Len), 10)
			out = append(out, `,"follows":true}`...)
		}
		fd.Atts = append(fd.Atts, att)
		fd.DataLen += att.Len
		return true
	})
	if !ok {
		return nil, false
	}
	return append(out, '}'), true
}

// b64Alphabet marks the bytes of standard base64 (without padding).
var b64Alphabet = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = true
	}
	return t
}()

// plainBase64 checks that a JSON string token is padded standard base64
// without escapes or line breaks (what CouchDB, PouchDB and settee send)
// and returns its content and decoded length.
func plainBase64(tok []byte) ([]byte, int, bool) {
	if len(tok) < 2 || tok[0] != '"' {
		return nil, 0, false
	}
	b := tok[1 : len(tok)-1]
	if len(b)%4 != 0 {
		return nil, 0, false
	}
	pad := 0
	if len(b) > 0 && b[len(b)-1] == '=' {
		pad++
		if b[len(b)-2] == '=' {
			pad++
		}
	}
	for _, c := range b[:len(b)-pad] {
		if !b64Alphabet[c] {
			return nil, 0, false
		}
	}
	return b, len(b)/4*3 - pad, true
}

// Base64Reader decodes padded standard base64 (as plainBase64 accepts it)
// straight from src into the reader's buffer: no filtering pass, no
// intermediate copy.
type Base64Reader struct {
	src      []byte
	q        [3]byte // a decoded quantum p had no room for
	qn, qoff int
}

// NewBase64Reader reads the data src encodes.
func NewBase64Reader(src []byte) *Base64Reader { return &Base64Reader{src: src} }

func (r *Base64Reader) Read(p []byte) (int, error) {
	if r.qoff < r.qn {
		n := copy(p, r.q[r.qoff:r.qn])
		r.qoff += n
		return n, nil
	}
	if len(r.src) == 0 {
		return 0, io.EOF
	}
	if len(p) < 3 {
		n, err := base64.StdEncoding.Decode(r.q[:], r.src[:min(4, len(r.src))])
		if err != nil {
			return 0, err
		}
		r.src = r.src[min(4, len(r.src)):]
		r.qn = n
		r.qoff = copy(p, r.q[:n])
		return r.qoff, nil
	}
	k := min(len(p)/3*4, len(r.src))
	n, err := base64.StdEncoding.Decode(p, r.src[:k])
	r.src = r.src[k:]
	return n, err
}

// WalkObject calls f with the raw key token (quotes and escapes
// included) and the span of the value of each member of the JSON object
// at b[i] (after white space); it reports false when f does or the object
// is malformed. It is docjson.Object with each value delimited by
// docjson.SkipValue: strings cost a memchr, scalars are delimited, not
// validated.
func WalkObject(b []byte, i int, f func(key []byte, vs, ve int) bool) bool {
	return docjson.Object(b, i, func(key []byte, vs int) int {
		ve := docjson.SkipValue(b, vs)
		if ve < 0 || !f(key, vs, ve) {
			return -1
		}
		return ve
	}) >= 0
}

// WalkArray calls f with the span of each element of the JSON array at
// b[i] (after white space), as WalkObject does for objects.
func WalkArray(b []byte, i int, f func(vs, ve int) bool) bool {
	return docjson.Array(b, i, func(vs int) int {
		ve := docjson.SkipValue(b, vs)
		if ve < 0 || !f(vs, ve) {
			return -1
		}
		return ve
	}) >= 0
}

// Encoded reports whether some part is in the replicator's encoded form.
func (fd *FollowsDoc) Encoded() bool {
	for _, a := range fd.Atts {
		if a.Encoding != "" {
			return true
		}
	}
	return false
}

// IdentityInline turns the replicator's encoded inline entries of doc
// (Options.EncodedData) back into identity data, for a target that takes
// no multipart/related PUT: inline data in JSON is always identity there.
// Docs without such entries are returned as they are.
func IdentityInline(doc []byte) ([]byte, error) {
	if !bytes.Contains(doc, []byte(`"encoded_length":`)) {
		return doc, nil
	}
	attsStart, attsEnd := -1, -1
	WalkObject(doc, 0, func(key []byte, vs, ve int) bool {
		if string(key) == `"_attachments"` {
			attsStart, attsEnd = vs, ve
		}
		return true
	})
	if attsStart < 0 {
		return doc, nil
	}
	var atts []struct {
		name string
		raw  []byte
	}
	var bad error
	WalkObject(doc, attsStart, func(name []byte, vs, ve int) bool {
		var a map[string]json.RawMessage
		if err := json.Unmarshal(doc[vs:ve], &a); err != nil {
			bad = err
			return false
		}
		raw := doc[vs:ve]
		if enc, ok := a["encoding"]; ok && a["data"] != nil {
			var s, e string
			if err := json.Unmarshal(a["data"], &s); err != nil {
				bad = err
				return false
			}
			_ = json.Unmarshal(enc, &e)
			data, err := base64.StdEncoding.DecodeString(s)
			if err == nil {
				data, err = Identity(&pb.AttMeta{Encoding: e}, data)
			}
			if err != nil {
				bad = fmt.Errorf("couchdoc: attachment %s: %w", name, err)
				return false
			}
			for _, k := range []string{"encoding", "encoded_length", "digest", "length"} {
				delete(a, k)
			}
			a["data"], _ = json.Marshal(base64.StdEncoding.EncodeToString(data))
			raw, _ = json.Marshal(a)
		}
		atts = append(atts, struct {
			name string
			raw  []byte
		}{string(name), raw})
		return true
	})
	if bad != nil {
		return nil, bad
	}
	out := append([]byte(nil), doc[:attsStart]...)
	out = append(out, '{')
	for i, a := range atts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, a.name...)
		out = append(out, ':')
		out = append(out, a.raw...)
	}
	out = append(out, '}')
	return append(out, doc[attsEnd:]...), nil
}
