package httpgw

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/mango"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/views"
)

// POST /db/_find and /db/_explain: a Mango query parsed (mango.ParseFind),
// planned as CouchDB plans it (mango.Plan) and run on the chosen index,
// the rows merged across the shards in the index's order by the views
// engine (or _all_docs), each doc matched against the selector here, then
// skip, limit and fields applied after the merge, as CouchDB's
// coordinator does.

// findQuery is one parsed and planned query.
type findQuery struct {
	f       *mango.Find
	plan    *mango.QueryPlan
	sel     *mango.Selector
	idx     *mangoIndex // the plan's json index; nil for _all_docs
	explain bool
}

// findStats are CouchDB's execution_stats counters.
type findStats struct {
	keys, docs, quorum, results int64
	start                       time.Time
}

// indexScanWarning is mango/index_scan_warning_threshold's default: more
// docs examined per result than this adds CouchDB's warning (0: never).
const indexScanWarning = 10

// mangoSetting is a mango/<key> integer of _config, def when unset.
func (g *Gateway) mangoSetting(key string, def int64) int64 {
	if g.cfg.Settings == nil {
		return def
	}
	v, err := g.cfg.Settings.ConfigValue("mango", key)
	if err != nil || v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return n
}

// checkScanGuard is mango/max_docs_scanned (beyond CouchDB; off by
// default): a query that would read the whole database through
// _all_docs, with more docs than that, is refused before it reads any.
// A query on a range of _id reads only that range and is let through.
func (g *Gateway) checkScanGuard(rq *req, db string, q *findQuery) error {
	maxDocs := g.mangoSetting("max_docs_scanned", 0)
	if maxDocs <= 0 || q.idx != nil || len(q.plan.Ranges) == 0 {
		return nil
	}
	r := q.plan.Ranges[0]
	if s, _ := r.StartKey.(string); s != "" {
		return nil
	}
	if _, open := r.EndKey.(mango.Sentinel); !open && r.EndKey != nil {
		return nil
	}
	info, err := g.c.DBInfo(rq.ctx, db)
	if err != nil {
		return err
	}
	if int64(info.DocCount) <= maxDocs {
		return nil
	}
	return newErr(400, "too_many_docs_scanned", fmt.Sprintf(
		"This query would scan all %d documents of the database without an index, more than mango/max_docs_scanned (%d) allows. Create an index for it (POST /%s/_index) or select on a range of _id.",
		info.DocCount, maxDocs, db))
}

// servedFields are the index's fields the plan's range narrows: the
// equality prefix and the one range column after it (what execution_stats
// reports as served by the index; the rest of the selector is matched doc
// by doc).
func servedFields(q *findQuery) []string {
	out := []string{}
	if q.plan.Index == nil || len(q.plan.Ranges) == 0 {
		return out
	}
	r := q.plan.Ranges[0]
	if q.idx == nil {
		if s, _ := r.StartKey.(string); s != "" {
			return append(out, "_id")
		}
		if _, open := r.EndKey.(mango.Sentinel); !open && r.EndKey != nil {
			return append(out, "_id")
		}
		return out
	}
	lo, _ := r.StartKey.([]any)
	hi, _ := r.EndKey.([]any)
	for i, f := range q.plan.Index.Fields {
		var a, b any
		if i < len(lo) {
			a = lo[i]
		}
		if i < len(hi) {
			b = hi[i]
		}
		if i >= len(lo) && i >= len(hi) {
			break
		}
		_, aMax := a.(mango.Sentinel)
		_, bMax := b.(mango.Sentinel)
		if i < len(lo) && i < len(hi) && !aMax && !bMax && mango.Compare(a, b) == 0 {
			out = append(out, f) // equality
			continue
		}
		if (i < len(lo) && !aMax) || (i < len(hi) && !bMax) {
			out = append(out, f) // the range column
		}
		break
	}
	return out
}

func (g *Gateway) handleFind(rq *req, db string, explain bool) error {
	return g.handleFindIn(rq, db, "", explain)
}

