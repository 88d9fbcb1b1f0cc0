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

// A json_rows page of changes holds every change of the Row pages it
// stands in for, in seq order with the same seqs, each rendered as the
// _changes row after its seq.
func TestReadChangesJSONRows(t *testing.T) {
	f := newFixture(t)
	var docs []*pb.DocUpdate
	for i := range 25 {
		docs = append(docs, &pb.DocUpdate{Id: fmt.Sprintf("d%02d", i), Body: []byte(`{"v":1}`)})
	}
	docs = append(docs, &pb.DocUpdate{Id: "\"\u2028", Body: []byte(`{}`)})
	res := f.update(true, docs...)
	f.update(true, &pb.DocUpdate{Id: "d03", Rev: res[3].Rev, Deleted: true, Body: []byte(`{}`)},
		&pb.DocUpdate{Id: "d07", Rev: res[7].Rev, Body: []byte(`{"v":2}`)})
	ask := func(q *pb.ReadChanges) *pb.ChangesReply {
		t.Helper()
		r, err := actors.Ask[*pb.ChangesReply](context.Background(), f.sys.Root, f.pid, q)
		if err != nil || r.Error != nil {
			t.Fatalf("read changes %v: %v %v", q, err, r.GetError())
		}
		return r
	}
	for _, desc := range []bool{false, true} {
		t.Run(fmt.Sprintf("descending=%v", desc), func(t *testing.T) {
			var want []string
			for _, r := range ask(&pb.ReadChanges{Descending: desc}).Rows {
				row := fmt.Sprintf(`%d "id":%s,"changes":[{"rev":"%s"}]`, r.Info.Seq, docjson.AppendString(nil, r.Info.Id), r.Info.Winner)
				if r.Info.Deleted {
					row += `,"deleted":true`
				}
				want = append(want, row)
			}
			if len(want) != len(docs) {
				t.Fatalf("%d changes, want %d", len(want), len(docs))
			}
			var got []string
			q := &pb.ReadChanges{Descending: desc, WinnerOnly: true, JsonRows: true, Limit: 4}
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("paging does not end")
				}
				p := ask(q)
				if len(p.Rows) != 0 || len(p.Seqs) != len(p.JsonEnds) || len(p.Seqs) > 4 {
					t.Fatalf("page: %d rows, %d seqs, %d ends", len(p.Rows), len(p.Seqs), len(p.JsonEnds))
				}
				start := uint32(0)
				for i, end := range p.JsonEnds {
					got = append(got, fmt.Sprintf("%d %s", p.Seqs[i], p.Json[start:end]))
					start = end
				}
				if !p.More {
					break
				}
				if desc {
					q.Before = p.Seqs[len(p.Seqs)-1]
				} else {
					q.Since = p.Seqs[len(p.Seqs)-1]
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("json changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
