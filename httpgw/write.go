package httpgw

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard/revtree"
)

// checkDocID applies CouchDB's doc id rules.
func checkDocID(id string) error {
	switch {
	case id == "":
		return errDocIDEmpty
	case !utf8.ValidString(id):
		return errDocIDNotUTF8
	case strings.HasPrefix(id, "_design/"), strings.HasPrefix(id, "_local/"):
		if len(id) == len("_design/") || id == "_local/" {
			return errDocIDEmpty
		}
		return nil
	case id[0] == '_':
		return errIllegalDocID
	}
	return nil
}

// attJSON is one member of _attachments as a client sends it.
type attJSON struct {
	ContentType string  `json:"content_type"`
	Data        *string `json:"data"`
	Stub        bool    `json:"stub"`
	Follows     bool    `json:"follows"`
	Revpos      uint64  `json:"revpos"`
	Digest      string  `json:"digest"`
	Length      uint64  `json:"length"`
}

// parseAtts decodes _attachments. It is the one part of a doc decoded into
// Go values: attachment data must be base64-decoded and hashed anyway.
func parseAtts(raw []byte) ([]*pb.Att, error) {
	var m map[string]attJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, badRequest("Bad special document member: _attachments")
	}
	out := make([]*pb.Att, 0, len(m))
	for name, a := range m {
		if name == "" || !utf8.ValidString(name) {
			return nil, badRequest("Attachment name must be a non-empty UTF-8 string")
		}
		if strings.HasPrefix(name, "_") {
			return nil, badRequest("Attachment name '" + name + "' starts with prohibited character '_'")
		}
		switch {
		case a.Stub:
			out = append(out, &pb.Att{Name: name, Stub: true, Revpos: a.Revpos})
		case a.Data != nil:
			data, err := base64.StdEncoding.DecodeString(*a.Data)
			if err != nil {
				return nil, badRequest("Invalid attachment data for " + name)
			}
			ct := a.ContentType
			if ct == "" {
				ct = "application/octet-stream"
			}
			out = append(out, newAtt(name, ct, data))
		case a.Follows:
			return nil, badRequest("attachment " + name + " follows, but the request is not multipart")
		default:
			return nil, badRequest("Invalid attachment stub in " + name)
		}
	}
	sortAtts(out)
	return out, nil
}

func sortAtts(a []*pb.Att) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Name < a[j-1].Name; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func digestOf(data []byte) string {
	sum := md5.Sum(data)
	return "md5-" + base64.StdEncoding.EncodeToString(sum[:])
}

// docUpdate turns a parsed doc into a shard update.
func docUpdate(tag uint32, id string, d *docjson.Doc, newEdits bool) (*pb.DocUpdate, error) {
	u := &pb.DocUpdate{Tag: tag, Id: id, Body: d.Body, Rev: d.Rev, Deleted: d.Deleted, HasAtts: d.HasAttachments}
	if d.HasRev && newEdits && d.Rev != "" {
		if _, err := revtree.ParseRev(d.Rev); err != nil {
			return nil, errBadRev
		}
	}
	if d.Revisions != nil {
		u.Revisions = &pb.Revisions{Start: d.Revisions.Start, Ids: d.Revisions.IDs}
		if newEdits && !d.HasRev && len(d.Revisions.IDs) > 0 {
			// _revisions without _rev names the parent in new_edits mode
			u.Rev = revtree.Rev{Pos: d.Revisions.Start, Hash: d.Revisions.IDs[0]}.String()
		}
	}
	if !newEdits && u.Rev == "" && (u.Revisions == nil || len(u.Revisions.Ids) == 0) {
		return nil, badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
	}
	if d.HasAttachments && len(d.Attachments) > 2 {
		atts, err := parseAtts(d.Attachments)
		if err != nil {
			return nil, err
		}
		u.Atts = atts
	}
	return u, nil
}
