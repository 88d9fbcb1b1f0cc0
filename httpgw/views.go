package httpgw

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/settee/settee/collate"
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/views"
)

// viewArgs are a view query's parameters, parsed as couch_mrview_http
// does.
type viewArgs struct {
	key, startKey, endKey json.RawMessage
	hasKey                bool
	keys                  []json.RawMessage
	hasKeys               bool
	startDocID, endDocID  string
	hasStartID, hasEndID  bool
	inclusiveEnd          bool
	limit, skip           int
	descending            bool
	group                 bool
	groupLevel            int // -1: not set
	reduce                bool
	reduceSet             bool
	includeDocs           bool
	conflicts             bool
	attachments           bool
	updateSeq             bool
	sorted                bool
	update                string
	// partition: a partition query (the path's /_partition/P, or the
	// query string's partition=P)
	partition string
}

func queryParseErr(reason string) error { return newErr(400, "query_parse_error", reason) }

// viewParam is one parameter as given: a query string value, or a JSON
// body member's (fromBody; its text is JSON).
type viewParam struct {
	name, value string
	fromBody    bool
}

// queryParams are the query string's parameters, in their order (where
// two settle one thing, as stale and update, the later wins).
func queryParams(rq *req) []viewParam {
	var out []viewParam
	for _, kv := range strings.Split(rq.r.URL.RawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 == nil && err2 == nil {
			out = append(out, viewParam{name: k, value: v})
		}
	}
	return out
}

// viewBodyParams are a POSTed query's members, after the query string's: a
// member the query string has is left out (the query string wins).
func viewBodyParams(q []viewParam, body map[string]json.RawMessage) []viewParam {
	inQuery := map[string]bool{}
	for _, p := range q {
		inQuery[p.name] = true
	}
	out := append([]viewParam(nil), q...)
	names := make([]string, 0, len(body))
	for k := range body {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if inQuery[k] || k == "keys" && inQuery["key"] {
			continue
		}
		out = append(out, viewParam{name: k, value: string(body[k]), fromBody: true})
	}
	return out
}

