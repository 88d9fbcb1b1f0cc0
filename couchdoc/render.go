package couchdoc

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"slices"
	"strconv"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// Options are the read options that change how a doc is rendered.
type Options struct {
	Revs             bool
	RevsInfo         bool
	Conflicts        bool
	DeletedConflicts bool
	LocalSeq         bool
	Attachments      bool     // inline data
	AttsSince        []string // inline data only for atts newer than these
	AttEncodingInfo  bool
	// Follows renders the attachments whose data would be inline as
	// "follows" stubs instead: their stored bytes go in multipart parts
	// (see SentAtts), as CouchDB's multipart answers.
	Follows bool
	// EncodedData renders inline data as it is stored, with "encoding",
	// "encoded_length" and "length" beside it, where the stored bytes
	// are encoded. It is the replicator's own form, between its fetch and
	// its write, never sent to a server: an attachment replicated that
	// way keeps its bytes and its digest (which is of those bytes, and an
	// input of the revision's hash) on the target.
	EncodedData bool
}

// Append splices a stored body into a document: the stored bytes are
// copied as they are, with _id, _rev and the asked-for members around them.
func Append(dst []byte, id string, info *pb.FullDocInfo, rb *pb.RevBody, o *Options) []byte {
	// one allocation for the usual doc: appending a 15 KB body to a
	// small slice grew it four times (half of a _find's allocations)
	dst = slices.Grow(dst, len(rb.Json)+len(id)+len(rb.Rev)+32)
	dst = append(dst, `{"_id":`...)
	dst = docjson.AppendString(dst, id)
	dst = append(dst, `,"_rev":`...)
	dst = docjson.AppendString(dst, rb.Rev)
	body := rb.Json
	if len(body) > 2 {
		dst = append(dst, ',')
		dst = append(dst, body[1:len(body)-1]...)
	}
	if rb.Deleted {
		dst = append(dst, `,"_deleted":true`...)
	}
	var idx = -1
	if info != nil && o != nil && (o.Revs || o.RevsInfo || o.LocalSeq) {
		if r, err := revtree.ParseRev(rb.Rev); err == nil {
			idx = revtree.Find(info, r)
		}
	}
	if o != nil && idx >= 0 {
		if o.Revs {
			path := revtree.Path(info, idx)
			dst = append(dst, `,"_revisions":{"start":`...)
			dst = strconv.AppendUint(dst, path[0].Pos, 10)
			dst = append(dst, `,"ids":[`...)
			for i, p := range path {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = docjson.AppendString(dst, p.Hash)
			}
			dst = append(dst, "]}"...)
		}
		if o.RevsInfo {
			dst = append(dst, `,"_revs_info":[`...)
			for i, ri := range revtree.RevsInfo(info, idx) {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"rev":`...)
				dst = docjson.AppendString(dst, ri.Rev.String())
				dst = append(dst, `,"status":`...)
				dst = docjson.AppendString(dst, ri.Status)
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
		if o.LocalSeq {
			dst = append(dst, `,"_local_seq":`...)
			dst = strconv.AppendUint(dst, info.Nodes[idx].Seq, 10)
		}
	}
	if o != nil && info != nil && (o.Conflicts || o.DeletedConflicts) {
		if o.Conflicts {
			dst = appendRevList(dst, "_conflicts", revtree.Conflicts(info))
		}
		if o.DeletedConflicts {
			dst = appendRevList(dst, "_deleted_conflicts", revtree.DeletedConflicts(info))
		}
	}
	if len(rb.Atts) > 0 {
		dst = appendAtts(dst, rb, o)
	}
	return append(dst, '}')
}

func appendRevList(dst []byte, name string, revs []revtree.Rev) []byte {
	if len(revs) == 0 {
		return dst
	}
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `":[`...)
	for i, r := range revs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = docjson.AppendString(dst, r.String())
	}
	return append(dst, ']')
}

// attsSincePos is the highest generation among atts_since revs (CouchDB
// sends data for attachments whose revpos is newer).
func attsSincePos(revs []string) uint64 {
	var max uint64
	for _, s := range revs {
		if r, err := revtree.ParseRev(s); err == nil && r.Pos > max {
			max = r.Pos
		}
	}
	return max
}

// sendsData reports whether attachment i of rb goes with its data (inline
// or as a multipart part) under o.
func sendsData(rb *pb.RevBody, i int, o *Options) bool {
	return i < len(rb.AttData) && wantsData(rb.Atts[i], o)
}

func wantsData(a *pb.AttMeta, o *Options) bool {
	if o == nil {
		return false
	}
	if len(o.AttsSince) > 0 {
		return a.Revpos > attsSincePos(o.AttsSince)
	}
	return o.Attachments && a.Revpos > 0
}

// DataWanted lists the attachments of rb whose data Append sends under o
// (inline, or as parts with Follows) once rb.AttData carries it: what a
// reader that has only the attachments' metadata (a row of _all_docs or
// _changes) must fetch, leaving the others' AttData entries nil.
func DataWanted(rb *pb.RevBody, o *Options) []int {
	var out []int
	for i, a := range rb.Atts {
		if wantsData(a, o) {
			out = append(out, i)
		}
	}
	return out
}

// SentAtts lists the attachments of rb whose data Append with o.Follows
// leaves to multipart parts, in the order of their parts.
func SentAtts(rb *pb.RevBody, o *Options) []int {
	var out []int
	for i := range rb.Atts {
		if sendsData(rb, i, o) {
			out = append(out, i)
		}
	}
	return out
}

func appendAtts(dst []byte, rb *pb.RevBody, o *Options) []byte {
	dst = append(dst, `,"_attachments":{`...)
	for i, a := range rb.Atts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = docjson.AppendString(dst, a.Name)
		dst = append(dst, `:{"content_type":`...)
		dst = docjson.AppendString(dst, a.ContentType)
		dst = append(dst, `,"revpos":`...)
		dst = strconv.AppendUint(dst, a.Revpos, 10)
		dst = append(dst, `,"digest":`...)
		dst = docjson.AppendString(dst, a.Digest)
		sends := sendsData(rb, i, o)
		var data []byte
		encoded := false
		switch {
		case sends && !o.Follows && o.EncodedData && a.Encoding != "":
			data, encoded = rb.AttData[i], true
		case sends && !o.Follows:
			var err error
			if data, err = Identity(a, rb.AttData[i]); err != nil {
				sends = false // a damaged blob: show the stub rather than fail the doc
			}
		}
		switch {
		case encoded:
			dst = append(dst, `,"data":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, data)
			dst = append(dst, `","length":`...)
			dst = strconv.AppendUint(dst, a.Length, 10)
			dst = append(dst, `,"encoding":`...)
			dst = docjson.AppendString(dst, a.Encoding)
			dst = append(dst, `,"encoded_length":`...)
			dst = strconv.AppendUint(dst, uint64(len(data)), 10)
			dst = append(dst, '}')
			continue
		case sends && o.Follows:
			dst = append(dst, `,"length":`...)
			dst = strconv.AppendUint(dst, a.Length, 10)
			dst = append(dst, `,"follows":true`...)
		case sends:
			dst = append(dst, `,"data":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, data)
			dst = append(dst, '"')
		default:
			dst = append(dst, `,"length":`...)
			dst = strconv.AppendUint(dst, a.Length, 10)
			dst = append(dst, `,"stub":true`...)
		}
		if o != nil && o.AttEncodingInfo && a.Encoding != "" {
			dst = append(dst, `,"encoding":`...)
			dst = docjson.AppendString(dst, a.Encoding)
			dst = append(dst, `,"encoded_length":`...)
			dst = strconv.AppendUint(dst, a.EncodedLength, 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// Identity returns an attachment's data as the client sent it: stored
// compressible types are gzipped (as CouchDB stores them).
func Identity(meta *pb.AttMeta, stored []byte) ([]byte, error) {
	if meta.Encoding != "gzip" {
		return stored, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(stored))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}
