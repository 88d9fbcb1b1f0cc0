package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/replicator"
)

// schedulerName is the actor through which other nodes read this node's
// replication scheduler.
const schedulerName = "scheduler"

// askPeerTimeout bounds one member's answer to a /_scheduler fan-out: a
// member that is down costs no more.
const askPeerTimeout = 3 * time.Second

// startReplicator starts the replication scheduler: it watches _replicator
// and serves /_replicate and /_scheduler (Services.Replicator). In a
// cluster each _replicator doc is run by one live node (its owner), the
// replication ids are the cluster's (so a job that moves resumes from its
// checkpoints), and /_scheduler answers for every node.
func (n *Node) startReplicator() {
	serverUUID := n.uuid
	var owner func(string) string
	if n.cl != nil {
		sum := sha256.Sum256([]byte("settee replication id\x00" + n.cfg.Cluster.Secret))
		serverUUID = hex.EncodeToString(sum[:16])
		owner = n.replicationOwner
	}
	n.rep = replicator.Start(replicator.Config{
		System:     n.sys,
		Coord:      n.coord,
		ServerUUID: serverUUID,
		NodeName:   n.cfg.Name,
		Tasks:      n.tasks,
		Log:        n.log.With("src", "replicator"),
		Create:     n.createForReplicator,
		Owner:      owner,
		Filters:    n.replicationFilter,
		Policy:     n.pol,
		IsServerAdmin: func(name string) bool {
			return name != "" && n.ServerAdmin(name) != nil
		},
		RetryBase: n.cfg.ReplicatorRetryBase,
		// [replicator] of _config (its flags the start values), read
		// here only: a change takes effect at the next start
		ConnectionTimeout: time.Duration(n.conf.intValue("replicator", "connection_timeout")) * time.Millisecond,
		MaxJobs:           n.conf.intValue("replicator", "max_jobs"),
		MaxChurn:          n.conf.intValue("replicator", "max_churn"),
		Interval:          time.Duration(n.conf.intValue("replicator", "interval")) * time.Millisecond,
	})
	if n.cl != nil {
		props := actor.PropsFromFunc(func(ctx actor.Context) {
			if q, ok := ctx.Message().(*pb.SchedulerQuery); ok {
				sender, root := ctx.Sender(), ctx.ActorSystem().Root
				n.cl.wg.Go(func() {
					st, b := n.localScheduler(q)
					root.Send(sender, &pb.SchedulerAnswer{Status: int32(st), Json: b})
				})
			}
		})
		pid, err := n.sys.Root.SpawnNamed(props, schedulerName)
		if err != nil {
			n.log.Error("replicator: spawn scheduler endpoint", "err", err)
		}
		n.cl.sched = pid
	}
}

// replicationOwner is the live member that runs a _replicator doc: a hash
// of its id over the live members, in name order. When a node goes down
// its docs spread over the others; when it is back they return.
func (n *Node) replicationOwner(docID string) string {
	snap := n.snapshot()
	var live []string
	for _, m := range snap.members {
		if snap.isAlive(m) {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		return n.cfg.Name
	}
	return live[crc32.ChecksumIEEE([]byte(docID))%uint32(len(live))]
}

func (n *Node) localScheduler(q *pb.SchedulerQuery) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), askPeerTimeout)
	defer cancel()
	switch q.What {
	case "jobs":
		return n.rep.Jobs(ctx)
	case "doc":
		return n.rep.Docs(ctx, replicator.ReplicatorDB, q.DocId)
	default:
		return n.rep.Docs(ctx, "", "")
	}
}

// clusterScheduler answers /_scheduler for the whole cluster and starts
// transient replications here.
type clusterScheduler struct{ n *Node }

func (c clusterScheduler) Replicate(ctx context.Context, body []byte) (int, []byte) {
	return c.n.rep.Replicate(ctx, body)
}