// handleFindIn is _find or _explain; partition is the path's
// (/db/_partition/P/_find), "" for the database's.
func (g *Gateway) handleFindIn(rq *req, db, partition string, explain bool) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	body, err := readBody(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return err
	}
	q, err := g.planFind(rq, db, partition, body, explain)
	if err != nil {
		return err
	}
	if explain {
		return g.writeExplain(rq, db, q)
	}
	return g.runFind(rq, db, q)
}

func (g *Gateway) planFind(rq *req, db, partition string, body []byte, explain bool) (*findQuery, error) {
	f, err := mango.ParseFind(body)
	if err != nil {
		return nil, mangoErr(err)
	}
	partitioned := g.isPartitioned(rq, db)
	if partition != "" {
		if f.Partition != "" {
			// CouchDB 3.5.2 answers 500 (mango_httpd's bad_partition) to
			// any partition member in a partition query's body
			return nil, badRequest("`partition` is not allowed in the body of a partition query")
		}
		f.Partition = partition
	} else if f.Partition != "" && !partitioned {
		return nil, badRequest("database is not partitioned")
	}
	q := &findQuery{f: f, explain: explain}
	idxs, err := g.mangoIndexes(rq, db)
	if err != nil {
		return nil, err
	}
	plan := make([]mango.PlanIndex, 0, len(idxs)+1)
	plan = append(plan, mango.AllDocsPlanIndex)
	for _, m := range idxs {
		ix := m.ix
		pi := mango.PlanIndex{DDoc: ix.DDoc, Name: ix.Name, Type: ix.Type, Partitioned: ix.Partitioned}
		if ix.PartialFilter != nil {
			pi.Partial = mango.Plain(ix.PartialFilter)
			if o, ok := pi.Partial.(map[string]any); ok && len(o) == 0 {
				pi.Partial = nil
			}
		}
		for i, fl := range ix.Fields {
			pi.Fields = append(pi.Fields, fl.Name)
			if i == 0 {
				pi.Desc = fl.Desc
			}
		}
		plan = append(plan, pi)
	}
	sorts := make([]mango.SortSpec, len(f.Sort))
	for i, s := range f.Sort {
		sorts[i] = mango.SortSpec{Field: s.Name, Desc: s.Desc}
	}
	sel := mango.Plain(f.Selector)
	p, err := mango.Plan(sel, sorts, f.UseIndex, plan, mango.PlanOptions{
		AllowFallback: f.AllowFallback, Fields: f.Fields, Explain: explain, Partition: f.Partition, PartitionedDB: partitioned,
		Conflicts: f.Conflicts, R: int(f.R), Stable: f.Stable || f.Stale == "ok", NoUpdate: !f.Update || f.Stale == "ok",
	})
	if err != nil {
		return nil, mangoErr(err)
	}
	q.plan = p
	if p.Index != nil && p.Index.Type == "json" {
		for i := range idxs {
			if idxs[i].ix.DDoc == p.Index.DDoc && idxs[i].ix.Name == p.Index.Name {
				q.idx = &idxs[i]
			}
		}
	}
	if q.sel, err = mango.Compile(sel); err != nil {
		return nil, mangoErr(err)
	}
	return q, nil
}

// writeExplain answers _explain in CouchDB's shape (its index_candidates
// and selector_hints are left out).
func (g *Gateway) writeExplain(rq *req, db string, q *findQuery) error {
	f := q.f
	index, mrargs := q.plan.Explain()
	sel, _ := json.Marshal(f.Selector)
	out := mango.Object{
		{Key: "dbname", Value: db}, {Key: "index", Value: index}, {Key: "partitioned", Value: g.isPartitioned(rq, db)},
		{Key: "selector", Value: json.RawMessage(sel)}, {Key: "opts", Value: f.ExplainOpts()},
		{Key: "limit", Value: f.ExplainLimit()}, {Key: "skip", Value: f.Skip}, {Key: "fields", Value: f.ExplainFields()},
	}
	if mrargs != nil {
		out = append(out, mango.Member{Key: "mrargs", Value: mrargs}, mango.Member{Key: "covering", Value: q.plan.Covering})
	}
	return g.writeJSON(rq, 200, out)
}

