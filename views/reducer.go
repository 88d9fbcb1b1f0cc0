package views

import (
	"context"
	"strings"

	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/reduce"
)

// Reducer reduces and rereduces a view's rows: a builtin in Go, or the
// view's JavaScript.
type Reducer struct {
	builtin reduce.Builtin
	js      *couchjs.DDoc
	src     string
}

func newReducer(js *couchjs.DDoc, src string) (*Reducer, error) { return NewReducer(js, src) }

// NewReducer is the reducer of a view's reduce source; JavaScript runs in
// the sandbox js (JSSandbox: the one of the view's map functions).
func NewReducer(js *couchjs.DDoc, src string) (*Reducer, error) {
	if strings.HasPrefix(strings.TrimSpace(src), "_") {
		b, ok := reduce.Lookup(strings.TrimSpace(src))
		if !ok {
			return nil, &DesignError{"invalid_design_doc", "`" + strings.TrimSpace(src) + "` is not a supported reduce function."}
		}
		return &Reducer{builtin: b}, nil
	}
	return &Reducer{js: js, src: src}, nil
}

// reduce reduces rows: keys are [key, docid] JSON arrays.
func (r *Reducer) reduce(ctx context.Context, keys, values [][]byte) ([]byte, error) {
	if r.builtin != nil {
		return r.builtin.Reduce(keys, values)
	}
	return r.js.Reduce(ctx, r.src, keys, values, false)
}

// rereduce combines reductions.
func (r *Reducer) rereduce(ctx context.Context, reds [][]byte) ([]byte, error) {
	if r.builtin != nil {
		return r.builtin.Rereduce(reds)
	}
	return r.js.Reduce(ctx, r.src, nil, reds, true)
}

// Rereduce combines reductions of several copies (the coordinator's
// merge).
func (r *Reducer) Rereduce(ctx context.Context, reds [][]byte) ([]byte, error) {
	return r.rereduce(ctx, reds)
}

// A grouped query reduces the groups of a page in batches (a JavaScript
// reduce in one worker call per batch, not one per group: each call is a
// round trip to a worker process): a batch is sent when it holds
// ReduceBatchGroups groups or ReduceBatchBytes of rows, so what waits to
// be reduced stays bounded and the rows still stream, a batch at a time.
const (
	ReduceBatchGroups = 256
	ReduceBatchBytes  = 1 << 20
)

// BatchGroups is how many groups to gather before reducing them:
// ReduceBatchGroups for JavaScript, 1 for a builtin (which costs no
// round trip, so its groups go out as they close).
func (r *Reducer) BatchGroups() int {
	if r.builtin != nil {
		return 1
	}
	return ReduceBatchGroups
}

// reduceGroups reduces each group's rows (keys [key, docid] JSON arrays
// for JavaScript, the emitted keys for a builtin): out[g] is what reduce
// answers for group g.
func (r *Reducer) reduceGroups(ctx context.Context, groups []couchjs.ReduceGroup) ([][]byte, error) {
	if r.builtin == nil {
		return r.js.ReduceBatch(ctx, r.src, groups, false)
	}
	out := make([][]byte, len(groups))
	for i, g := range groups {
		red, err := r.builtin.Reduce(g.Keys, g.Values)
		if err != nil {
			return nil, err
		}
		out[i] = red
	}
	return out, nil
}

// RereduceGroups combines each group's reductions (the coordinator's
// merge of groups several ranges have, a page's groups read a chunk at a
// time): out[g] is what Rereduce answers for groups[g].
func (r *Reducer) RereduceGroups(ctx context.Context, groups [][][]byte) ([][]byte, error) {
	if r.builtin == nil {
		gs := make([]couchjs.ReduceGroup, len(groups))
		for i, reds := range groups {
			gs[i].Values = reds
		}
		return r.js.ReduceBatch(ctx, r.src, gs, true)
	}
	out := make([][]byte, len(groups))
	for i, reds := range groups {
		red, err := r.builtin.Rereduce(reds)
		if err != nil {
			return nil, err
		}
		out[i] = red
	}
	return out, nil
}

// Final turns a reduction into what a client sees (a builtin may keep
// more inside the index than it shows, as _approx_count_distinct's sketch).
func (r *Reducer) Final(red []byte) ([]byte, error) {
	if r.builtin != nil {
		return r.builtin.Final(red)
	}
	return red, nil
}

// JSSandbox is the JavaScript sandbox of the index def of database db: its
// map functions and its reduces, on every copy and in the coordinator's
// rereduce, run there, apart from every other index's and design doc's
// (couchjs.DDoc says why). Design docs of one database whose indexes are
// the same (Def.Sig) share it, as they share the index. nil for a nil
// pool.
func JSSandbox(js *couchjs.Pool, db string, def *Def) *couchjs.DDoc {
	return js.Sandbox(db, "views", def.SigHex())
}