// parseViewArgs reads a view query as couch_mrview_http does.
func parseViewArgs(params []viewParam) (*viewArgs, error) {
	a := &viewArgs{inclusiveEnd: true, limit: -1, groupLevel: -1, reduce: true, sorted: true, update: "true"}
	groupSet := false
	for _, p := range params {
		v := p.value
		quoted := erlString(v)
		if p.fromBody {
			// a body member is JSON: strings are their text, and a
			// number is shown as it is in errors
			var str string
			if json.Unmarshal([]byte(v), &str) == nil {
				quoted = strconv.Quote(str)
				if p.name != "key" && p.name != "keys" && !strings.HasSuffix(p.name, "key") {
					v = str
				}
			} else {
				quoted = v
			}
		}
		boolean := func() (bool, error) {
			switch v {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
			return false, queryParseErr("Invalid boolean parameter: " + quoted)
		}
		integer := func(positive bool) (int, error) {
			i, err := strconv.Atoi(v)
			if err != nil {
				return 0, queryParseErr("Invalid value for integer: " + quoted)
			}
			if positive && i < 0 {
				return 0, queryParseErr("Invalid value for positive integer: " + quoted)
			}
			return i, nil
		}
		jsonVal := func() (json.RawMessage, error) {
			if !json.Valid([]byte(v)) {
				return nil, badRequest("invalid UTF-8 JSON")
			}
			return json.RawMessage(v), nil
		}
		var err error
		switch p.name {
		case "key":
			a.key, err = jsonVal()
			a.hasKey = err == nil
		case "keys":
			var raw json.RawMessage
			if raw, err = jsonVal(); err == nil {
				if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a.keys) != nil {
					if p.fromBody {
						err = badRequest("`keys` member must be an array.")
					} else {
						err = queryParseErr("`keys` must be an array of strings.")
					}
				}
				a.hasKeys = err == nil
			}
		case "startkey", "start_key":
			a.startKey, err = jsonVal()
		case "endkey", "end_key":
			a.endKey, err = jsonVal()
		case "startkey_docid", "start_key_doc_id":
			a.startDocID, a.hasStartID = v, true
		case "endkey_docid", "end_key_doc_id":
			a.endDocID, a.hasEndID = v, true
		case "inclusive_end":
			a.inclusiveEnd, err = boolean()
		case "limit":
			a.limit, err = integer(true)
		case "skip":
			a.skip, err = integer(true)
		case "descending":
			a.descending, err = boolean()
		case "group":
			a.group, err = boolean()
			groupSet = true
		case "group_level":
			a.groupLevel, err = integer(true)
		case "reduce":
			a.reduce, err = boolean()
			a.reduceSet = true
		case "include_docs":
			a.includeDocs, err = boolean()
		case "conflicts":
			a.conflicts, err = boolean()
		case "attachments":
			a.attachments, err = boolean()
		case "update_seq":
			a.updateSeq, err = boolean()
		case "sorted":
			a.sorted, err = boolean()
		case "partition":
			if !p.fromBody { // CouchDB reads it from the query string only
				if err = checkPartition(v); err == nil {
					a.partition = v
				}
			}
		case "stable":
			if v != "true" && v != "false" {
				err = queryParseErr("Invalid value for `stable`.")
			}
		case "update":
			switch v {
			case "true", "false", "lazy":
				a.update = v
			default:
				err = queryParseErr("Invalid value for `update`.")
			}
		case "stale":
			switch v {
			case "ok":
				a.update = "false"
			case "update_after":
				a.update = "lazy"
			default:
				err = queryParseErr("Invalid value for `stale`.")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if a.hasKeys {
		// keys wins over key (CouchDB's order of precedence)
		a.hasKey, a.key = false, nil
	}
	if groupSet && !a.group && a.groupLevel > 0 {
		return nil, queryParseErr("Can't specify group=false and group_level>0 at the same time")
	}
	return a, nil
}

// bounds turns the key range into the index's collated [start, end).
func (a *viewArgs) bounds() (start, end []byte, err error) {
	enc := func(key json.RawMessage, id string, hasID bool) ([]byte, error) {
		b, err := collate.AppendKey(nil, key)
		if err != nil {
			return nil, badRequest("invalid UTF-8 JSON")
		}
		if hasID {
			idJSON, _ := json.Marshal(id)
			return collate.AppendKey(b, idJSON)
		}
		return b, nil
	}
	after := func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff) }
	sk, ek := a.startKey, a.endKey
	sid, eid, hasS, hasE := a.startDocID, a.endDocID, a.hasStartID, a.hasEndID
	if a.hasKey {
		sk, ek = a.key, a.key // the docid bounds still apply, as CouchDB's
	}
	if sk == nil {
		hasS = false
	}
	if ek == nil {
		hasE = false
	}
	// in the index's ascending order: lo inclusive, hi exclusive
	var lo, hi []byte
	loKey, loID, hasLoID := sk, sid, hasS
	hiKey, hiID, hasHiID := ek, eid, hasE
	if a.descending {
		loKey, loID, hasLoID, hiKey, hiID, hasHiID = ek, eid, hasE, sk, sid, hasS
	}
	if loKey != nil {
		if lo, err = enc(loKey, loID, hasLoID); err != nil {
			return nil, nil, err
		}
		if a.descending && !a.inclusiveEnd {
			lo = after(lo) // the end key is excluded: rows above it only
		}
	}
	if hiKey != nil {
		if hi, err = enc(hiKey, hiID, hasHiID); err != nil {
			return nil, nil, err
		}
		if a.descending || a.inclusiveEnd {
			hi = after(hi)
		}
	}
	if sk != nil && ek != nil {
		c := collate.Compare(sk, ek)
		if c == 0 && hasS && hasE {
			sj, _ := json.Marshal(sid)
			ej, _ := json.Marshal(eid)
			c = collate.Compare(sj, ej)
		}
		if (!a.descending && c > 0) || (a.descending && c < 0) {
			if a.descending {
				return nil, nil, queryParseErr("No rows can match your key range, reverse your start_key and end_key or set descending=false")
			}
			return nil, nil, queryParseErr("No rows can match your key range, reverse your start_key and end_key or set descending=true")
		}
	}
	return lo, hi, nil
}

// handleDesignPath serves /db/_design/ddoc/_view/… and …/_info.
func (g *Gateway) handleDesignPath(rq *req, db, ddocID string, rest []string) error {
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	switch rest[0] {
	case "_view":
		if len(rest) < 2 || rest[1] == "" {
			return methodNotAllowed("GET,POST,HEAD") // CouchDB's answer to a view with no name
		}
		if len(rest) == 3 && rest[2] == "queries" {
			return g.handleViewQueries(rq, db, ddocID, rest[1], "")
		}
		if len(rest) > 2 {
			return errMissing
		}
		return g.handleView(rq, db, ddocID, rest[1], "")
	case "_info":
		return g.handleDesignInfo(rq, db, ddocID)
	case "_show":
		return g.handleShow(rq, db, ddocID, rest[1:])
	case "_list":
		return g.handleList(rq, db, ddocID, rest[1:])
	case "_update":
		return g.handleUpdate(rq, db, ddocID, rest[1:])
	case "_rewrite":
		return g.handleRewrite(rq, db, ddocID, rest[1:])
	}
	return errMissing
}

// loadDesign is a design doc (as its functions see it) and its views,
// from the policy's design docs.
func (g *Gateway) loadDesign(rq *req, db, ddocID string) ([]byte, *views.Def, error) {
	d, err := g.pol.Design(rq.ctx, db, ddocID)
	if err == policy.ErrDesignDeleted {
		return nil, nil, errDeleted
	}
	if err != nil {
		if errors.Is(err, coordinator.ErrNotFound) {
			return nil, nil, errMissing
		}
		return nil, nil, err
	}
	if d.DefErr != nil {
		return nil, nil, d.DefErr
	}
	return d.Body, d.Def, nil
}

func (g *Gateway) handleView(rq *req, db, ddocID, view, partition string) error {
	params := queryParams(rq)
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if err := requireJSON(rq); err != nil {
			return err
		}
		body, err := g.viewBody(rq)
		if err != nil {
			return err
		}
		params = viewBodyParams(params, body)
	default:
		return methodNotAllowed("GET,POST,HEAD")
	}
	a, err := parseViewArgs(params)
	if err != nil {
		return err
	}
	if err := a.inPartition(partition); err != nil {
		return err
	}
	ddoc, def, err := g.loadDesign(rq, db, ddocID)
	if err != nil {
		return err
	}
	if err := g.partitionLimit(rq, db, def, a); err != nil {
		return err
	}
	w := &viewWriter{rw: newRowWriter(rq), rq: rq}
	err = g.runView(rq, db, ddocID, ddoc, def, view, a, w, true)
	return w.finish(err, "\r\n]}\n")
}