// findWriter streams _find's answer: nothing is sent before the first
// doc or the end, so an error before then is an ordinary error answer.
type findWriter struct {
	rq     *req
	rw     *rowWriter
	opened bool
	n      int
}

func (w *findWriter) open() {
	if w.opened {
		return
	}
	w.opened = true
	h := w.rq.w.Header()
	h.Set("Content-Type", "application/json")
	w.rq.w.WriteHeader(200)
	w.rw.raw("{\"docs\":[\r\n")
}

func (w *findWriter) doc(b []byte) error {
	w.open()
	if w.n > 0 {
		w.rw.raw(",\r\n")
	}
	w.n++
	w.rw.line(b)
	return w.rw.err
}

// runFind runs a planned query and streams its docs.
func (g *Gateway) runFind(rq *req, db string, q *findQuery) error {
	f := q.f
	after, err := decodeBookmark(f.Bookmark)
	if err != nil {
		return err
	}
	if err := g.checkScanGuard(rq, db, q); err != nil {
		return err
	}
	st := &findStats{start: time.Now()}
	w := &findWriter{rq: rq, rw: newRowWriter(rq)}
	skip, limit := f.Skip, f.Limit
	var last *bookmark
	// emit takes one candidate doc: matched, skipped, sent; false once
	// the limit is reached
	// the reader's rule (package policy): in _users its own doc alone, in
	// _replicator others' docs without their credentials, applied before
	// the selector sees a doc, as CouchDB's after_doc_read is
	rule := g.pol.ReadRule(rq.ctx, rq.who(), db)
	emit := func(doc map[string]any, render func() []byte, at bookmark) (bool, error) {
		if limit <= 0 {
			return false, nil
		}
		if rule != nil {
			if !rule.Visible(at.id) {
				return true, nil
			}
			if rule.Rewrites() && render != nil {
				raw := rule.Doc(render())
				var m map[string]any
				if json.Unmarshal(raw, &m) != nil {
					return true, nil
				}
				doc, render = m, func() []byte { return raw }
			}
		}
		if !q.sel.Match(doc) {
			return true, nil
		}
		if skip > 0 {
			skip--
			return true, nil
		}
		if st.results == 0 {
			// CouchDB finds a bad field when it projects its first doc
			if err := f.ProjectionError(); err != nil {
				return false, mangoErr(err)
			}
		}
		var out []byte
		if len(f.Fields) == 0 && render != nil {
			out = render()
		} else {
			b, err := json.Marshal(mango.Fields(doc, f.Fields))
			if err != nil {
				return false, err
			}
			out = b
		}
		if err := w.doc(out); err != nil {
			return false, err
		}
		st.results++
		limit--
		last = &at
		return limit > 0, nil
	}
	if limit > 0 && len(q.plan.Ranges) > 0 {
		if q.idx != nil {
			err = g.findOnIndex(rq, db, q, after, st, emit)
		} else {
			err = g.findOnAllDocs(rq, db, q, after, st, emit)
		}
	}
	if err != nil && !errors.Is(err, errStopView) {
		if !w.opened {
			return err
		}
		g.log.Warn("_find failed after its answer began", "db", db, "err", err)
	}
	w.open()
	if w.n > 0 {
		w.rw.raw("\r\n")
	}
	// CouchDB's framing, byte for byte
	tail := []byte("],\r\n\"bookmark\": ")
	bm := "nil"
	switch {
	case last != nil:
		bm = last.encode()
	case f.Bookmark != "":
		bm = f.Bookmark
	}
	tail = strconv.AppendQuote(tail, bm)
	if f.ExecutionStats {
		tail = append(tail, ",\r\n\"execution_stats\": {\"total_keys_examined\":"...)
		tail = strconv.AppendInt(tail, st.keys, 10)
		tail = append(tail, `,"total_docs_examined":`...)
		tail = strconv.AppendInt(tail, st.docs, 10)
		tail = append(tail, `,"total_quorum_docs_examined":`...)
		tail = strconv.AppendInt(tail, st.quorum, 10)
		tail = append(tail, `,"results_returned":`...)
		tail = strconv.AppendInt(tail, st.results, 10)
		tail = append(tail, `,"execution_time_ms":`...)
		tail = strconv.AppendFloat(tail, float64(time.Since(st.start).Microseconds())/1000, 'f', 3, 64)
		// beyond CouchDB: which of the selector's fields the index's
		// range served (the rest were matched doc by doc)
		served, _ := json.Marshal(servedFields(q))
		tail = append(tail, `,"index_fields_served":`...)
		tail = append(tail, served...)
		tail = append(tail, '}')
	}
	warnings := append([]string(nil), q.plan.Warnings...)
	if th := g.mangoSetting("index_scan_warning_threshold", indexScanWarning); th > 0 && st.docs > th*max(st.results, 1) {
		warnings = append(warnings, "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.")
	}
	if len(warnings) > 0 {
		wb, _ := json.Marshal(strings.Join(warnings, "\n"))
		tail = append(tail, ",\r\n\"warning\": "...)
		tail = append(tail, wb...)
	}
	tail = append(tail, "}\r\n\n"...)
	w.rw.line(tail)
	w.rw.flush()
	return nil
}

