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
	_, ranges, err := c.lookup(ctx, db)
	if err != nil {
		return nil, err
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
	for r, idx := range per {
		if len(idx) == 0 {
			continue
		}
		req := &pb.GetDocs{Docs: make([]*pb.GetDoc, len(idx))}
		for j, i := range idx {
			req.Docs[j] = ms[i]
		}
		futures[r] = c.root.RequestFuture(c.pl.PID(c.copies(ranges[r])[0]), req, to)
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
		if f == nil {
			continue
		}
		res, err := actors.Await[*pb.DocsReply](ctx, f)
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
	return out, nil
}
