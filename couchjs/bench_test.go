package couchjs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// benchDoc builds a doc of about size bytes: a few scalars up front, then
// nested objects, arrays and text, as stored docs look.
func benchDoc(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"_id":"doc-000123","_rev":"3-0123456789abcdef0123456789abcdef","type":"order","total":1234.5`)
	for i := 0; b.Len() < size-200; i++ {
		fmt.Fprintf(&b, `,"field%d":{"name":"item %d","tags":["a","b","c"],"qty":%d,"price":%d.25,"note":"lorem ipsum dolor sit amet, consectetur adipiscing elit","ok":true}`, i, i, i, i)
	}
	b.WriteString(`,"status":"shipped"}`)
	return []byte(b.String())
}

const twoFields = `function(doc) { if (doc.type === 'order') emit(doc.status, doc.total); }`

// BenchmarkDocAccess compares ways to hand a doc to a map function that
// reads two fields: (a) JSON.parse in the runtime plus couchjs's deep
// freeze, (a') JSON.parse without the freeze, (b) encoding/json into a Go
// map and goja's ToValue, (c) the lazy read-only view (what MapDocs uses).
func BenchmarkDocAccess(b *testing.B) {
	for _, size := range []int{1 << 10, 14700} {
		doc := benchDoc(size)
		// in process, on a worker's engine: the doc's way into a runtime
		e := newEngine(workerConfig{timeout: time.Minute}, nil)
		v, err := newVM(e, "bench")
		if err != nil {
			b.Fatal(err)
		}
		st, err := v.mapState(&request{kind: kMap, srcs: []string{twoFields}, set: 1, lib: []byte(`{"views":{"lib":null}}`)})
		if err != nil {
			b.Fatal(err)
		}
		freeze, err := v.rt.RunString(`(function deepFreeze(o) { if (Object.isFrozen(o)) return o; Object.freeze(o);
			var ks = Object.getOwnPropertyNames(o); for (var i = 0; i < ks.length; i++) { var x = o[ks[i]]; if (x && typeof x === "object") deepFreeze(x); } return o; })`)
		if err != nil {
			b.Fatal(err)
		}
		freezeFn, _ := goja.AssertFunction(freeze)
		run := func(b *testing.B, mk func() goja.Value) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				res, err := v.mapDoc(goja.Undefined(), st.fns, mk())
				if err != nil {
					b.Fatal(err)
				}
				enc, err := appendEmits(nil, res.(*goja.Object), 1)
				if err != nil {
					b.Fatal(err)
				}
				out, err := decodeEmits(enc, 1)
				if err != nil || len(out[0]) != 1 {
					b.Fatal(out, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		}
		name := fmt.Sprintf("%dB", len(doc))
		b.Run(name+"/a_JSON.parse+freeze", func(b *testing.B) {
			run(b, func() goja.Value {
				d, err := v.parse(goja.Undefined(), v.rt.ToValue(string(doc)))
				if err != nil {
					b.Fatal(err)
				}
				d, _ = freezeFn(goja.Undefined(), d)
				return d
			})
		})
		b.Run(name+"/a_JSON.parse", func(b *testing.B) {
			run(b, func() goja.Value {
				d, err := v.parse(goja.Undefined(), v.rt.ToValue(string(doc)))
				if err != nil {
					b.Fatal(err)
				}
				return d
			})
		})
		b.Run(name+"/b_gomap_ToValue", func(b *testing.B) {
			run(b, func() goja.Value {
				var m map[string]any
				if err := json.Unmarshal(doc, &m); err != nil {
					b.Fatal(err)
				}
				return v.rt.ToValue(m)
			})
		})
		b.Run(name+"/c_lazy", func(b *testing.B) {
			run(b, func() goja.Value { return newLazy(v.rt, &lazySrc{}, doc) })
		})
	}
}

// BenchmarkMapDocs is the indexer's path: batches of 100 docs, two
// functions.
func BenchmarkMapDocs(b *testing.B) {
	for _, size := range []int{1 << 10, 14700} {
		doc := benchDoc(size)
		docs := make([][]byte, 100)
		for i := range docs {
			docs[i] = doc
		}
		b.Run(fmt.Sprintf("%dB", len(doc)), func(b *testing.B) {
			p := New(Config{MaxWorkers: 1})
			defer p.Close()
			m, err := p.NewMapSet([]string{twoFields, `function(doc) { emit([doc.type, doc._id], null); }`}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(doc) * len(docs)))
			for b.Loop() {
				if _, err := m.MapDocs(context.Background(), docs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(docs))/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkMapDocsEngine is BenchmarkMapDocs on a worker's engine in
// process: what the batch costs without the pipe and the second process.
func BenchmarkMapDocsEngine(b *testing.B) {
	for _, size := range []int{1 << 10, 14700} {
		doc := benchDoc(size)
		docs := make([][]byte, 100)
		for i := range docs {
			docs[i] = doc
		}
		b.Run(fmt.Sprintf("%dB", len(doc)), func(b *testing.B) {
			e := newEngine(workerConfig{timeout: time.Minute, maxMemory: 1 << 30}, nil)
			req := &request{kind: kMap, key: "k", srcs: []string{twoFields, `function(doc) { emit([doc.type, doc._id], null); }`}, set: 1,
				lib: []byte(`{"views":{"lib":null}}`), a: docs}
			b.SetBytes(int64(len(doc) * len(docs)))
			for b.Loop() {
				req.seq++
				if res := e.serve(req); res.status != rOK {
					b.Fatal(res.reason)
				}
			}
			b.ReportMetric(float64(b.N*len(docs))/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkReduceCall is one small call, a round trip to a worker: what
// a group=true query with a JavaScript reduce pays per group.
func BenchmarkReduceCall(b *testing.B) {
	p := New(Config{MaxWorkers: 1})
	defer p.Close()
	sb := p.Sandbox("db", "views", "x")
	vals := [][]byte{[]byte("1"), []byte("2")}
	keys := [][]byte{[]byte(`["a","d1"]`), []byte(`["b","d2"]`)}
	for b.Loop() {
		if _, err := sb.Reduce(context.Background(), `function(k, v, re) { return sum(v); }`, keys, vals, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReduceBatch is BenchmarkReduceCall's reduce over 256 groups
// in one call (a page's batch): the cost per group.
func BenchmarkReduceBatch(b *testing.B) {
	p := New(Config{MaxWorkers: 1})
	defer p.Close()
	sb := p.Sandbox("db", "views", "x")
	groups := make([]ReduceGroup, 256)
	for i := range groups {
		groups[i] = ReduceGroup{Keys: [][]byte{[]byte(`["a","d1"]`), []byte(`["b","d2"]`)}, Values: [][]byte{[]byte("1"), []byte("2")}}
	}
	for b.Loop() {
		if _, err := sb.ReduceBatch(context.Background(), `function(k, v, re) { return sum(v); }`, groups, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(groups))/1e3, "µs/group")
}
