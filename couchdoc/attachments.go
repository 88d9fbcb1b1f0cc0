package couchdoc

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	pb "github.com/settee/settee/proto"
)

// CouchDB stores attachments of compressible types gzipped ([attachments]
// compressible_types, compression_level 8): less disk, and a client that
// accepts gzip gets the stored bytes as they are. The digest is of the
// stored (encoded) bytes, as in CouchDB.
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
// type is compressible (always, as CouchDB: even tiny texts report
// "encoding":"gzip").
func NewAttachment(name, contentType string, data []byte) *pb.Att {
	a := &pb.Att{Name: name, ContentType: contentType, Data: data, Length: uint64(len(data))}
	if compressible(contentType) && len(data) > 0 {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, compressionLevel)
		if err == nil {
			_, err = zw.Write(data)
		}
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			a.Data, a.Encoding, a.EncodedLength = buf.Bytes(), "gzip", uint64(buf.Len())
		}
	}
	a.Digest = Digest(a.Data)
	return a
}

// Digest is CouchDB's attachment digest of the stored bytes.
func Digest(data []byte) string {
	sum := md5.Sum(data)
	return "md5-" + base64.StdEncoding.EncodeToString(sum[:])
}

// SortAttachments orders attachments by name (rev hashes and stored
// records list them in one order).
func SortAttachments(a []*pb.Att) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Name < a[j-1].Name; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// ErrBadAttachment is what every ParseAttachments error unwraps to; the
// error's text is CouchDB's reason (bad_request).
var ErrBadAttachment = errors.New("couchdoc: bad attachment")

type attError string

func (e attError) Error() string { return string(e) }
func (e attError) Unwrap() error { return ErrBadAttachment }

// attJSON is one member of _attachments as a client sends it.
type attJSON struct {
	ContentType string  `json:"content_type"`
	Data        *string `json:"data"`
	Stub        bool    `json:"stub"`
	Follows     bool    `json:"follows"`
	Revpos      uint64  `json:"revpos"`
}

// ParseAttachments decodes a doc's _attachments object (the one part of a
// doc decoded into Go values: data must be base64-decoded and hashed
// anyway) into sorted shard attachments: stubs, and new data stored as
// NewAttachment stores it. A revpos sent with data is kept for the shard,
// which uses it for replicated revisions only.
func ParseAttachments(raw []byte) ([]*pb.Att, error) {
	var m map[string]attJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, attError("Bad special document member: _attachments")
	}
	out := make([]*pb.Att, 0, len(m))
	for name, a := range m {
		if name == "" || !utf8.ValidString(name) {
			return nil, attError("Attachment name must be a non-empty UTF-8 string")
		}
		if strings.HasPrefix(name, "_") {
			return nil, attError("Attachment name '" + name + "' starts with prohibited character '_'")
		}
		switch {
		case a.Stub:
			out = append(out, &pb.Att{Name: name, Stub: true, Revpos: a.Revpos})
		case a.Data != nil:
			data, err := base64.StdEncoding.DecodeString(*a.Data)
			if err != nil {
				return nil, attError("Invalid attachment data for " + name)
			}
			ct := a.ContentType
			if ct == "" {
				ct = "application/octet-stream"
			}
			att := NewAttachment(name, ct, data)
			att.Revpos = a.Revpos
			out = append(out, att)
		case a.Follows:
			return nil, attError("attachment " + name + " follows, but the request is not multipart")
		default:
			return nil, attError("Invalid attachment stub in " + name)
		}
	}
	SortAttachments(out)
	return out, nil
}
