package replicator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/settee/settee/proto"
)

// fetchChunk is how many revs one _bulk_get asks for at most; fetchBytes
// is what a worker aims to hold of one answer: after docs averaging more
// than fetchBytes/fetchChunk (80 KB, e.g. with attachments) it asks for
// fewer at a time, down to one. Its first fetch, sizes unknown, asks for
// firstChunk.
const (
	fetchChunk = 100
	fetchBytes = 8 << 20
	firstChunk = 10
)

// reader reads the source's changes and hands them to the job a page at a
// time, as requests; it hands on the next page only when the job acks (the
// job acks while its queue of batches is short). Until it has caught up it
// reads one feed without a limit (Endpoint.Feed), which a goroutine parses
// a page ahead while the job works; a continuous job then long-polls for
// pages.
type reader struct {
	job      *actor.PID
	cfg      *jobConfig
	since    string
	limit    int
	caughtUp bool
	// feed brings the pages of the running feed (nil: none running).
	feed chan feedItem
	// stopFeed ends the feed's goroutine, and feeding counts it until it
	// has returned: the reader does not stop before it.
	stopFeed context.CancelFunc
	feeding  sync.WaitGroup
}

// feedItem is a page of a feed, or the error that ended it.
type feedItem struct {
	page *ChangesPage
	err  error
}

func (r *reader) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *pb.RepAck:
		ctx.Send(ctx.Self(), readNext{})
	case readNext:
		r.read(ctx)
	case *actor.Stopped:
		if r.stopFeed != nil {
			r.stopFeed()
		}
		r.feeding.Wait()
	}
}

func (r *reader) read(ctx actor.Context) {
	if !r.caughtUp {
		r.readFeed(ctx)
		return
	}
	c := r.cfg.ctx
	q := ChangesQuery{Since: r.since, Limit: r.limit, DocIDs: r.cfg.rep.DocIDs, Selector: r.cfg.rep.Selector,
		Filter: r.cfg.rep.Filter, QueryParams: r.cfg.rep.QueryParams, Wait: true,
		Timeout: int(longpollTimeout(r.cfg.connTimeout).Milliseconds())}
	p, err := r.cfg.source.Changes(c, q)
	if c.Err() != nil {
		return
	}
	if err != nil {
		ctx.Request(r.job, &pb.RepChangesPage{Error: &pb.Error{Code: "changes", Reason: err.Error()}})
		return
	}
	if !hasSeq(p.LastSeq) {
		if n := len(p.Rows); n > 0 {
			p.LastSeq = p.Rows[n-1].Seq
		} else {
			p.LastSeq = r.since
		}
	}
	// a full page: more may follow at once, read as a feed
	r.caughtUp = !(r.limit > 0 && len(p.Rows) >= r.limit)
	r.since = p.LastSeq
	// nothing new: the job acks at once, the next read long-polls
	ctx.Request(r.job, &pb.RepChangesPage{Changes: p.Rows, LastSeq: p.LastSeq, Pending: p.Pending})
}

// longpollTimeout is the timeout a caught-up job's longpoll asks the
// source for: the source answers an empty page by then, so a healthy idle
// source is never silent for connection_timeout. CouchDB's replicator asks
// for max(1 s, connection_timeout/3); below 2 s of connection_timeout the
// floor gives way to half of it, so the source still has time to answer.
func longpollTimeout(connTimeout time.Duration) time.Duration {
	if connTimeout <= 0 {
		connTimeout = DefaultConnectionTimeout
	}
	return max(min(time.Second, connTimeout/2), connTimeout/3, time.Millisecond)
}