func (g *Gateway) handleViewQueries(rq *req, db, ddocID, view, partition string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	obj, err := g.viewBody(rq)
	if err != nil {
		return err
	}
	raw, ok := obj["queries"]
	if !ok {
		return badRequest("POST body must include `queries` parameter.")
	}
	var body struct {
		Queries []map[string]json.RawMessage
	}
	if err := json.Unmarshal(raw, &body.Queries); err != nil || body.Queries == nil {
		return badRequest("`queries` member must be an array.")
	}
	ddoc, def, err := g.loadDesign(rq, db, ddocID)
	if err != nil {
		return err
	}
	if _, ok := def.View(view); !ok {
		return newErr(404, "not_found", "missing_named_view")
	}
	all := make([]*viewArgs, len(body.Queries))
	for i, q := range body.Queries {
		if all[i], err = parseViewArgs(viewBodyParams(queryParams(rq), q)); err != nil {
			return err
		}
		if err := all[i].inPartition(partition); err != nil {
			return err
		}
		if err := g.partitionLimit(rq, db, def, all[i]); err != nil {
			return err
		}
	}
	w := &viewWriter{rw: newRowWriter(rq), rq: rq}
	if err := w.openResponse([]byte(`{"results":[`)); err != nil {
		return err
	}
	for i, a := range all {
		sub := &subWriter{w: w, first: i == 0}
		if err := g.runView(rq, db, ddocID, ddoc, def, view, a, sub, false); err != nil {
			g.log.Warn("view query failed after its answer began", "db", db, "ddoc", ddocID, "view", view, "err", err)
			break
		}
		w.rw.raw("\r\n]}")
	}
	return w.finish(nil, "\r\n]}\n")
}

// viewOut is where a view's answer goes: the whole response, or one
// result of …/queries.
type viewOut interface {
	open(head []byte) error
	row(b []byte) error
}

