package shard

import (
	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/settee/settee/proto"
)

// Reader serves a shard copy's point reads (a doc, doc infos by id) beside
// its actor. Reads never needed the actor's state, only a badger snapshot,
// but through the mailbox each one cost two goroutine hand-offs (mailbox,
// then a read worker) before badger was even asked; on a quorum read
// that is paid on every copy asked, and on two shared cores each hand-off
// can wait for a thread to wake. The coordinator of this node calls
// ReadDoc and ReadDocInfos on its own goroutine; other nodes send GetDoc
// and GetDocInfos to the Reader's process (ReaderID), which runs them on
// the read pool and answers the sender.
type Reader struct {
	st   *store
	pool *ReadPool
	obs  Observer
	sys  *actor.ActorSystem
}

// ReaderID is the process id of the Reader of the shard actor named id.
func ReaderID(id string) string { return id + "$read" }

func newReader(cfg Config, st *store, sys *actor.ActorSystem) *Reader {
	return &Reader{st: st, pool: cfg.Reads, obs: cfg.Observer, sys: sys}
}

// ReadDoc answers a GetDoc from the copy's latest committed state. A doc
// asked rendered (m.Render) is appended to buf, with room after it for
// a newline, and its DocReply.Rendered is that part of it; the grown buf
// is returned. A caller that answers many single-doc reads reuses one
// buffer per read in flight instead of a doc-sized allocation, zeroed
// and then collected, per read.
func (r *Reader) ReadDoc(m *pb.GetDoc, buf []byte) (*pb.DocReply, []byte) {
	reply, buf := r.st.readDoc(m, buf)
	observeRead(r.obs, reply)
	return reply, buf
}

// ReadDocs answers a GetDocs on the caller's goroutine, every doc from
// one snapshot. The docs asked rendered are appended to buf (their
// DocReply.Rendered are parts of it) and the grown buf is returned: a
// caller that renders many docs reuses one buffer instead of a
// doc-sized allocation, zeroed and then collected, per doc.
func (r *Reader) ReadDocs(ms []*pb.GetDoc, buf []byte) (*pb.DocsReply, []byte) {
	reply, buf := r.st.readDocsInto(ms, buf)
	observeRead(r.obs, reply)
	return reply, buf
}

// ReadDocInfos answers the rev trees of ids (an empty info for a missing id).
func (r *Reader) ReadDocInfos(ids []string) *pb.DocInfosReply {
	return r.st.readDocInfos(ids)
}

// ReadChanges answers a page of the by-seq index from the copy's latest
// committed state, on the caller's goroutine: a view index of this node
// is built from it (package views) without a message to the shard.
func (r *Reader) ReadChanges(m *pb.ReadChanges) *pb.ChangesReply {
	return r.st.readChanges(m)
}

// LastSeq is the copy's latest committed change's seq (a reverse seek of
// the by-seq index): a view index that has reached it needs no build.
func (r *Reader) LastSeq() uint64 { return r.st.lastSeq() }

// LastPurgeSeq is the copy's latest purge's seq (0: none kept).
func (r *Reader) LastPurgeSeq() uint64 { return r.st.lastPurgeSeq() }

// ReadPurges answers up to limit purge infos after purge seq since, and
// whether some right after since were trimmed already (a view index that
// far behind must be rebuilt: it cannot know what was purged).
func (r *Reader) ReadPurges(since uint64, limit int) ([]*pb.PurgeInfo, bool, error) {
	return r.st.readPurges(since, limit)
}

// SendUserMessage implements actor.Process: a GetDoc or GetDocInfos is
// read on the pool and answered to its sender; anything else is a dead
// letter (the actor takes every other message).
func (r *Reader) SendUserMessage(pid *actor.PID, message any) {
	_, msg, sender := actor.UnwrapEnvelope(message)
	if sender == nil {
		return
	}
	var read func() any
	switch m := msg.(type) {
	case *pb.GetDoc:
		read = func() any { d, _ := r.ReadDoc(m, nil); return d }
	case *pb.GetDocInfos:
		read = func() any { return r.ReadDocInfos(m.Ids) }
	default:
		r.sys.Root.Send(sender, &actor.DeadLetterResponse{Target: pid})
		return
	}
	r.pool.Go(func() { r.sys.Root.Send(sender, read()) })
}

// SendSystemMessage implements actor.Process: a Reader has no lifecycle
// of its own; its actor adds and removes it.
func (r *Reader) SendSystemMessage(*actor.PID, any) {}

// Stop implements actor.Process.
func (r *Reader) Stop(pid *actor.PID) { r.sys.ProcessRegistry.Remove(pid) }
