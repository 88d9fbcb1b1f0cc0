package httpgw

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/couchdoc"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
)

// handleAllDocs serves _all_docs, _design_docs (prefix "_design/") and
// _local_docs (prefix "_local/"). Rows are written as they are merged.
//
// partition, in a partitioned database, bounds the rows to its docs and
// reads only the shard range that holds them (/db/_partition/P/_all_docs).
func (g *Gateway) handleAllDocs(rq *req, db, prefix, partition string, rest []string) error {
	if len(rest) > 0 {
		if prefix == "" && len(rest) == 1 && rest[0] == "queries" {
			return g.handleAllDocsQueries(rq, db, partition)
		}
		return errMissing
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	var keys []json.RawMessage
	var hasKeys bool
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		var raw json.RawMessage
		var err error
		if hasKeys, err = jsonParam(rq, &raw, "keys"); err != nil {
			return err
		}
		if hasKeys {
			if err := decodeMember(raw, &keys, "`keys` parameter must be an array."); err != nil {
				return err
			}
		}
	case http.MethodPost:
		if err := requireJSON(rq); err != nil {
			return err
		}
		var body map[string]json.RawMessage
		if err := g.decodeJSON(rq, &body); err != nil {
			return err
		}
		if raw, ok := body["keys"]; ok {
			if err := decodeMember(raw, &keys, "`keys` body member must be an array."); err != nil {
				return err
			}
			hasKeys = true
		}
		bodyParams(rq, body)
	default:
		return methodNotAllowed("GET,HEAD,POST")
	}
	q, o, err := g.parseRangeQuery(rq, prefix)
	if err != nil {
		return err
	}
	if v := rq.q["partition"]; partition != "" && len(v) > 0 && v[len(v)-1] != partition {
		return badRequest("Conflicting value for `partition` in query string")
	}
	if !hasKeys {
		// keys are looked up in the whole database, a partition's query
		// as any (CouchDB 3.5.2 answers them with the database's
		// total_rows)
		inPartition(&q, partition)
	}
	if partition != "" {
		if err := applyPartitionLimit(g.partitionQueryLimit(), &q.Limit); err != nil {
			return err
		}
	}
	if err := mapOnlyArgs(rq); err != nil {
		return err
	}
	updateSeq, err := boolParam(rq, "update_seq", false)
	if err != nil {
		return err
	}
	return g.streamAllDocs(rq, db, prefix, q, o, keys, hasKeys, updateSeq, nil)
}

type rowOpts struct {
	includeDocs bool
	doc         couchdoc.Options
	// rule is the reader's (package policy; nil for most): what it may
	// see of a doc it includes
	rule *policy.ReadRule
}

