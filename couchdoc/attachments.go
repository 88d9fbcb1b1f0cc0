package couchdoc

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/settee/settee/cdeflate"
	pb "github.com/settee/settee/proto"
)

// CouchDB stores attachments of compressible types gzipped ([attachments]
// compressible_types, compression_level 8): less disk, and a client that
// accepts gzip gets the stored bytes as they are. The digest is of the
// stored (encoded) bytes, as in CouchDB, and enters the revision id: the
// bytes are C zlib's (cdeflate), so digests and revs are CouchDB's.
// settee does not read compression_level from _config: always 8, and
// never 0 (CouchDB's "store as it is").
var compressibleTypes = []string{"text/", "application/javascript", "application/json", "application/xml"}

const compressionLevel = 8

func compressible(contentType string) bool {
	ct := strings.ToLower(strings.TrimSpace(contentType))
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = strings.TrimSpace(ct[:i])
	}
	for _, t := range compressibleTypes {
		if strings.HasSuffix(t, "/") && strings.HasPrefix(ct, t) || ct == t {
			return true
		}
	}
	return false
}

// NewAttachment builds a new attachment from identity data, gzipping it when its
// type is compressible (always, as CouchDB: even an empty text is stored as
// zlib's 20-byte gzip stream, "encoding":"gzip").
func NewAttachment(name, contentType string, data []byte) *pb.Att {
	a := &pb.Att{Name: name, ContentType: contentType, Data: data, Length: uint64(len(data))}
	if compressible(contentType) {
		if gz, err := gzipData(data); err == nil {
			a.Data, a.Encoding, a.EncodedLength = gz, "gzip", uint64(len(gz))
		}
	}
	a.Digest = Digest(a.Data)
	return a
}

// gzipWriters keeps cdeflate's writers (a quarter of a megabyte each) for
// the next attachment.
var gzipWriters = sync.Pool{New: func() any {
	z, err := cdeflate.NewWriter(io.Discard, compressionLevel)
	if err != nil {
		panic(err) // compressionLevel is a valid level
	}
	return z
}}

func gzipData(data []byte) ([]byte, error) {
	z := gzipWriters.Get().(*cdeflate.Writer)
	defer gzipWriters.Put(z)
	var buf bytes.Buffer
	z.Reset(&buf)
	if _, err := z.Write(data); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Digest is CouchDB's attachment digest of the stored bytes.
func Digest(data []byte) string {
	sum := md5.Sum(data)
	return "md5-" + base64.StdEncoding.EncodeToString(sum[:])
}

// ErrBadAttachment is what every ParseAttachments error unwraps to; the
// error's text is CouchDB's reason and AttErrorCode its error name.
var ErrBadAttachment = errors.New("couchdoc: bad attachment")

type attError struct {
	code   string // "" for bad_request
	reason string
}

func (e *attError) Error() string { return e.reason }
func (e *attError) Unwrap() error { return ErrBadAttachment }

func badAtt(reason string) error { return &attError{reason: reason} }

// AttErrorCode is CouchDB's error name for a ParseAttachments error:
// bad_request, or content_md5_mismatch when data does not match its
// digest.
func AttErrorCode(err error) string {
	var ae *attError
	if errors.As(err, &ae) && ae.code != "" {
		return ae.code
	}
	return "bad_request"
}

// attJSON is one member of _attachments as a client sends it.
type attJSON struct {
	ContentType   string          `json:"content_type"`
	Data          json.RawMessage `json:"data"` // a string, else invalid data
	Stub          onlyTrue        `json:"stub"`
	Follows       onlyTrue        `json:"follows"`
	Revpos        uint64          `json:"revpos"`
	Length        *uint64         `json:"length"`
	EncodedLength *uint64         `json:"encoded_length"`
	Encoding      string          `json:"encoding"`
	Digest        string          `json:"digest"`
}

// onlyTrue is a flag as CouchDB's couch_att reads it: set by true alone,
// any other value leaves it unset.
type onlyTrue bool

func (b *onlyTrue) UnmarshalJSON(v []byte) error {
	*b = string(v) == "true"
	return nil
}

type namedAtt struct {
	name string
	attJSON
	notObject bool // CouchDB drops a member that is not an object
}

// decodeAtts decodes an _attachments object keeping its members' order
// (multipart bodies follow it, and a revision's hash lists the
// attachments in it); a name given twice counts once, with its last
// value, at its last place (as jiffy's dedupe_keys leaves it), and a
// member whose value is not an object is dropped (CouchDB's doc reader
// takes the object members only).
func decodeAtts(raw []byte) ([]namedAtt, error) {
	bad := badAtt("Bad special document member: _attachments")
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad
	}
	var out []namedAtt
	at := map[string]int{} // name -> its last place
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, bad
		}
		na := namedAtt{name: name, notObject: v[0] != '{'}
		if !na.notObject {
			if err := json.Unmarshal(v, &na.attJSON); err != nil {
				return nil, bad
			}
		}
		at[name] = len(out)
		out = append(out, na)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, bad
	}
	kept := out[:0]
	for i, a := range out {
		if at[a.name] == i && !a.notObject {
			kept = append(kept, a)
		}
	}
	return kept, nil
}

// ParseAttachments decodes a doc's _attachments object (the one part of a
// doc decoded into Go values: data must be base64-decoded and hashed
// anyway) into shard attachments, in the object's order: stubs, and new data stored as
// NewAttachment stores it. A revpos sent with data is kept for the shard,
// which uses it for replicated revisions only. An entry that says
// "follows" is an error: the request is not multipart.
func ParseAttachments(raw []byte) ([]*pb.Att, error) {
	return parseAtts(raw, nil, false, false)
}

