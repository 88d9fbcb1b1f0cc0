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

// MapSet is the map functions of one index, compiled once; safe for
// concurrent use.
type MapSet struct {
	sb  *DDoc // where it runs
	fns []*compiled
	lib []byte // {"views":{"lib":...}}, what require() resolves against
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
// set runs in a sandbox of its own (the server uses DDoc.NewMapSet).
func (p *Pool) NewMapSet(fns []string, lib map[string]any) (*MapSet, error) {
	return p.Sandbox("mapset", strconv.FormatUint(p.seq.Add(1), 10)).NewMapSet(fns, lib)
}

// NewMapSet is Pool.NewMapSet in this sandbox.
func (d *DDoc) NewMapSet(fns []string, lib map[string]any) (*MapSet, error) {
	p := d.p
	m := &MapSet{sb: d}
	root := map[string]any{"views": map[string]any{"lib": lib}}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("couchjs: views.lib: %w", err)
	}
	m.lib = b
	for _, src := range fns {
		c, err := p.program(src)
		if err != nil {
			return nil, err
		}
		m.fns = append(m.fns, c)
	}
	// Evaluate each source once now, so a source that is not a function
	// fails here as it fails CouchDB's add_fun.
	if err := p.with(context.Background(), d, func(v *vm) error {
		_, err := v.mapState(m)
		return err
	}); err != nil {
		return nil, err
	}
	return m, nil
}

func (v *vm) mapState(m *MapSet) (*setState, error) {
	if st, ok := v.sets[m]; ok {
		return st, nil
	}
	ddoc, err := v.parse(goja.Undefined(), v.rt.ToValue(string(m.lib)))
	if err != nil {
		return nil, v.exception(err)
	}
	req, err := v.makeRequire(goja.Undefined(), ddoc, v.rt.NewObject())
	if err != nil {
		return nil, v.exception(err)
	}
	vals := make([]any, len(m.fns))
	for i, c := range m.fns {
		f, err := v.function(c, req)
		if err != nil {
			return nil, err
		}
		vals[i] = f
	}
	if len(v.sets) >= maxCachedSets {
		clear(v.sets)
	}
	st := &setState{fns: v.rt.NewArray(vals...)}
	v.sets[m] = st
	return st, nil
}

// MapDoc runs every map function on one doc (its JSON with _id, _rev and
// whatever else the caller includes). out[i] holds view i's emits, nil
// when function i threw (logged; CouchDB leaves the doc out of that
// view). The error is for the doc as a whole, as CouchDB fails the index
// update: a function that threw "fatal_error" (map_runtime_error) or
// ["fatal", code, reason], an emitted value JSON cannot hold (a cycle:
// TypeError), a timeout (os_process_error).
func (m *MapSet) MapDoc(ctx context.Context, doc []byte) ([][]Emit, error) {
	out, err := m.MapDocs(ctx, [][]byte{doc})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// MapDocs is MapDoc over many docs with one runtime checkout; Timeout
// bounds each doc.
func (m *MapSet) MapDocs(ctx context.Context, docs [][]byte) ([][][]Emit, error) {
	out := make([][][]Emit, len(docs))
	err := m.sb.p.with(ctx, m.sb, func(v *vm) error {
		st, err := v.mapState(m)
		if err != nil {
			return err
		}
		for d, doc := range docs {
			v.heartbeat()
			res, err := v.mapDoc(goja.Undefined(), st.fns, newLazy(v.rt, trimJSON(doc)))
			if err != nil {
				return v.exception(err)
			}
			out[d], err = collectEmits(res.(*goja.Object), len(m.fns))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// collectEmits reads mapDoc's answer: per function null, or an array of
// "[key,value]" JSON strings.
func collectEmits(res *goja.Object, n int) ([][]Emit, error) {
	out := make([][]Emit, n)
	for i := range n {
		kvs, ok := res.Get(itoa(i)).(*goja.Object)
		if !ok {
			continue
		}
		l := int(kvs.Get("length").ToInteger())
		emits := make([]Emit, l)
		for j := range l {
			pair := couchNumbers([]byte(kvs.Get(itoa(j)).String()))
			k, val, err := splitPair(pair)
			if err != nil {
				return nil, err
			}
			emits[j] = Emit{Key: k, Value: val}
		}
		out[i] = emits
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