func (g *Gateway) parseRangeQuery(rq *req, prefix string) (coordinator.RangeQuery, *rowOpts, error) {
	q := coordinator.RangeQuery{Limit: -1, InclusiveEnd: true, Local: prefix == "_local/"}
	// CouchDB reads the parameters in their order, as a view's: the
	// first bad one is the error (keys is the handler's)
	var ordered []viewParam
	for _, p := range queryParams(rq) {
		if p.name != "keys" {
			ordered = append(ordered, p)
		}
	}
	if _, err := parseViewArgs(ordered); err != nil {
		return q, nil, err
	}
	var err error
	key, keyBelow, hasKey, err := idKey(rq, "key")
	if err != nil {
		return q, nil, err
	}
	start, startBelow, hasStart, err := idKey(rq, "startkey", "start_key")
	if err != nil {
		return q, nil, err
	}
	end, endBelow, hasEnd, err := idKey(rq, "endkey", "end_key")
	if err != nil {
		return q, nil, err
	}
	q.StartKey, q.HasStart, q.EndKey, q.HasEnd = start, hasStart, end, hasEnd
	if q.Descending, err = boolParam(rq, "descending", false); err != nil {
		return q, nil, err
	}
	if q.InclusiveEnd, err = boolParam(rq, "inclusive_end", true); err != nil {
		return q, nil, err
	}
	if q.Limit, err = intParam(rq, "limit", -1); err != nil {
		return q, nil, err
	}
	if q.Skip, err = intParam(rq, "skip", 0); err != nil {
		return q, nil, err
	}
	if hasKey {
		q.StartKey, q.HasStart, q.EndKey, q.HasEnd, q.InclusiveEnd = key, true, key, true, true
		startBelow, endBelow = keyBelow, keyBelow
	}
	// a key that is not a string sorts before every id (CouchDB compares
	// ids in Erlang's term order, where binaries come last): a start
	// below them all is no start going up, and the end of the range going
	// down; an end below them all ends the range before its first id
	// going up, and is no end going down. "" (no id is empty) stands for
	// the place before the first id.
	if startBelow {
		if q.Descending {
			q.StartKey, q.HasStart = "", true
		} else {
			q.StartKey, q.HasStart = "", false
		}
	}
	if endBelow {
		if q.Descending {
			q.EndKey, q.HasEnd = "", false
		} else {
			q.EndKey, q.HasEnd, q.InclusiveEnd = "", true, false
		}
	}
	// startkey_docid/endkey_docid break ties between equal keys; in
	// _all_docs the key is the doc id, so they bound the range only when
	// no key bound is given. They must still be strings.
	for _, p := range []struct {
		names []string
		dst   *string
		has   *bool
	}{{[]string{"startkey_docid", "start_key_doc_id"}, &q.StartKey, &q.HasStart},
		{[]string{"endkey_docid", "end_key_doc_id"}, &q.EndKey, &q.HasEnd}} {
		for _, name := range p.names {
			v, ok := rq.q[name]
			if !ok || len(v) == 0 {
				continue
			}
			if !*p.has {
				*p.dst, *p.has = v[len(v)-1], true
			}
		}
	}
	o := &rowOpts{}
	if o.includeDocs, err = boolParam(rq, "include_docs", false); err != nil {
		return q, nil, err
	}
	if o.doc.Conflicts, err = boolParam(rq, "conflicts", false); err != nil {
		return q, nil, err
	}
	if o.doc.Attachments, err = boolParam(rq, "attachments", false); err != nil {
		return q, nil, err
	}
	if o.doc.AttEncodingInfo, err = boolParam(rq, "att_encoding_info", false); err != nil {
		return q, nil, err
	}
	q.IncludeDocs = o.includeDocs
	if prefix == "_design/" {
		clampPrefix(&q, "_design/", "_design0")
	}
	return q, o, nil
}

// inPartition bounds a range to partition p's ids ("p:" up to "p;") and
// to the shard range holding them.
func inPartition(q *coordinator.RangeQuery, p string) {
	if p == "" {
		return
	}
	clampPrefix(q, p+":", p+";")
	q.Partition = p
}

// clampPrefix narrows a range to ids in [lo, hi).
func clampPrefix(q *coordinator.RangeQuery, lo, hi string) {
	if q.Descending {
		if !q.HasStart || q.StartKey >= hi {
			q.StartKey, q.HasStart = hi, true
		}
		if !q.HasEnd || q.EndKey < lo {
			q.EndKey, q.HasEnd = lo, true
		}
		return
	}
	if !q.HasStart || q.StartKey < lo {
		q.StartKey, q.HasStart = lo, true
	}
	if !q.HasEnd || q.EndKey >= hi {
		q.EndKey, q.HasEnd, q.InclusiveEnd = hi, true, false
	}
}