// ParseAttachmentsEncoded is ParseAttachments for the replicator's own
// form (Options.EncodedData): inline data that says "encoding":"gzip" is
// the stored bytes, kept as they are with their digest, which it must
// match. A client's inline data is identity whatever it says (CouchDB
// ignores encoding there): the gateway never calls this.
func ParseAttachmentsEncoded(raw []byte) ([]*pb.Att, error) {
	return parseAtts(raw, nil, false, true)
}

// ParseAttachmentsFollows is ParseAttachments for a multipart/related
// document: the entries that say "follows" take the parts, in their order
// in the JSON (as CouchDB matches them). A part's size must match the
// entry's length (encoded_length when an encoding is given) and its MD5
// the entry's digest, when they are given; a part left over or missing is
// an error.
func ParseAttachmentsFollows(raw []byte, parts [][]byte) ([]*pb.Att, error) {
	return parseAtts(raw, parts, true, false)
}

func parseAtts(raw []byte, parts [][]byte, multipart, encoded bool) ([]*pb.Att, error) {
	atts, err := decodeAtts(raw)
	if err != nil {
		return nil, err
	}
	out := make([]*pb.Att, 0, len(atts))
	next := 0
	for _, a := range atts {
		name := a.name
		if name == "" || !utf8.ValidString(name) {
			return nil, badAtt("Attachment name must be a non-empty UTF-8 string")
		}
		if strings.HasPrefix(name, "_") {
			return nil, badAtt("Attachment name '" + name + "' starts with prohibited character '_'")
		}
		// CouchDB's order: a stub, else what follows, else inline data,
		// which must be there and be base64
		switch {
		case bool(a.Stub):
			out = append(out, &pb.Att{Name: name, Stub: true, Revpos: a.Revpos})
		case !bool(a.Follows):
			var b64 string
			if json.Unmarshal(a.Data, &b64) != nil {
				return nil, badAtt("Invalid attachment data for " + name)
			}
			data, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return nil, badAtt("Invalid attachment data for " + name)
			}
			if encoded && a.Encoding == "gzip" {
				att := &pb.Att{Name: name, ContentType: contentType(a.ContentType), Data: data, Encoding: "gzip",
					EncodedLength: uint64(len(data)), Digest: Digest(data), Revpos: a.Revpos}
				if a.Length != nil {
					att.Length = *a.Length
				}
				if a.Digest != "" && a.Digest != att.Digest {
					return nil, &attError{code: "content_md5_mismatch", reason: "Possible message corruption."}
				}
				out = append(out, att)
				continue
			}
			att := NewAttachment(name, contentType(a.ContentType), data)
			att.Revpos = a.Revpos
			out = append(out, att)
		case !multipart:
			return nil, badAtt("attachment " + name + " follows, but the request is not multipart")
		default:
			if next >= len(parts) {
				return nil, badAtt(fmt.Sprintf("attachment %s follows, but the body has only %d attachment parts", name, len(parts)))
			}
			att, err := followed(name, &a.attJSON, parts[next])
			if err != nil {
				return nil, err
			}
			next++
			out = append(out, att)
		}
	}
	if next < len(parts) {
		return nil, badAtt(fmt.Sprintf("the body has %d attachment parts, but only %d attachments follow", len(parts), next))
	}
	return out, nil
}

func contentType(ct string) string {
	if ct == "" {
		return "application/octet-stream"
	}
	return ct
}

// followed builds the attachment of a "follows" entry from its part.
func followed(name string, a *attJSON, data []byte) (*pb.Att, error) {
	want := a.Length
	if a.Encoding != "" && a.Encoding != "identity" && a.EncodedLength != nil {
		want = a.EncodedLength
	}
	// CouchDB's reasons, which name no attachment
	if want != nil && *want > uint64(len(data)) {
		return nil, badAtt("attachment shorter than expected")
	}
	if want != nil && *want < uint64(len(data)) {
		return nil, badAtt("attachment longer than expected")
	}
	// CouchDB checks the digest against the bytes as sent
	if a.Digest != "" && a.Digest != Digest(data) {
		return nil, &attError{code: "content_md5_mismatch", reason: "Possible message corruption."}
	}
	ct := contentType(a.ContentType)
	var att *pb.Att
	switch a.Encoding {
	case "", "identity":
		att = NewAttachment(name, ct, data)
	case "gzip":
		// stored as sent: a client that accepts gzip gets these bytes back
		if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			return nil, badAtt("attachment " + name + " says gzip, but its part is not gzip data")
		}
		att = &pb.Att{Name: name, ContentType: ct, Data: data, Digest: Digest(data),
			Encoding: "gzip", EncodedLength: uint64(len(data))}
		if a.Length != nil {
			att.Length = *a.Length
		} else {
			n, err := gunzipLen(data)
			if err != nil {
				return nil, badAtt("attachment " + name + " says gzip, but its part is not gzip data")
			}
			att.Length = n
		}
	default:
		return nil, badAtt("attachment " + name + ": unsupported encoding " + a.Encoding)
	}
	att.Revpos = a.Revpos
	return att, nil
}

func gunzipLen(data []byte) (uint64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	n, err := io.Copy(io.Discard, zr)
	return uint64(n), err
}
