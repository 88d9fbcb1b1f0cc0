package httpgw

import (
	"encoding/json"
	"errors"
	"net/http"
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