// ask gathers the members' answers (this node's without a round trip);
// members that are down or slow are left out.
func (c clusterScheduler) ask(ctx context.Context, q *pb.SchedulerQuery) []*pb.SchedulerAnswer {
	snap := c.n.snapshot()
	var futures []*actor.Future
	for _, m := range snap.members {
		if m != snap.self && snap.alive[m] {
			futures = append(futures, c.n.sys.Root.RequestFuture(actor.NewPID(snap.addr[m], schedulerName), q, askPeerTimeout))
		}
	}
	st, b := c.n.localScheduler(q)
	out := []*pb.SchedulerAnswer{{Status: int32(st), Json: b}}
	for _, f := range futures {
		if a, err := actors.Await[*pb.SchedulerAnswer](ctx, f); err == nil {
			out = append(out, a)
		}
	}
	return out
}

func (c clusterScheduler) Jobs(ctx context.Context) (int, []byte) {
	return c.merge(ctx, &pb.SchedulerQuery{What: "jobs"}, "jobs", "id")
}

func (c clusterScheduler) Docs(ctx context.Context, db, docID string) (int, []byte) {
	switch {
	case db != "" && db != replicator.ReplicatorDB:
		return c.n.rep.Docs(ctx, db, docID) // its not-found answer
	case docID == "":
		return c.merge(ctx, &pb.SchedulerQuery{What: "docs"}, "docs", "doc_id")
	}
	// the owner answers; while a job moves, whoever still has it
	var last *pb.SchedulerAnswer
	for _, a := range c.ask(ctx, &pb.SchedulerQuery{What: "doc", DocId: docID}) {
		if a.Status == 200 {
			return 200, a.Json
		}
		last = a
	}
	return int(last.Status), last.Json
}

// merge concatenates the members' lists of field, sorted by key.
func (c clusterScheduler) merge(ctx context.Context, q *pb.SchedulerQuery, field, key string) (int, []byte) {
	var rows []map[string]any
	for _, a := range c.ask(ctx, q) {
		if a.Status != 200 {
			continue
		}
		var page map[string]json.RawMessage
		if json.Unmarshal(a.Json, &page) != nil {
			continue
		}
		var part []map[string]any
		if json.Unmarshal(page[field], &part) == nil {
			rows = append(rows, part...)
		}
	}
	slices.SortStableFunc(rows, func(a, b map[string]any) int {
		as, _ := a[key].(string)
		bs, _ := b[key].(string)
		return cmp.Compare(as, bs)
	})
	if rows == nil {
		rows = []map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"total_rows": len(rows), "offset": 0, field: rows})
	return 200, append(b, '\n')
}

// createForReplicator creates a target database (create_target) with the
// node's defaults; an existing one is fine.
func (n *Node) createForReplicator(ctx context.Context, name string) error {
	_, err := n.CreateDB(ctx, name, DBOptions{})
	if errors.Is(err, ErrDBExists) {
		return nil
	}
	return err
}

// replicationFilter is a local source's design-doc filter for a
// replication (filter and query_params): the function the source's own
// _changes?filter= would run, with a request object of its query.
func (n *Node) replicationFilter(ctx context.Context, db, filter string, query map[string]string) (func(context.Context, []byte) (bool, error), error) {
	ddocName, name, _ := strings.Cut(filter, "/")
	d, err := n.pol.Design(ctx, db, "_design/"+ddocName)
	if errors.Is(err, policy.ErrMissing) { // missing or deleted (both not_found)
		return nil, fmt.Errorf("filter %s: no design doc _design/%s", filter, ddocName)
	}
	if err != nil {
		return nil, fmt.Errorf("filter %s: %w", filter, err)
	}
	src, ok := d.Source("filters", name)
	if !ok || src == "" {
		return nil, fmt.Errorf("filter %s: missing json key: %s", filter, name)
	}
	if d.JS == nil {
		return nil, fmt.Errorf("filter %s: no JavaScript here", filter)
	}
	if query == nil {
		query = map[string]string{}
	}
	req, err := json.Marshal(map[string]any{
		"query": query, "method": "GET", "path": []string{db, "_changes"}, "headers": map[string]string{},
		"body": "undefined", "id": nil, "peer": "127.0.0.1", "form": map[string]string{}, "cookie": map[string]string{},
		"userCtx": map[string]any{"db": db, "name": nil, "roles": []string{"_admin"}}, "info": map[string]any{"db_name": db},
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, doc []byte) (bool, error) {
		out, err := d.JS.Filter(ctx, src, [][]byte{doc}, req)
		if err != nil {
			return false, err
		}
		return len(out) > 0 && out[0], nil
	}, nil
}
