package shard

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// A json_rows page holds the same live docs, in the same order, as the
// Row pages it stands in for, each rendered as _all_docs renders a row;
// deleted docs are left out but still move the page's last key, so that
// paging on from it loses nothing.
func TestReadRangeJSONRows(t *testing.T) {
	f := newFixture(t)
	var docs []*pb.DocUpdate
	for i := range 40 {
		docs = append(docs, &pb.DocUpdate{Id: fmt.Sprintf("d%02d", i), Body: []byte(`{"v":1}`)})
	}
	// ids JSON must escape, and one past the ASCII range
	docs = append(docs, &pb.DocUpdate{Id: `q"uote\`, Body: []byte(`{}`)}, &pb.DocUpdate{Id: "é\u2028", Body: []byte(`{}`)})
	res := f.update(true, docs...)
	// delete every third doc
	var dels []*pb.DocUpdate
	for i := 0; i < 40; i += 3 {
		dels = append(dels, &pb.DocUpdate{Id: docs[i].Id, Rev: res[i].Rev, Deleted: true, Body: []byte(`{}`)})
	}
	f.update(true, dels...)

	ask := func(q *pb.ReadRange) *pb.RangeReply {
		t.Helper()
		r, err := actors.Ask[*pb.RangeReply](context.Background(), f.sys.Root, f.pid, q)
		if err != nil || r.Error != nil {
			t.Fatalf("read range %v: %v %v", q, err, r.GetError())
		}
		return r
	}
	for _, tc := range []struct {
		name string
		q    *pb.ReadRange
	}{
		{"all", &pb.ReadRange{}},
		{"descending", &pb.ReadRange{Descending: true}},
		{"start and inclusive end", &pb.ReadRange{StartKey: "d05", HasStart: true, EndKey: "d30", HasEnd: true, InclusiveEnd: true}},
		{"exclusive end", &pb.ReadRange{StartKey: "d05", HasStart: true, EndKey: "d30", HasEnd: true, InclusiveEnd: false}},
		{"inclusive end, descending", &pb.ReadRange{StartKey: "d30", HasStart: true, EndKey: "d05", HasEnd: true, InclusiveEnd: true, Descending: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			rows := ask(tc.q)
			for _, r := range rows.Rows {
				if !r.Info.Deleted {
					want = append(want, `{"id":`+string(docjson.AppendString(nil, r.Info.Id))+`,"key":`+
						string(docjson.AppendString(nil, r.Info.Id))+`,"value":{"rev":"`+r.Info.Winner+`"}}`)
				}
			}
			if len(want) == 0 {
				t.Fatal("no live rows to compare")
			}
			// pages of 4 records, paged on from last_key as the coordinator does
			var got []string
			q := proto.Clone(tc.q).(*pb.ReadRange)
			q.JsonRows, q.Limit = true, 4
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("paging does not end")
				}
				p := ask(q)
				if len(p.Rows) != 0 || len(p.JsonEnds) != len(p.IdEnds) {
					t.Fatalf("page: %d rows, %d json ends, %d id ends", len(p.Rows), len(p.JsonEnds), len(p.IdEnds))
				}
				start, idStart := uint32(0), uint32(0)
				for i, end := range p.JsonEnds {
					row := string(p.Json[start:end])
					id := string(p.Ids[idStart:p.IdEnds[i]])
					if !strings.HasPrefix(row, `{"id":`+string(docjson.AppendString(nil, id))) {
						t.Fatalf("row %s: id %q", row, id)
					}
					got = append(got, row)
					start, idStart = end, p.IdEnds[i]
				}
				if !p.More {
					break
				}
				if p.LastKey == "" {
					t.Fatal("a page with more after it has no last key")
				}
				q.StartKey, q.HasStart, q.SkipStart = p.LastKey, true, true
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("json rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