// readFeed hands on the next page of the feed, starting it if none runs.
func (r *reader) readFeed(ctx actor.Context) {
	c := r.cfg.ctx
	if r.feed == nil {
		ch := make(chan feedItem, 1)
		r.feed = ch
		src, size := r.cfg.source, r.limit
		// a seq per batch is all the job needs (batches are cut from pages
		// of whole batches, so each ends on a row with a seq)
		q := ChangesQuery{Since: r.since, DocIDs: r.cfg.rep.DocIDs, Selector: r.cfg.rep.Selector,
			Filter: r.cfg.rep.Filter, QueryParams: r.cfg.rep.QueryParams, SeqInterval: r.cfg.rep.WorkerBatchSize}
		fc, stop := context.WithCancel(c)
		r.stopFeed = stop
		r.feeding.Go(func() {
			send := func(it feedItem) error {
				select {
				case ch <- it:
					return nil
				case <-fc.Done():
					return fc.Err()
				}
			}
			if err := src.Feed(fc, q, size, func(p *ChangesPage) error { return send(feedItem{page: p}) }); err != nil {
				_ = send(feedItem{err: err})
			}
		})
	}
	var it feedItem
	select {
	case it = <-r.feed:
	case <-c.Done():
		return
	}
	if it.err != nil {
		if c.Err() == nil {
			ctx.Request(r.job, &pb.RepChangesPage{Error: &pb.Error{Code: "changes", Reason: it.err.Error()}})
		}
		return
	}
	p := it.page
	if !hasSeq(p.LastSeq) {
		p.LastSeq = r.since
	}
	r.since = p.LastSeq
	done := false
	if p.End {
		// the goroutine returns after the last page; its context goes
		r.feed = nil
		r.stopFeed()
		r.stopFeed = nil
		if r.cfg.rep.Continuous {
			r.caughtUp = true
		} else {
			done = true
		}
	}
	ctx.Request(r.job, &pb.RepChangesPage{Changes: p.Rows, LastSeq: p.LastSeq, Pending: p.Pending, Done: done})
}

// worker takes a batch of changes, asks the target which revs it lacks,
// fetches those from the source and casts each doc into its batcher; at
// the end of the round it sends one flush request and reports the batch
// when the batcher answers (seed 001: no call per doc). It tells the job
// it can take the next batch (RepAck) as soon as the flush is sent, so it
// fetches batch k+1 while its batcher writes batch k; with two flushes
// unanswered it waits for the first before it asks for more, so a slow
// target still slows the fetching.
type worker struct {
	job     *actor.PID
	batcher *actor.PID
	cfg     *jobConfig
	// flushing are the batches whose flush is unanswered, oldest first.
	flushing []flushing
	// held: the worker owes the job a RepAck (it had two flushes out).
	held bool
	// docBytes is the running average size of the docs fetched (0: none
	// yet), which sizes the next fetch.
	docBytes int
}

// flushing is a batch fetched and handed to the batcher, not yet written.
type flushing struct {
	ordinal uint64
	stats   *pb.RepStats
}

// maxFlushing is how many flushes a worker leaves unanswered before it
// waits: the batch being written and the one fetched behind it.
const maxFlushing = 2

// chunk is how many revs the next fetch asks for.
func (w *worker) chunk() int {
	if w.docBytes == 0 {
		return firstChunk
	}
	return max(1, min(fetchChunk, fetchBytes/w.docBytes))
}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.RepChangeBatch:
		stats := &pb.RepStats{}
		if err := w.round(ctx, m, stats); err != nil {
			if w.cfg.ctx.Err() != nil {
				return
			}
			ctx.Request(w.job, &pb.RepBatchDone{Ordinal: m.Ordinal, Error: &pb.Error{Code: "worker", Reason: err.Error()}})
			return
		}
		ctx.Request(w.batcher, &pb.RepFlush{})
		w.flushing = append(w.flushing, flushing{ordinal: m.Ordinal, stats: stats})
		if len(w.flushing) < maxFlushing {
			ctx.Request(w.job, &pb.RepAck{})
		} else {
			w.held = true
		}
	case *pb.RepFlushReply:
		if len(w.flushing) == 0 {
			return
		}
		f := w.flushing[0]
		w.flushing = w.flushing[1:]
		done := &pb.RepBatchDone{Ordinal: f.ordinal}
		if m.Error != nil {
			done.Error = m.Error
		} else {
			f.stats.DocsWritten = m.DocsWritten
			f.stats.DocWriteFailures = m.DocWriteFailures
			done.Stats = f.stats
		}
		ctx.Request(w.job, done)
		if w.held && m.Error == nil {
			w.held = false
			ctx.Request(w.job, &pb.RepAck{})
		}
	}
}