func (g *Gateway) streamAllDocs(rq *req, db, prefix string, q coordinator.RangeQuery, o *rowOpts, keys []json.RawMessage, hasKeys, updateSeq bool, w *rowWriter) error {
	o.rule = g.pol.ReadRule(rq.ctx, rq.who(), db)
	var total, offset string
	if prefix == "_local/" {
		total, offset = "null", "null"
	} else {
		cr := &pb.CountRange{}
		if prefix == "_design/" {
			cr = &pb.CountRange{Lo: "_design/", HasLo: true, LoInclusive: true, Hi: "_design0", HasHi: true}
		}
		n, err := g.c.CountRangeIn(rq.ctx, db, q.Partition, cr)
		if err != nil {
			return err
		}
		total = strconv.FormatUint(n, 10)
		if hasKeys {
			offset = "null"
		} else {
			off, err := g.offset(rq, db, q)
			if err != nil {
				return err
			}
			// CouchDB's offset is at most total_rows, even where the
			// rows before the start and the skip add up to more
			offset = strconv.FormatUint(min(off+uint64(q.Skip), n), 10)
		}
	}
	var seq string
	if updateSeq {
		var err error
		if seq, err = g.c.Now(rq.ctx, db); err != nil {
			return err
		}
	}
	standalone := w == nil
	if standalone {
		w = newRowWriter(rq)
		rq.w.Header().Set("Content-Type", "application/json")
		rq.w.WriteHeader(200)
	}
	w.raw(`{"total_rows":` + total + `,"offset":` + offset)
	if updateSeq {
		w.raw(`,"update_seq":"` + seq + `"`)
	}
	w.raw(`,"rows":[`)
	first := true
	emit := func(buf []byte) error {
		if !first {
			w.raw(",")
		}
		first = false
		w.line(buf)
		return w.err
	}
	var err error
	switch {
	case hasKeys:
		err = g.keysRows(rq, db, prefix, keys, q, o, emit)
	case !o.includeDocs && !q.Local:
		// the rows as the shards rendered them (appendRow's form)
		err = g.c.AllDocsJSON(rq.ctx, db, q, emit)
	default:
		var scratch []byte // one row's JSON, reused: emit copies it out
		err = g.c.AllDocs(rq.ctx, db, q, func(row *pb.Row) error {
			var data [][]byte
			if o.includeDocs && row.Info != nil && !row.Info.Deleted && row.Json != nil {
				var err error
				if data, err = g.attData(rq, db, row.Info.Id, row.Info.Winner, row.Atts, &o.doc); err != nil {
					return err
				}
			}
			scratch = g.appendRow(scratch[:0], row, o, prefix, data)
			return emit(scratch)
		})
	}
	if err != nil {
		// the status line is gone: end the JSON so that a client sees a
		// truncated result rather than a hung stream, and log
		g.log.Error("all_docs stream failed", "db", db, "err", err)
	}
	w.raw("]}")
	if standalone {
		w.raw("\n")
		w.flush()
	}
	return nil
}

// offset counts the rows a range skips before its start key: all the
// database's docs before it, for _design_docs too (CouchDB counts in the
// one by-id tree the design docs share with the others).
func (g *Gateway) offset(rq *req, db string, q coordinator.RangeQuery) (uint64, error) {
	if !q.HasStart || q.Local {
		return 0, nil
	}
	cr := &pb.CountRange{}
	if q.Descending {
		cr.Lo, cr.HasLo, cr.LoInclusive = q.StartKey, true, false
	} else {
		cr.Hi, cr.HasHi, cr.HiInclusive = q.StartKey, true, false
	}
	return g.c.CountRangeIn(rq.ctx, db, q.Partition, cr)
}

// appendRow renders one row; data (nil, or parallel to row.Atts) is the
// attachments' data the doc inlines.
func (g *Gateway) appendRow(buf []byte, row *pb.Row, o *rowOpts, prefix string, data [][]byte) []byte {
	if row.Local != nil {
		rev := "0-" + strconv.FormatUint(row.Local.Rev, 10)
		buf = append(buf, `{"id":`...)
		buf = docjson.AppendString(buf, row.Local.Id)
		buf = append(buf, `,"key":`...)
		buf = docjson.AppendString(buf, row.Local.Id)
		buf = append(buf, `,"value":{"rev":"`+rev+`"}`...)
		if o.includeDocs {
			buf = append(buf, `,"doc":`...)
			buf = couchdoc.Append(buf, row.Local.Id, nil, &pb.RevBody{Rev: rev, Json: row.Local.Json}, nil)
		}
		return append(buf, '}')
	}
	info := row.Info
	buf = append(buf, `{"id":`...)
	buf = docjson.AppendString(buf, info.Id)
	buf = append(buf, `,"key":`...)
	buf = docjson.AppendString(buf, info.Id)
	buf = append(buf, `,"value":{"rev":`...)
	buf = docjson.AppendString(buf, info.Winner)
	if info.Deleted {
		buf = append(buf, `,"deleted":true`...)
	}
	buf = append(buf, '}')
	if o.includeDocs {
		buf = append(buf, `,"doc":`...)
		if info.Deleted || row.Json == nil {
			buf = append(buf, "null"...)
		} else {
			buf = couchdoc.Append(buf, info.Id, info, &pb.RevBody{Rev: info.Winner, Json: o.rule.Doc(row.Json), Atts: row.Atts, AttData: data}, &o.doc)
		}
	}
	return append(buf, '}')
}

