package views

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/mango"
)

// mapper is an index's map side: per doc, per view, the rows it emits.
// JavaScript views have a couchjs.MapSet, Mango indexes a queryMaps.
type mapper interface {
	MapDocs(ctx context.Context, docs [][]byte) ([][][]couchjs.Emit, error)
}

// queryMaps is the map side of a Mango index (a design doc with
// "language": "query"), in Go, as CouchDB's mango_native_proc: a json
// index's view emits, for a doc that has every one of its fields (and
// matches its partial_filter_selector, if any), the fields' values in the
// index's order as the key, and null (mango.Index.Keys).
type queryMaps struct {
	views []*mango.Index
	// need is the members the indexes read (their fields', their
	// partial filters', _id): only those are decoded of each doc
	need map[string]bool
}

func newQueryMaps(def *Def) (*queryMaps, error) {
	q := &queryMaps{views: make([]*mango.Index, len(def.Views))}
	for i, v := range def.Views {
		ix, err := mango.ParseIndexView(def.ID, v.Name, []byte(v.Map), def.Options)
		if err != nil {
			return nil, fmt.Errorf("views: mango index %s: %w", v.Name, err)
		}
		q.views[i] = ix
	}
	q.need = map[string]bool{"_id": true}
	for _, ix := range q.views {
		for _, f := range ix.Fields {
			q.need[mango.FieldPath(f.Name)[0]] = true
		}
		if ix.PartialFilter != nil {
			pf := mango.SelectorFields(ix.PartialFilter, nil)
			if pf == nil {
				q.need = nil // a filter on the whole doc: decode it whole
				break
			}
			for k := range pf {
				q.need[k] = true
			}
		}
	}
	return q, nil
}

// MapDocs implements mapper. A doc that is not a JSON object emits
// nothing.
func (q *queryMaps) MapDocs(ctx context.Context, docs [][]byte) ([][][]couchjs.Emit, error) {
	out := make([][][]couchjs.Emit, len(docs))
	for d, raw := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		doc, ok := mango.DecodeFields(raw, q.need)
		if !ok {
			continue
		}
		out[d] = make([][]couchjs.Emit, len(q.views))
		for v, ix := range q.views {
			key, ok := ix.Keys(doc)
			if !ok {
				continue
			}
			b, err := json.Marshal(key)
			if err != nil {
				continue
			}
			out[d][v] = []couchjs.Emit{{Key: b, Value: []byte("null")}}
		}
	}
	return out, nil
}
