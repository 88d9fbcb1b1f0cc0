package shard

import (
	"time"

	pb "github.com/settee/settee/proto"
)

// Observer hears what a shard copy does, for the node's metrics. Its
// methods are called from the shard's goroutines (reads run on their own),
// so they must be safe for concurrent use and quick.
type Observer interface {
	// Committed reports one synced group commit: the doc updates it
	// carried (0 for a group of only flushes, meta changes or compaction),
	// how many of them were accepted, and how long badger's commit took.
	Committed(docs, written int, took time.Duration)
	// DocsRead reports documents read: a doc by id, or the rows of a
	// page read with include_docs.
	DocsRead(n int)
}

// committed reports a finished group to the observer.
func (a *Actor) committed(d commitDone) {
	if a.cfg.Observer == nil {
		return
	}
	docs, written := 0, 0
	for _, it := range d.items {
		if it.batch != nil {
			docs += len(it.batch.Docs)
		}
	}
	for _, rs := range d.res.results {
		for _, r := range rs {
			if r.Error == nil {
				written++
			}
		}
	}
	a.cfg.Observer.Committed(docs, written, d.res.took)
}

// read reports the docs a read returned to the observer.
func (a *Actor) read(m any) { observeRead(a.cfg.Observer, m) }

func observeRead(obs Observer, m any) {
	if obs == nil {
		return
	}
	n := 0
	switch r := m.(type) {
	case *pb.DocReply:
		if len(r.Bodies) > 0 {
			n = 1
		}
	case *pb.DocsReply:
		for _, d := range r.Docs {
			if len(d.Bodies) > 0 {
				n++
			}
		}
	case *pb.RangeReply:
		n = rowsWithDocs(r.Rows)
	case *pb.ChangesReply:
		n = rowsWithDocs(r.Rows)
	}
	if n > 0 {
		obs.DocsRead(n)
	}
}

func rowsWithDocs(rows []*pb.Row) int {
	n := 0
	for _, r := range rows {
		if r.Json != nil {
			n++
		}
	}
	return n
}