// bookmark is where a page ended: the last doc's row in the index (its
// key and doc id; for _all_docs the id alone). settee's bookmarks are
// base64url of the JSON ["s1", key, id]; CouchDB's are opaque to clients
// too, and one settee did not make is refused.
type bookmark struct {
	key json.RawMessage // nil for _all_docs
	id  string
}

func (b bookmark) encode() string {
	key := b.key
	if key == nil {
		key = json.RawMessage("null")
	}
	raw, _ := json.Marshal([]any{"s1", key, b.id})
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeBookmark(s string) (*bookmark, error) {
	if s == "" || s == "nil" {
		return nil, nil
	}
	bad := newErr(400, "invalid_bookmark", "Invalid bookmark value: "+strconv.Quote(s))
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 3 || string(parts[0]) != `"s1"` {
		return nil, bad
	}
	b := &bookmark{key: parts[1]}
	if json.Unmarshal(parts[2], &b.id) != nil {
		return nil, bad
	}
	return b, nil
}

// findEmit takes a candidate doc (decoded as far as the query reads it)
// and how to render it whole (nil: it is what doc holds).
type findEmit func(doc map[string]any, render func() []byte, at bookmark) (bool, error)

// storedFields is decodeFields of a stored body (no _id, _rev or
// _conflicts: those come from the doc's info), so that a doc the
// selector does not match is never rendered whole. false: render it and
// decode that (the query reads _conflicts or the whole doc).
func storedFields(id string, info *pb.FullDocInfo, body []byte, need map[string]bool) (map[string]any, bool) {
	if need == nil || need["_conflicts"] || need["_deleted_conflicts"] || need["_attachments"] || need["_local_seq"] {
		return nil, false
	}
	rest := make(map[string]bool, len(need))
	for k := range need {
		if k != "_id" && k != "_rev" {
			rest[k] = true
		}
	}
	var m map[string]any
	if len(rest) == 0 {
		m = map[string]any{}
	} else {
		var ok bool
		if m, ok = mango.DecodeFields(body, rest); !ok {
			return nil, false
		}
	}
	m["_id"] = id
	if info != nil && info.Winner != "" {
		m["_rev"] = info.Winner
	}
	return m, true
}

// findOnAllDocs reads the plan's _id range of _all_docs with the docs.
func (g *Gateway) findOnAllDocs(rq *req, db string, q *findQuery, after *bookmark, st *findStats, emit findEmit) error {
	r := q.plan.Ranges[0]
	rg := coordinator.RangeQuery{IncludeDocs: true, Limit: -1, InclusiveEnd: r.InclusiveEnd, Descending: r.Descending}
	if s, ok := r.StartKey.(string); ok {
		rg.StartKey, rg.HasStart = s, true
	}
	if e, ok := r.EndKey.(string); ok {
		rg.EndKey, rg.HasEnd = e, true
	}
	if after != nil {
		// the page goes on from the bookmark's doc (read again, skipped)
		rg.StartKey, rg.HasStart = after.id, true
	}
	inPartition(&rg, q.f.Partition)
	o := &couchdoc.Options{Conflicts: q.f.Conflicts}
	need := mango.SelectorFields(q.f.Selector, q.f.Fields)
	return g.c.AllDocs(rq.ctx, db, rg, func(row *pb.Row) error {
		if row.Info == nil || row.Json == nil {
			return nil
		}
		id := row.Info.Id
		if after != nil && id == after.id {
			return nil
		}
		st.keys++
		if isDesign(id) {
			return nil // _find answers no design docs
		}
		st.docs++
		rb := &pb.RevBody{Rev: row.Info.Winner, Json: row.Json, Atts: row.Atts}
		doc, ok := storedFields(id, row.Info, row.Json, need)
		var raw []byte
		if !ok {
			raw = couchdoc.Append(nil, id, row.Info, rb, o)
			if doc, ok = mango.DecodeFields(raw, need); !ok {
				return nil
			}
		}
		more, err := emit(doc, func() []byte {
			if raw == nil {
				raw = couchdoc.Append(nil, id, row.Info, rb, o)
			}
			return raw
		}, bookmark{id: id})
		if err != nil {
			return err
		}
		if !more {
			return errStopView
		}
		return nil
	})
}

// findOnIndex reads the plan's range of a json index, in its order
// across the shards, and the rows' docs a page at a time (or none when
// the index covers the query).
func (g *Gateway) findOnIndex(rq *req, db string, q *findQuery, after *bookmark, st *findStats, emit findEmit) error {
	r := q.plan.Ranges[0]
	sk, err := json.Marshal(r.StartKey)
	if err != nil {
		return err
	}
	ek, err := json.Marshal(r.EndKey)
	if err != nil {
		return err
	}
	va := viewArgs{startKey: sk, endKey: ek, inclusiveEnd: r.InclusiveEnd, descending: r.Descending}
	if r.StartKey == nil {
		va.startKey = nil
	}
	if r.EndKey == nil {
		va.endKey = nil
	}
	lo, hi, err := va.bounds()
	if err != nil {
		return nil // an empty range (the planner's bounds cross)
	}
	if after != nil {
		// past the bookmark's row: rows sort by [key, id]
		at, err := appendRowPos(after)
		if err != nil {
			return newErr(400, "invalid_bookmark", "Invalid bookmark value: "+strconv.Quote(q.f.Bookmark))
		}
		if r.Descending {
			if hi == nil || bytes.Compare(at, hi) < 0 {
				hi = at
			}
		} else {
			next := append(at, 0xff, 0xff, 0xff)
			if lo == nil || bytes.Compare(next, lo) > 0 {
				lo = next
			}
		}
	}
	update := "true"
	if !q.f.Update || q.f.Stale == "ok" {
		update = "false"
	}
	m := q.idx
	fields := make([][]string, len(m.ix.Fields))
	for i, fl := range m.ix.Fields {
		fields[i] = mango.FieldPath(fl.Name)
	}
	need := mango.SelectorFields(q.f.Selector, q.f.Fields)
	var batch []*pb.ViewRow
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		rows := batch
		batch = batch[:0:0]
		docs, buf, err := g.findDocs(rq, db, q, rows, st)
		// docs are parts of buf: written out (emit copies them) before
		// it is given back
		defer g.findBufs.put(buf)
		if err != nil {
			return err
		}
		for i, row := range rows {
			if docs[i] == nil {
				continue
			}
			doc, ok := mango.DecodeFields(docs[i], need)
			if !ok {
				continue
			}
			raw := docs[i]
			more, err := emit(doc, func() []byte { return raw }, bookmark{key: row.Key, id: row.Id})
			if err != nil {
				return err
			}
			if !more {
				return errStopView
			}
		}
		return nil
	}
	page := 0
	// docs are read a page of rows at a time, no more than the query
	// can still use: a query with limit 7 reads 7 docs if they match
	batchRows := 100
	if want := q.f.Limit + q.f.Skip; want < 1000 {
		page = int(want) + 1
		batchRows = max(1, min(batchRows, int(want)))
	}
	args := coordinator.ViewArgs{DDocID: m.ix.DDoc, DDoc: m.ddoc, View: m.ix.Name, Start: lo, End: hi,
		Descending: r.Descending, Update: update, PageRows: page, NoOffset: true}
	if p := q.f.Partition; p != "" && m.ix.Partitioned {
		args.Partition = p
		args.Start, args.End = views.PartitionBounds(p, lo, hi)
	}
	err = g.c.View(rq.ctx, db, args, func(coordinator.ViewMeta) error { return nil }, func(row *pb.ViewRow) error {
		st.keys++
		if q.plan.Covering {
			doc, ok := coveredDoc(row, fields)
			if !ok {
				return nil
			}
			more, err := emit(doc, nil, bookmark{key: row.Key, id: row.Id})
			if err != nil {
				return err
			}
			if !more {
				return errStopView
			}
			return nil
		}
		batch = append(batch, row)
		if len(batch) >= batchRows {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return err
}

// appendRowPos is a bookmark's row position in an index: its collated
// [key, id].
func appendRowPos(b *bookmark) ([]byte, error) {
	va := viewArgs{key: b.key, hasKey: true, startDocID: b.id, hasStartID: true}
	lo, _, err := va.bounds()
	return lo, err
}

// findDocs reads the rows' docs (nil for one gone since it was indexed).
// The docs of this node's copies are rendered into buf, which the caller
// gives back to g.findBufs once it is done with them.
func (g *Gateway) findDocs(rq *req, db string, q *findQuery, rows []*pb.ViewRow, st *findStats) (docs [][]byte, buf *[]byte, err error) {
	ms := make([]*pb.GetDoc, len(rows))
	for i, r := range rows {
		// the shard renders the doc from its stored bytes (one copy)
		ms[i] = &pb.GetDoc{Id: r.Id, Render: true, RenderConflicts: q.f.Conflicts}
	}
	buf = g.findBufs.get()
	got, b, err := g.c.GetDocsInto(rq.ctx, db, ms, *buf)
	*buf = b
	if err != nil {
		return nil, buf, err
	}
	o := &couchdoc.Options{Conflicts: q.f.Conflicts}
	out := make([][]byte, len(rows))
	for i, d := range got {
		st.docs++
		if q.f.R > 1 {
			st.quorum++
		}
		if d.Err != nil || d.Reply == nil || d.Reply.Info == nil || len(d.Reply.Bodies) == 0 {
			continue
		}
		b := d.Reply.Bodies[0]
		if b.Missing || b.Deleted {
			continue
		}
		if d.Reply.Rendered != nil {
			out[i] = d.Reply.Rendered
			continue
		}
		out[i] = couchdoc.Append(nil, d.Reply.Info.Id, d.Reply.Info, b, o)
	}
	return out, buf, nil
}

// maxFindBuf bounds the buffers kept for _find's docs: a batch of large
// docs is not held after it.
const maxFindBuf = 4 << 20

// coveredDoc is the doc a covering index's row stands for: its key's
// values at the index's fields, and _id.
func coveredDoc(row *pb.ViewRow, fields [][]string) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(row.Key))
	d.UseNumber()
	var key []any
	if d.Decode(&key) != nil || len(key) != len(fields) {
		return nil, false
	}
	doc := map[string]any{"_id": row.Id}
	for i, path := range fields {
		cur := doc
		for _, p := range path[:len(path)-1] {
			next, ok := cur[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[p] = next
			}
			cur = next
		}
		cur[path[len(path)-1]] = key[i]
	}
	return doc, true
}
