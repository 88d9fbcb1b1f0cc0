package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// DocResult is one doc of GetDocs: GetDoc's reply or its error.
type DocResult struct {
	Reply *pb.DocReply
	Err   error
}

// getDocsParallel bounds the docs GetDocs reads one by one at a time.
const getDocsParallel = 16

// GetDocs reads many docs (_bulk_get) with the default read quorum. The
// docs of a range whose only copy is on this node go to it as one GetDocs
// request; the others are read one by one as GetDoc reads them (r copies
// compared, each answer of bounded size across nodes), up to 16 at a time.
// Results are parallel to ms.
func (c *Coordinator) GetDocs(ctx context.Context, db string, ms []*pb.GetDoc) ([]DocResult, error) {
	out, _, err := c.GetDocsInto(ctx, db, ms, nil)
	return out, err
}

// GetDocsInto is GetDocs with a buffer for the docs asked rendered
// (GetDoc.render): those of this node's copies are appended to buf
// rather than each allocated, and their DocReply.Rendered are parts of
// it. It returns the grown buf, which the caller may reuse once it is
// done with the results. A range whose only copy is here is read on
// this goroutine, its docs from one snapshot.
func (c *Coordinator) GetDocsInto(ctx context.Context, db string, ms []*pb.GetDoc, buf []byte) ([]DocResult, []byte, error) {
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, buf, err
	}
	out := make([]DocResult, len(ms))
	per := make([][]int, len(ranges))
	var single []int // docs read one by one
	self := c.pl.Self()
	for i, m := range ms {
		r := RangeOf(ranges, m.Id)
		if cps := c.copies(ranges[r]); len(cps) == 1 && cps[0].Node == self {
			per[r] = append(per[r], i)
		} else {
			single = append(single, i)
		}
	}
	to := actors.Timeout(ctx)
	futures := make([]*actor.Future, len(ranges))
	local := make([]*pb.DocsReply, len(ranges))
	readers := make([]LocalReader, len(ranges))
	reqs := make([]*pb.GetDocs, len(ranges))
	for r, idx := range per {
		if len(idx) == 0 {
			continue
		}
		req := &pb.GetDocs{Docs: make([]*pb.GetDoc, len(idx))}
		for j, i := range idx {
			req.Docs[j] = ms[i]
		}
		ref := c.copies(ranges[r])[0]
		if lr := c.localReader(ref); lr != nil {
			readers[r], reqs[r] = lr, req
			continue
		}
		futures[r] = c.root.RequestFuture(c.pl.PID(ref), req, to)
	}
	// no hand-off to the actor and back for docs that are here; read
	// once the other nodes are asked
	for r, lr := range readers {
		if lr != nil {
			local[r], buf = lr.ReadDocs(reqs[r].Docs, buf)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, getDocsParallel)
	for _, i := range single {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].Reply, out[i].Err = c.GetDoc(ctx, db, ms[i])
		}()
	}
	for r, f := range futures {
		res, err := local[r], error(nil)
		switch {
		case res != nil:
		case f == nil:
			continue
		default:
			res, err = actors.Await[*pb.DocsReply](ctx, f)
		}
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err == nil && len(res.Docs) != len(per[r]) {
			err = fmt.Errorf("%d answers to %d docs", len(res.Docs), len(per[r]))
		}
		for j, i := range per[r] {
			switch {
			case err != nil:
				out[i].Err = fmt.Errorf("coordinator: get %q: %w", ms[i].Id, err)
			case res.Docs[j].Error != nil:
				out[i].Err = res.Docs[j].Error
			default:
				out[i].Reply = res.Docs[j]
			}
		}
	}
	wg.Wait()
	return out, buf, nil
}
