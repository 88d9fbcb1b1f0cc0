package couchdoc

import (
	"encoding/json"
	"strconv"
)

// InlineAtt is an attachment whose data a document carries inline, as
// base64: B64 is the data as it is in the document (not copied).
type InlineAtt struct {
	Name        string
	ContentType string
	B64         []byte
	Len         int // decoded length
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
// such a document is sent as JSON instead. The digests of the inline
// entries are dropped: they are of the source's stored bytes, which may be
// compressed, while the parts carry the identity data.
func InlineToFollows(doc []byte) (*FollowsDoc, bool) {
	var fd FollowsDoc
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	attsStart, attsEnd := -1, -1
	var newAtts []byte
	ok := members(doc, i, func(ks, ke, vs, ve int) bool {
		switch string(doc[ks:ke]) {
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
	if doc[i] != '{' {
		return nil, false
	}
	out := []byte{'{'}
	first := true
	ok := members(doc, i, func(ks, ke, vs, ve int) bool {
		if doc[vs] != '{' {
			return false
		}
		var att InlineAtt
		if json.Unmarshal(doc[ks:ke], &att.Name) != nil {
			return false
		}
		var kept []byte
		hasData := false
		ok := members(doc, vs, func(aks, ake, avs, ave int) bool {
			switch string(doc[aks:ake]) {
			case `"data"`:
				b64, n, ok := plainBase64(doc[avs:ave])
				att.B64, att.Len, hasData = b64, n, ok
				return ok
			case `"content_type"`:
				if json.Unmarshal(doc[avs:ave], &att.ContentType) != nil {
					return false
				}
			case `"digest"`, `"length"`, `"follows"`, `"stub"`, `"encoding"`, `"encoded_length"`:
				return true // replaced below (or about other bytes)
			}
			if len(kept) > 0 {
				kept = append(kept, ',')
			}
			kept = append(kept, doc[aks:ake]...)
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
		out = append(out, doc[ks:ke]...)
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
		out = append(out, `"length":`...)
		out = strconv.AppendInt(out, int64(att.Len), 10)
		out = append(out, `,"follows":true}`...)
		fd.Atts = append(fd.Atts, att)
		fd.DataLen += att.Len
		return true
	})
	if !ok {
		return nil, false
	}
	return append(out, '}'), true
}

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
	for j, c := range b {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			if pad > 0 {
				return nil, 0, false
			}
		case c == '=' && j >= len(b)-2:
			pad++
		default:
			return nil, 0, false
		}
	}
	return b, len(b)/4*3 - pad, true
}

// members calls f with the spans of each key token and value of the JSON
// object starting at doc[i] == '{'; false from f, or malformed JSON, stops
// it with false.
func members(doc []byte, i int, f func(ks, ke, vs, ve int) bool) bool {
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return true
	}
	for i < len(doc) {
		if doc[i] != '"' {
			return false
		}
		ke := skipString(doc, i)
		if ke < 0 {
			return false
		}
		j := skipWS(doc, ke)
		if j >= len(doc) || doc[j] != ':' {
			return false
		}
		vs := skipWS(doc, j+1)
		ve := skipValue(doc, vs)
		if ve < 0 || !f(i, ke, vs, ve) {
			return false
		}
		i = skipWS(doc, ve)
		if i >= len(doc) {
			return false
		}
		switch doc[i] {
		case ',':
			i = skipWS(doc, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the end of the string token at b[i] == '"', or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the end of the JSON value at b[i], or -1. Scalars are
// delimited, not validated: the JSON came from a server that wrote it, and
// a bad one fails where it is parsed.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}