func (w *worker) round(ctx actor.Context, b *pb.RepChangeBatch, stats *pb.RepStats) error {
	c := w.cfg.ctx
	revs := make(map[string][]string, len(b.Changes))
	for _, ch := range b.Changes {
		revs[ch.Id] = append(revs[ch.Id], ch.Revs...)
		stats.MissingChecked += uint64(len(ch.Revs))
	}
	diff, err := w.cfg.target.RevsDiff(c, revs)
	if err != nil {
		return fmt.Errorf("target _revs_diff: %w", err)
	}
	var items []FetchItem
	for _, ch := range b.Changes {
		d, ok := diff[ch.Id]
		if !ok {
			continue
		}
		delete(diff, ch.Id) // an id twice in a batch is fetched once
		for _, rev := range d.Missing {
			items = append(items, FetchItem{ID: ch.Id, Rev: rev, AttsSince: d.Ancestors})
		}
	}
	stats.MissingFound = uint64(len(items))
	// a source that took filter=_selector matched the changes already;
	// this check stays for one that did not, and for a rev that changed
	// between the feed and the fetch (latest=true)
	sel := w.cfg.rep.selector
	emit := func(id string, doc []byte) {
		if sel != nil && !sel.MatchJSON(doc) {
			return
		}
		stats.DocsRead++
		if w.docBytes == 0 {
			w.docBytes = len(doc)
		} else {
			w.docBytes += (len(doc) - w.docBytes) / 8
		}
		ctx.Send(w.batcher, &pb.RepDoc{Id: id, Json: doc})
	}
	for len(items) > 0 {
		n := min(w.chunk(), len(items))
		fs, err := w.cfg.source.Fetch(c, items[:n], emit)
		stats.BulkGetAttempts += fs.BulkGetAttempts
		stats.BulkGetDocs += fs.BulkGetDocs
		if err != nil {
			return fmt.Errorf("source fetch: %w", err)
		}
		items = items[n:]
	}
	return nil
}

// batcher collects the docs its worker casts and writes them with
// _bulk_docs new_edits=false at worker_batch_size docs or 4 MB, and on
// flush. A write error is held and answered to the next flush, so nothing
// that failed is counted as written.
type batcher struct {
	target   Endpoint
	ctx      context.Context
	size     int
	docs     [][]byte
	bytes    int
	written  uint64
	failures uint64
	err      error
}

func (b *batcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.RepDoc:
		b.docs = append(b.docs, m.Json)
		b.bytes += len(m.Json)
		if len(b.docs) >= b.size || b.bytes >= maxBatchBytes {
			b.write()
		}
	case *pb.RepFlush:
		b.write()
		r := &pb.RepFlushReply{DocsWritten: b.written, DocWriteFailures: b.failures}
		if b.err != nil {
			r.Error = &pb.Error{Code: "write", Reason: "target _bulk_docs: " + b.err.Error()}
		}
		b.written, b.failures, b.err = 0, 0, nil
		ctx.Respond(r)
	}
}

func (b *batcher) write() {
	if len(b.docs) == 0 {
		return
	}
	docs := b.docs
	b.docs, b.bytes = nil, 0
	if b.err != nil {
		return
	}
	failed, err := b.target.BulkDocs(b.ctx, docs)
	if err != nil {
		b.err = err
		return
	}
	b.failures += uint64(failed)
	b.written += uint64(len(docs) - failed)
}
