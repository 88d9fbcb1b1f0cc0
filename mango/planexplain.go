package mango

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Explain returns the index and mrargs objects of CouchDB's _explain for
// this plan, keys in CouchDB's order (the sentinels printed "<MAX>", as
// CouchDB prints them). With no index, index is null and mrargs nil:
// CouchDB then prints neither mrargs nor covering.
func (p *QueryPlan) Explain() (index, mrargs json.RawMessage) {
	if p.Index == nil {
		return json.RawMessage("null"), nil
	}
	var b bytes.Buffer
	ix := p.Index
	if ix.Type == "special" {
		b.WriteString(`{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}}`)
	} else {
		fmt.Fprintf(&b, `{"ddoc":%s,"name":%s,"type":%s,"partitioned":%t,"def":{"fields":[`, jsonText(ix.DDoc), jsonText(ix.Name), jsonText(ix.Type), ix.Partitioned)
		dir := "asc"
		if ix.Desc {
			dir = "desc"
		}
		for i, f := range ix.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{%s:"%s"}`, jsonText(f), dir)
		}
		b.WriteString("]")
		if hasPartial(ix) {
			fmt.Fprintf(&b, `,"partial_filter_selector":%s`, jsonText(ix.Partial))
		}
		b.WriteString("}}")
	}
	index = json.RawMessage(append([]byte(nil), b.Bytes()...))

	var start, end any
	if len(p.Ranges) > 0 {
		start, end = explainKey(p.Ranges[0].StartKey), explainKey(p.Ranges[0].EndKey)
	}
	partition := "null"
	if p.opts.Partition != "" {
		partition = jsonText(p.opts.Partition)
	}
	conflicts := `"undefined"`
	if p.opts.Conflicts {
		conflicts = "true"
	}
	b.Reset()
	fmt.Fprintf(&b, `{"include_docs":%t,"view_type":"map","reduce":false,"partition":%s,"start_key":%s,"end_key":%s,"direction":"%s","stable":%t,"update":%t,"conflicts":%s}`,
		p.includeDocs, partition, jsonText(start), jsonText(end), p.direction, p.opts.Stable, !p.opts.NoUpdate, conflicts)
	return index, json.RawMessage(b.Bytes())
}

// IncludeDocs is mrargs' include_docs: the docs are read with the rows
// unless the index covers the query or R > 1 asks for quorum reads.
func (p *QueryPlan) IncludeDocs() bool { return p.includeDocs }

// explainKey is mango_cursor_view:maybe_replace_max_json.
func explainKey(k any) any {
	switch x := k.(type) {
	case Sentinel:
		return "<MAX>"
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if e == MaxJSON {
				e = "<MAX>"
			}
			out[i] = e
		}
		return out
	}
	return k
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
