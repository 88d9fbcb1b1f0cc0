package coordinator

import (
	"strings"
	"testing"

	pb "github.com/settee/settee/proto"
)

// Row pages from a copy that predates json_rows become the pages the
// shard would have sent: live rows rendered, deleted ones left out of
// _all_docs but moving its last key, every change kept with its seq.
func TestJSONPagesOfRowPages(t *testing.T) {
	rows := []*pb.Row{
		{Info: &pb.FullDocInfo{Id: "a", Winner: "1-x", Seq: 3}},
		{Info: &pb.FullDocInfo{Id: `q"`, Winner: "2-y", Seq: 5}},
		{Info: &pb.FullDocInfo{Id: "z", Winner: "3-z", Seq: 9, Deleted: true}},
	}
	r := &pb.RangeReply{Rows: rows, More: true}
	rangeJSONPage(r)
	var got []string
	start, idStart := uint32(0), uint32(0)
	for i, end := range r.JsonEnds {
		got = append(got, string(r.Ids[idStart:r.IdEnds[i]])+" "+string(r.Json[start:end]))
		start, idStart = end, r.IdEnds[i]
	}
	want := `a {"id":"a","key":"a","value":{"rev":"1-x"}}` + "\n" + `q" {"id":"q\"","key":"q\"","value":{"rev":"2-y"}}`
	if strings.Join(got, "\n") != want || r.LastKey != "z" || r.Rows != nil || !r.More {
		t.Errorf("range page:\n%s\nlast key %q, rows %v\nwant:\n%s", strings.Join(got, "\n"), r.LastKey, r.Rows, want)
	}

	c := &pb.ChangesReply{Rows: rows}
	changesJSONPage(c)
	got = got[:0]
	start = 0
	for i, end := range c.JsonEnds {
		got = append(got, string(c.Json[start:end]))
		start = end
		if c.Seqs[i] != rows[i].Info.Seq {
			t.Errorf("change %d: seq %d, want %d", i, c.Seqs[i], rows[i].Info.Seq)
		}
	}
	want = `"id":"a","changes":[{"rev":"1-x"}]` + "\n" + `"id":"q\"","changes":[{"rev":"2-y"}]` + "\n" + `"id":"z","changes":[{"rev":"3-z"}],"deleted":true`
	if strings.Join(got, "\n") != want || c.Rows != nil {
		t.Errorf("changes page:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}

	// a page that is already json_rows is left as it is
	j := &pb.RangeReply{Json: []byte("x"), JsonEnds: []uint32{1}, Ids: []byte("i"), IdEnds: []uint32{1}, LastKey: "i"}
	rangeJSONPage(j)
	if string(j.Json) != "x" || j.LastKey != "i" {
		t.Errorf("json page changed: %v", j)
	}
}
