package coordinator

import (
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// A copy on a node that predates json_rows pages ignores the flag and
// answers Row pages (a cluster in the middle of a rolling upgrade). The
// cursors render those rows here, as the shard would have, so that a
// stream neither loses them nor asks for the same page forever.

// rangeJSONPage makes r, a Row page of _all_docs, a json_rows page.
func rangeJSONPage(r *pb.RangeReply) {
	if len(r.Rows) == 0 || len(r.JsonEnds) > 0 {
		return
	}
	for _, row := range r.Rows {
		info := row.GetInfo()
		if info == nil {
			continue
		}
		r.LastKey = info.Id
		if info.Deleted {
			continue
		}
		b := append(r.Json, `{"id":`...)
		b = docjson.AppendString(b, info.Id)
		b = append(b, `,"key":`...)
		b = docjson.AppendString(b, info.Id)
		b = append(b, `,"value":{"rev":`...)
		b = docjson.AppendString(b, info.Winner)
		r.Json = append(b, `}}`...)
		r.JsonEnds = append(r.JsonEnds, uint32(len(r.Json)))
		r.Ids = append(r.Ids, info.Id...)
		r.IdEnds = append(r.IdEnds, uint32(len(r.Ids)))
	}
	r.Rows = nil
}

// changesJSONPage makes r, a Row page of changes, a json_rows page.
func changesJSONPage(r *pb.ChangesReply) {
	if len(r.Rows) == 0 || len(r.Seqs) > 0 {
		return
	}
	for _, row := range r.Rows {
		info := row.GetInfo()
		if info == nil {
			continue
		}
		b := append(r.Json, `"id":`...)
		b = docjson.AppendString(b, info.Id)
		b = append(b, `,"changes":[{"rev":`...)
		b = docjson.AppendString(b, info.Winner)
		b = append(b, `}]`...)
		if info.Deleted {
			b = append(b, `,"deleted":true`...)
		}
		r.Json = b
		r.JsonEnds = append(r.JsonEnds, uint32(len(b)))
		r.Seqs = append(r.Seqs, info.Seq)
	}
	r.Rows = nil
}
