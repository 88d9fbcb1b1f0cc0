package shard

import (
	"github.com/dgraph-io/badger/v4"

	pb "github.com/settee/settee/proto"
)

// readDocs answers GetDocs: the docs one after the other on the caller's
// goroutine (one goroutine for the batch, where a GetDoc each costs a
// request, a goroutine and its stack growth).
func (s *store) readDocs(ms []*pb.GetDoc) *pb.DocsReply {
	reply, _ := s.readDocsInto(ms, nil)
	return reply
}

// readDocsInto reads the docs of ms from one badger snapshot (a
// transaction per doc was a twentieth of a _find's CPU), appending the
// docs asked rendered to buf; their DocReply.Rendered are parts of it.
// It returns the grown buf, for the caller to reuse once it is done with
// the reply. An error of one doc is that doc's reply's.
func (s *store) readDocsInto(ms []*pb.GetDoc, buf []byte) (*pb.DocsReply, []byte) {
	reply := &pb.DocsReply{Docs: make([]*pb.DocReply, len(ms))}
	err := s.db.View(func(txn *badger.Txn) error {
		for i, m := range ms {
			d, b := s.readDocIn(txn, m, buf)
			if n := len(d.Rendered); n > 0 {
				// capped: the next doc appended to buf never writes
				// into this one
				d.Rendered = d.Rendered[:n:n]
			}
			reply.Docs[i], buf = d, b
		}
		return nil
	})
	if err != nil {
		for i := range reply.Docs {
			if reply.Docs[i] == nil {
				reply.Docs[i] = &pb.DocReply{Error: perr(ErrInternal.Code, err.Error())}
			}
		}
	}
	return reply, buf
}