// bodyParams takes the query parameters a POSTed _all_docs body carries
// beside keys (limit, skip, include_docs…), as CouchDB reads them: where
// the query string sets the same parameter, the query string's stands.
func bodyParams(rq *req, body map[string]json.RawMessage) {
	for k, raw := range body {
		if rq.q.Has(k) {
			continue
		}
		switch k {
		case "limit", "skip", "descending", "include_docs", "conflicts", "inclusive_end", "update_seq",
			"attachments", "att_encoding_info", "key", "startkey", "start_key", "endkey", "end_key":
			rq.q.Set(k, string(raw)) // JSON in the query string too
		case "startkey_docid", "start_key_doc_id", "endkey_docid", "end_key_doc_id":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				rq.q.Set(k, s) // a plain string in the query string
			}
		}
	}
}

// keysRows answers _all_docs?keys=: one row per key, in key order,
// missing keys as errors and deleted docs with their tombstone rev.
func (g *Gateway) keysRows(rq *req, db, prefix string, keys []json.RawMessage, q coordinator.RangeQuery, o *rowOpts, emit func([]byte) error) error {
	ids := make([]string, len(keys))
	valid := make([]bool, len(keys))
	for i, k := range keys {
		var s string
		if json.Unmarshal(k, &s) == nil {
			ids[i], valid[i] = s, true
		}
	}
	if q.Descending {
		for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
			ids[i], ids[j] = ids[j], ids[i]
			keys[i], keys[j] = keys[j], keys[i]
			valid[i], valid[j] = valid[j], valid[i]
		}
	}
	skip, sent := q.Skip, 0
	for i, id := range ids {
		if q.Limit >= 0 && sent >= q.Limit {
			return nil
		}
		if skip > 0 {
			skip--
			continue
		}
		sent++
		if prefix != "" && (!valid[i] || !strings.HasPrefix(id, prefix)) {
			// CouchDB drops a key outside _design_docs' (_local_docs')
			// range from the answer, after it counted for skip and limit
			continue
		}
		var row []byte
		if !valid[i] {
			row = append(append([]byte(`{"key":`), keys[i]...), `,"error":"not_found"}`...)
			if err := emit(row); err != nil {
				return err
			}
			continue
		}
		if prefix == "_local/" {
			d, err := g.c.GetLocal(rq.ctx, db, id)
			if err != nil {
				row = append(append([]byte(`{"key":`), docjson.AppendString(nil, id)...), `,"error":"not_found"}`...)
			} else {
				row = g.appendRow(nil, &pb.Row{Local: d}, o, prefix, nil)
			}
			if err := emit(row); err != nil {
				return err
			}
			continue
		}
		r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, WithAttsData: o.includeDocs && o.doc.Attachments})
		if err != nil {
			return err
		}
		if r.Info == nil {
			row = append(append([]byte(`{"key":`), docjson.AppendString(nil, id)...), `,"error":"not_found"}`...)
		} else {
			pr := &pb.Row{Info: r.Info}
			var data [][]byte
			if len(r.Bodies) > 0 && !r.Bodies[0].Missing {
				pr.Json, pr.Atts, data = r.Bodies[0].Json, r.Bodies[0].Atts, r.Bodies[0].AttData
			}
			row = g.appendRow(nil, pr, o, prefix, data)
		}
		if err := emit(row); err != nil {
			return err
		}
	}
	return nil
}