// viewWriter streams a view's answer: nothing is sent before its head
// (an error before it is an ordinary error answer), then the rows as
// CouchDB writes them, "\r\n" before each.
type viewWriter struct {
	rw     *rowWriter
	rq     *req
	opened bool
	rows   int
}

func (w *viewWriter) openResponse(head []byte) error {
	h := w.rq.w.Header()
	h.Set("Content-Type", "application/json")
	w.rq.w.WriteHeader(200)
	w.opened = true
	w.rw.line(head)
	return w.rw.err
}

func (w *viewWriter) open(head []byte) error { return w.openResponse(head) }

func (w *viewWriter) row(b []byte) error {
	if w.rows > 0 {
		w.rw.raw(",\r\n")
	} else {
		w.rw.raw("\r\n")
	}
	w.rows++
	w.rw.line(b)
	return w.rw.err
}

// finish ends the answer; err before the head is the request's error.
func (w *viewWriter) finish(err error, tail string) error {
	if !w.opened {
		return err
	}
	if err != nil {
		// the status is sent: CouchDB ends such an answer with an error row
		ce := toCouch(err)
		b, _ := json.Marshal(map[string]string{"error": ce.code, "reason": ce.reason})
		w.rw.raw("\r\n")
		w.rw.line(b)
	}
	if w.rows == 0 {
		tail = strings.TrimPrefix(tail, "\r\n")
	}
	w.rw.raw(tail)
	w.rw.flush()
	return nil
}

// subWriter is one result of …/_view/v/queries.
type subWriter struct {
	w     *viewWriter
	first bool
	rows  int
}

func (s *subWriter) open(head []byte) error {
	if !s.first {
		s.w.rw.raw(",")
	}
	s.w.rw.raw("\r\n")
	s.w.rw.line(head)
	return s.w.rw.err
}

func (s *subWriter) row(b []byte) error {
	if s.rows > 0 {
		s.w.rw.raw(",")
	}
	s.w.rw.raw("\r\n")
	s.rows++
	s.w.rw.line(b)
	return s.w.rw.err
}

