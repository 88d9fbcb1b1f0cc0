package coordinator

import (
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
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
		r.Json = shard.AppendAllDocsRow(r.Json, []byte(info.Id), []byte(info.Winner))
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
		r.Json = shard.AppendChangeFragment(r.Json, []byte(info.Id), []byte(info.Winner), info.Deleted)
		r.JsonEnds = append(r.JsonEnds, uint32(len(r.Json)))
		r.Seqs = append(r.Seqs, info.Seq)
	}
	r.Rows = nil
}

// rowStart is where row i of a json_rows page starts in the bytes whose
// row ends are ends.
func rowStart(ends []uint32, i int) uint32 {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}
