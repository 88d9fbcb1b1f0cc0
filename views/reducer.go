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
