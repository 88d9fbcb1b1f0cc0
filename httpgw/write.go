package httpgw

import (
	"strings"
	"unicode/utf8"

	"github.com/settee/settee/couchdoc"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// checkDocID applies CouchDB's doc id rules.
func checkDocID(id string) error {
	switch {
	case id == "":
		return errDocIDEmpty
	case !utf8.ValidString(id):
		return errDocIDNotUTF8
	case id == "_design/", id == "_local/":
		return errDocIDEmpty
	case strings.HasPrefix(id, "_design/"), strings.HasPrefix(id, "_local/"):
		return nil
	case id[0] == '_':
		return errIllegalDocID
	}
	return nil
}

// docUpdate turns a parsed doc into a shard update.
func docUpdate(tag uint32, id string, d *docjson.Doc, newEdits bool) (*pb.DocUpdate, error) {
	return docUpdateMP(tag, id, d, newEdits, nil)
}

// docUpdateMP is docUpdate for a doc that came as multipart/related (mp
// not nil): its "follows" attachments take mp's parts.
func docUpdateMP(tag uint32, id string, d *docjson.Doc, newEdits bool, mp *couchdoc.Related) (*pb.DocUpdate, error) {
	u := &pb.DocUpdate{Tag: tag, Id: id, Body: d.Body, Rev: d.Rev, Deleted: d.Deleted, HasAtts: d.HasAttachments}
	if d.HasRev && newEdits && d.Rev != "" {
		if unstoredRev(d.Rev) {
			return nil, errConflict // an edit of a rev no doc has
		}
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
		return nil, errNewEditsNoRev
	}
	if mp != nil && (!d.HasAttachments || len(d.Attachments) <= 2) && len(mp.Parts) > 0 {
		return nil, badRequest("the body has attachment parts, but no attachment follows")
	}
	if d.HasAttachments && len(d.Attachments) > 2 {
		var atts []*pb.Att
		var err error
		if mp != nil {
			atts, err = couchdoc.ParseAttachmentsFollows(d.Attachments, mp.Parts)
		} else {
			atts, err = couchdoc.ParseAttachments(d.Attachments)
		}
		if err != nil {
			return nil, newErr(400, couchdoc.AttErrorCode(err), err.Error())
		}
		u.Atts = atts
	}
	return u, nil
}

var errNewEditsNoRev = badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")

// unstoredRev reports a rev that CouchDB's parse_rev takes (digits, a dash,
// any hash) but no rev tree holds: generation 0, which settee's rev parser
// refuses. CouchDB answers an edit of it as a conflict and a read of it as
// missing, not as a bad rev. (An empty hash, "2-", is a rev like another:
// CouchDB stores one a replication writes, and so does settee.)
func unstoredRev(s string) bool {
	pos, _, ok := strings.Cut(s, "-")
	if !ok || pos == "" {
		return false
	}
	for i := 0; i < len(pos); i++ {
		if pos[i] < '0' || pos[i] > '9' {
			return false
		}
	}
	return strings.TrimLeft(pos, "0") == ""
}

// validRev is a rev CouchDB's parse_rev takes: settee's format, or one
// that no tree holds (unstoredRev).
func validRev(s string) bool {
	if unstoredRev(s) {
		return true
	}
	_, err := revtree.ParseRev(s)
	return err == nil
}

// revQuery is a read's ?rev= as CouchDB's parse_doc_query takes it: every
// value must be a rev (an empty one too is "Invalid rev format"), the
// last one counts; "" when there is none.
func revQuery(rq *req) (string, error) {
	vals := rq.q["rev"]
	for _, v := range vals {
		if !validRev(v) {
			return "", errBadRev
		}
	}
	if len(vals) == 0 {
		return "", nil
	}
	return vals[len(vals)-1], nil
}

// revToEdit is a write's ?rev= as CouchDB's extract_header_rev takes it:
// the first value, which must be a rev when it is there.
func revToEdit(rq *req) (string, error) {
	vals, ok := rq.q["rev"]
	if !ok || len(vals) == 0 {
		return "", nil
	}
	if !validRev(vals[0]) {
		return "", errBadRev
	}
	return vals[0], nil
}