// attData reads the data of the attachments a row's doc inlines under o
// (nil when it inlines none). Rows carry only the attachments' metadata:
// each row's data is read when that row is written, and dropped with it.
func (g *Gateway) attData(rq *req, db, id, rev string, atts []*pb.AttMeta, o *couchdoc.Options) ([][]byte, error) {
	rb := &pb.RevBody{Rev: rev, Atts: atts}
	want := couchdoc.DataWanted(rb, o)
	if len(want) == 0 {
		return nil, nil
	}
	data := make([][]byte, len(atts))
	for _, i := range want {
		d, err := g.c.GetAtt(rq.ctx, db, id, atts[i])
		if err != nil {
			// the copy asked may not hold it (yet): read the revision
			// with its attachments, as GET /db/doc?rev= does
			r, err2 := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id, Revs: []string{rev}, WithAttsData: true})
			if err2 != nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || len(r.Bodies[0].AttData) != len(atts) {
				return nil, err
			}
			return r.Bodies[0].AttData, nil
		}
		data[i] = d
	}
	return data, nil
}

// handleAllDocsQueries serves POST _all_docs/queries: several queries, one
// response.
func (g *Gateway) handleAllDocsQueries(rq *req, db, partition string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	// no Content-Type check: chttpd_db has none for .../queries
	var body struct {
		Queries []json.RawMessage "json:\"queries\" reason:\"`queries` member must be an array.\""
	}
	if err := g.decodeJSON(rq, &body); err != nil {
		return err
	}
	if body.Queries == nil {
		return badRequest("POST body must include `queries` parameter.")
	}
	// every query is parsed before the answer starts: one that is wrong
	// is the request's 400 (chttpd_db:multi_all_docs_view)
	type query struct {
		sub     *req
		q       coordinator.RangeQuery
		o       *rowOpts
		keys    []json.RawMessage
		hasKeys bool
	}
	queries := make([]query, len(body.Queries))
	for i, raw := range body.Queries {
		var qm map[string]json.RawMessage
		if err := decodeMember(raw, &qm, "Each query must be a JSON object."); err != nil {
			return err
		}
		sub := &req{w: rq.w, r: rq.r, ctx: rq.ctx, g: rq.g, user: rq.user, segs: rq.segs, q: map[string][]string{}}
		var keys []json.RawMessage
		hasKeys := false
		for k, v := range qm {
			if k == "keys" {
				if err := decodeMember(v, &keys, ""); err != nil {
					return newErr(400, "query_parse_error", "`keys` must be an array of strings.")
				}
				hasKeys = true
				continue
			}
			sub.q.Set(k, string(v))
		}
		if hasKeys && len(keys) == 1 {
			// a query's one key is read as key=K, a range with an
			// offset, not as a keys lookup (CouchDB 3.5.2)
			sub.q.Set("key", string(keys[0]))
			keys, hasKeys = nil, false
		}
		q, o, err := g.parseRangeQuery(sub, "")
		if err != nil {
			return err
		}
		if !hasKeys {
			inPartition(&q, partition)
		}
		if partition != "" {
			if err := applyPartitionLimit(g.partitionQueryLimit(), &q.Limit); err != nil {
				return err
			}
		}
		queries[i] = query{sub, q, o, keys, hasKeys}
	}
	w := newRowWriter(rq)
	rq.w.Header().Set("Content-Type", "application/json")
	rq.w.WriteHeader(200)
	w.raw(`{"results":[`)
	for i, qu := range queries {
		if i > 0 {
			w.raw(",")
		}
		_ = g.streamAllDocs(qu.sub, db, "", qu.q, qu.o, qu.keys, qu.hasKeys, false, w)
	}
	w.raw("]}\n")
	w.flush()
	return nil
}

// mapOnlyArgs refuses what CouchDB refuses of a map-only view, which
// _all_docs is: reduce=true, group=true, any group_level.
func mapOnlyArgs(rq *req) error {
	reduce, err := boolParam(rq, "reduce", false)
	if err != nil {
		return err
	}
	if reduce {
		return queryParseErr("Reduce is invalid for map-only views.")
	}
	group, err := boolParam(rq, "group", false)
	if err != nil {
		return err
	}
	if _, level := rq.q["group_level"]; group || level {
		return queryParseErr("Invalid use of grouping on a map view.")
	}
	return nil
}