// runView answers one view query into out.
func (g *Gateway) runView(rq *req, db, ddocID string, ddoc []byte, def *views.Def, view string, a *viewArgs, out viewOut, top bool) error {
	vi, ok := def.View(view)
	if !ok {
		return newErr(404, "not_found", "missing_named_view")
	}
	if def.Language != "javascript" && def.Language != "query" {
		// a Mango index ("query") is a view like another: its rows are
		// [fields' values] -> null, its reduce _count
		return newErr(500, "unknown_query_language", def.Language)
	}
	if def.Partitioned(g.isPartitioned(rq, db)) {
		if a.partition == "" {
			return queryParseErr("`partition` parameter is mandatory for queries to this view.")
		}
	} else if a.partition != "" {
		return queryParseErr("`partition` parameter is not supported in this design doc")
	}
	v := def.Views[vi]
	isReduce := v.Reduce != "" && a.reduce
	if v.Reduce == "" && (a.group || a.groupLevel >= 0) {
		return queryParseErr("Invalid use of grouping on a map view.")
	}
	if v.Reduce == "" && a.reduceSet && a.reduce {
		return queryParseErr("Reduce is invalid for map-only views.")
	}
	if isReduce && a.includeDocs {
		return queryParseErr("`include_docs` is invalid for reduce")
	}
	level := 0
	switch {
	case a.groupLevel >= 0:
		level = a.groupLevel
		if a.group && a.groupLevel == 0 {
			level = -1
		}
	case a.group:
		level = -1
	}
	if isReduce && a.hasKeys && len(a.keys) > 1 && !a.group {
		return queryParseErr("Multi-key fetches for reduce views must use `group=true`")
	}
	var reducer *views.Reducer
	if isReduce {
		var err error
		if reducer, err = views.NewReducer(views.JSSandbox(g.cfg.JS, db, def), v.Reduce); err != nil {
			return err
		}
	}
	ranges := [][2][]byte{}
	if a.hasKeys {
		keys := a.keys
		if a.descending {
			// CouchDB takes the keys last to first when descending
			keys = slices.Clone(keys)
			slices.Reverse(keys)
		}
		for _, k := range keys {
			ka := *a
			ka.key, ka.hasKey, ka.startKey, ka.endKey = k, true, nil, nil
			s, e, err := ka.bounds()
			if err != nil {
				return err
			}
			ranges = append(ranges, [2][]byte{s, e})
		}
	} else {
		s, e, err := a.bounds()
		if err != nil {
			return err
		}
		ranges = append(ranges, [2][]byte{s, e})
	}
	// keys=[] answers no rows, with the view's total_rows
	metaOnly := a.hasKeys && len(ranges) == 0
	if metaOnly {
		ranges = append(ranges, [2][]byte{nil, nil})
	}
	skip, limit := a.skip, a.limit
	page := 0
	if limit >= 0 && limit+skip < 1000 {
		page = limit + skip + 1
	}
	headDone := false
	var docs []*pb.ViewRow // rows waiting for their docs (include_docs)
	flushDocs := func() error {
		if len(docs) == 0 {
			return nil
		}
		bs, err := g.viewDocs(rq, db, docs, a)
		if err != nil {
			return err
		}
		for i, r := range docs {
			if err := out.row(appendViewRow(nil, r, bs[i], true)); err != nil {
				return err
			}
		}
		docs = docs[:0]
		return nil
	}
	done := false
	for ri, rg := range ranges {
		if done {
			break
		}
		args := coordinator.ViewArgs{DDocID: ddocID, DDoc: ddoc, View: view, Start: rg[0], End: rg[1],
			Descending: a.descending, Reduce: isReduce, GroupLevel: level, Update: a.update, Reducer: reducer, PageRows: page}
		if a.partition != "" {
			args.Partition = a.partition
			args.Start, args.End = views.PartitionBounds(a.partition, rg[0], rg[1])
		}
		if ri > 0 {
			args.Update = "false" // the first key's query brought the index up to date
		}
		err := g.c.View(rq.ctx, db, args, func(m coordinator.ViewMeta) error {
			if headDone {
				return nil
			}
			headDone = true
			var head []byte
			if isReduce {
				head = []byte(`{`)
				if a.updateSeq {
					head = append(head, `"update_seq":`...)
					head = docjson.AppendString(head, m.UpdateSeq)
					head = append(head, ',')
				}
				head = append(head, `"rows":[`...)
			} else if !a.sorted {
				head = append(head, `{"rows":[`...) // unsorted rows have no offset
			} else {
				head = append(head, `{"total_rows":`...)
				head = strconv.AppendUint(head, m.TotalRows, 10)
				head = append(head, `,"offset":`...)
				off := m.Offset // with keys, the first key's
				if metaOnly {
					off = 0
				}
				head = strconv.AppendUint(head, min(off+uint64(skip), m.TotalRows), 10)
				if a.updateSeq {
					head = append(head, `,"update_seq":`...)
					head = docjson.AppendString(head, m.UpdateSeq)
				}
				head = append(head, `,"rows":[`...)
			}
			return out.open(head)
		}, func(r *pb.ViewRow) error {
			if metaOnly {
				return errStopView
			}
			if skip > 0 {
				skip--
				return nil
			}
			if limit == 0 {
				done = true
				return errStopView
			}
			if limit > 0 {
				limit--
			}
			if a.includeDocs {
				docs = append(docs, r)
				if len(docs) >= 100 {
					return flushDocs()
				}
				return nil
			}
			return out.row(appendViewRow(nil, r, nil, !isReduce))
		})
		if errors.Is(err, errStopView) {
			err = nil
		}
		if errors.Is(err, coordinator.ErrViewNotFound) {
			return newErr(404, "not_found", "missing_named_view")
		}
		if err != nil {
			return err
		}
	}
	if err := flushDocs(); err != nil {
		return err
	}
	if !headDone {
		return out.open([]byte(`{"rows":[`))
	}
	return nil
}

var errStopView = errors.New("httpgw: view: enough rows")

// appendViewRow writes one row: {"id","key","value"[,"doc"]}, or a
// group's {"key","value"}.
func appendViewRow(b []byte, r *pb.ViewRow, doc []byte, withID bool) []byte {
	b = append(b, '{')
	if withID {
		b = append(b, `"id":`...)
		b = docjson.AppendString(b, r.Id)
		b = append(b, ',')
	}
	b = append(b, `"key":`...)
	b = append(b, r.Key...)
	b = append(b, `,"value":`...)
	b = append(b, r.Value...)
	if doc != nil {
		b = append(b, `,"doc":`...)
		b = append(b, doc...)
	}
	return append(b, '}')
}

