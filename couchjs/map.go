package couchjs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/settee/settee/docjson"

	"github.com/dop251/goja"
)

// Emit is one emitted row: key and value as JSON, numbers as CouchDB
// prints them.
type Emit struct{ Key, Value []byte }

// MapSet is the map functions of one index; safe for concurrent use.
// Its functions are compiled and made into function values in each
// worker runtime that runs it, once.
type MapSet struct {
	sb   *DDoc // where it runs
	id   uint64
	srcs []string
	lib  []byte // {"views":{"lib":...}}, what require() resolves against
}

// setState is a MapSet made into function values in one runtime, with
// its module cache (couchjs keeps one per compiled function for the life
// of the process; here it lives as long as the runtime keeps the set).
type setState struct {
	fns *goja.Object // JS array of functions
}

const maxCachedSets = 256

// NewMapSet compiles the map functions of one index. lib is the design
// doc's views.lib (may be nil), what require("views/lib/...") reads. The
// set runs in a sandbox of its own (the server uses a Sandbox's
// NewMapSet).
func (p *Pool) NewMapSet(fns []string, lib map[string]any) (*MapSet, error) {
	sb := p.Sandbox("mapset", strconv.FormatUint(p.seq.Add(1), 10))
	sb.class = ""
	return sb.NewMapSet(fns, lib)
}

// NewMapSet is Pool.NewMapSet in this sandbox.
func (d *DDoc) NewMapSet(fns []string, lib map[string]any) (*MapSet, error) {
	root := map[string]any{"views": map[string]any{"lib": lib}}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("couchjs: views.lib: %w", err)
	}
	m := &MapSet{sb: d, id: d.p.seq.Add(1), srcs: fns, lib: b}
	// Evaluate each source once now, so a source that is not a function
	// fails here as it fails CouchDB's add_fun.
	if _, err := d.p.call(context.Background(), d, m.request(kMapSet, nil), nil); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *MapSet) request(kind byte, docs [][]byte) *request {
	return &request{kind: kind, srcs: m.srcs, set: m.id, lib: m.lib, a: docs}
}

// mapState is the set's functions in this runtime.
func (v *vm) mapState(req *request) (*setState, error) {
	if st, ok := v.sets[req.set]; ok {
		return st, nil
	}
	ddoc, err := v.parse(goja.Undefined(), v.rt.ToValue(string(req.lib)))
	if err != nil {
		return nil, v.exception(err)
	}
	reqFn, err := v.makeRequire(goja.Undefined(), ddoc, v.rt.NewObject())
	if err != nil {
		return nil, v.exception(err)
	}
	vals := make([]any, len(req.srcs))
	for i, src := range req.srcs {
		c, err := v.e.program(src)
		if err != nil {
			return nil, err
		}
		f, err := v.function(c, reqFn)
		if err != nil {
			return nil, err
		}
		vals[i] = f
	}
	if len(v.sets) >= maxCachedSets {
		clear(v.sets)
	}
	st := &setState{fns: v.rt.NewArray(vals...)}
	v.sets[req.set] = st
	return st, nil
}

// MapDoc runs every map function on one doc (its JSON with _id, _rev and
// whatever else the caller includes). out[i] holds view i's emits, nil
// when function i threw (logged; CouchDB leaves the doc out of that
// view). The error is for the doc as a whole, as CouchDB fails the index
// update: a function that threw "fatal_error" (map_runtime_error) or
// ["fatal", code, reason], an emitted value JSON cannot hold (a cycle:
// TypeError), a timeout or a worker that died (os_process_error).
func (m *MapSet) MapDoc(ctx context.Context, doc []byte) ([][]Emit, error) {
	out, err := m.MapDocs(ctx, [][]byte{doc})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// MapDocs is MapDoc over many docs in one call to one worker; Timeout
// bounds each doc.
func (m *MapSet) MapDocs(ctx context.Context, docs [][]byte) ([][][]Emit, error) {
	res, err := m.sb.p.call(ctx, m.sb, m.request(kMap, docs), nil)
	if err != nil {
		return nil, err
	}
	if len(res.out) != len(docs) {
		return nil, fmt.Errorf("couchjs: %d answers for %d docs", len(res.out), len(docs))
	}
	out := make([][][]Emit, len(docs))
	for d, b := range res.out {
		if out[d], err = decodeEmits(b, len(m.srcs)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// trimJSON drops the white space around a JSON value.
func trimJSON(b []byte) []byte {
	i := docjson.SkipWS(b, 0)
	j := len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

// splitPair splits JSON.stringify's "[key,value]".
func splitPair(b []byte) (k, v []byte, err error) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, nil, fmt.Errorf("couchjs: emitted pair %q", b)
	}
	e := docjson.SkipValue(b, 1)
	if e < 0 || e >= len(b)-1 || b[e] != ',' {
		return nil, nil, fmt.Errorf("couchjs: emitted pair %q", b)
	}
	return b[1:e], b[e+1 : len(b)-1], nil
}
