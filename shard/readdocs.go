package shard

import pb "github.com/settee/settee/proto"

// readDocs answers GetDocs: the docs one after the other on the caller's
// goroutine (one goroutine for the batch, where a GetDoc each costs a
// request, a goroutine and its stack growth). Each doc is read on its own
// snapshot, as a GetDoc would be.
func (s *store) readDocs(ms []*pb.GetDoc) *pb.DocsReply {
	reply := &pb.DocsReply{Docs: make([]*pb.DocReply, len(ms))}
	for i, m := range ms {
		reply.Docs[i] = s.readDoc(m)
	}
	return reply
}