// viewDocs reads the docs of rows (include_docs): the row's doc, or the
// one its value links to ({"_id": …, "_rev": …}); null for one not there.
func (g *Gateway) viewDocs(rq *req, db string, rows []*pb.ViewRow, a *viewArgs) ([][]byte, error) {
	ms := make([]*pb.GetDoc, len(rows))
	linked := make([]bool, len(rows))
	for i, r := range rows {
		id, rev := r.Id, ""
		if len(r.Value) > 0 && r.Value[0] == '{' {
			var link struct {
				ID  *string `json:"_id"`
				Rev string  `json:"_rev"`
			}
			if json.Unmarshal(r.Value, &link) == nil && link.ID != nil {
				id, rev = *link.ID, link.Rev
				linked[i] = true
			}
		}
		ms[i] = &pb.GetDoc{Id: id, WithAttsData: a.attachments}
		if rev != "" {
			ms[i].Revs = []string{rev}
		}
	}
	got, err := g.c.GetDocs(rq.ctx, db, ms)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(rows))
	o := &couchdoc.Options{Conflicts: a.conflicts, Attachments: a.attachments}
	// the reader's rule (package policy): a doc it may not read is null,
	// another owner's _replicator doc shown without its credentials
	rule := g.pol.ReadRule(rq.ctx, rq.who(), db)
	for i, d := range got {
		out[i] = []byte("null")
		if d.Err != nil || d.Reply == nil || d.Reply.Info == nil || len(d.Reply.Bodies) == 0 || !rule.Visible(ms[i].Id) {
			continue
		}
		if rule.Rewrites() {
			d.Reply.Bodies[0].Json = rule.Doc(d.Reply.Bodies[0].Json)
		}
		b := d.Reply.Bodies[0]
		if b.Missing || (b.Deleted && len(ms[i].Revs) == 0) {
			continue
		}
		oi := o
		if linked[i] {
			// a linked doc comes as it is, without its conflicts (CouchDB)
			oi = &couchdoc.Options{Attachments: a.attachments}
		}
		out[i] = couchdoc.Append(nil, d.Reply.Info.Id, d.Reply.Info, b, oi)
	}
	return out, nil
}

// handleDesignInfo is GET /db/_design/ddoc/_info: the index's signature
// and how far it is built (its first view read without waiting).
func (g *Gateway) handleDesignInfo(rq *req, db, ddocID string) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET")
	}
	ddoc, def, err := g.loadDesign(rq, db, ddocID)
	if err != nil {
		return err
	}
	var seq, active uint64
	var compacting bool
	if len(def.Views) > 0 {
		args := coordinator.ViewArgs{DDocID: ddocID, DDoc: ddoc, View: def.Views[0].Name, Update: "false", PageRows: 1}
		err := g.c.View(rq.ctx, db, args, func(m coordinator.ViewMeta) error {
			seq, active, compacting = m.SeqSum, m.Active, m.CompactRunning
			return errStopView
		}, func(*pb.ViewRow) error { return errStopView })
		if err != nil && !errors.Is(err, errStopView) {
			return err
		}
	}
	name := strings.TrimPrefix(ddocID, "_design/")
	return g.writeJSON(rq, 200, map[string]any{"name": name, "view_index": map[string]any{
		"signature": def.SigHex(), "language": def.Language, "update_seq": seq, "purge_seq": 0,
		"updater_running": false, "waiting_clients": 0, "waiting_commit": false, "compact_running": compacting,
		"updates_pending": map[string]int{"minimum": 0, "preferred": 0, "total": 0},
		// the rows' bytes; they sit in the node's LSM beside the database's
		// records, which compacts them: file is what they hold
		"sizes": map[string]uint64{"file": active, "external": active, "active": active},
		// the string collation's tables (CouchDB names its ICU's)
		"collator_versions": []string{collate.TablesVersion},
	}})
}

// viewBody reads a POSTed query: a JSON object.
func (g *Gateway) viewBody(rq *req) (map[string]json.RawMessage, error) {
	b, err := readBody(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, errInvalidJSON
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, badRequest("Request body must be a JSON object")
	}
	return body, nil
}
