package httpgw

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// handleBulkDocs writes a batch. Docs are tagged 0..n-1 (ids may repeat)
// and the coordinator answers by tag (seed 000). One bad id or oversize doc
// fails the whole request before anything is written, as CouchDB does.
func (g *Gateway) handleBulkDocs(rq *req, db string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	b, err := readBody(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return err
	}
	bd, err := docjson.ParseBulkDocs(b)
	if err != nil {
		return err
	}
	newEdits := bd.NewEdits
	if !bd.HasNewEdits {
		if newEdits, err = boolParam(rq, "new_edits", true); err != nil {
			return err
		}
	}
	maxDoc := g.maxDocumentSize() // couchdb/max_document_size, live
	ids := make([]string, len(bd.Docs))
	parsed := make([]*docjson.Doc, len(bd.Docs))
	for i, raw := range bd.Docs {
		d, err := docjson.ParseDoc(raw)
		if err != nil {
			return err
		}
		id := d.ID
		if !d.HasID {
			id = uuids.next()
		}
		if int64(len(raw)) > maxDoc {
			return newErr(413, "document_too_large", id)
		}
		if err := checkDocID(id); err != nil {
			return err
		}
		ids[i], parsed[i] = id, d
	}
	if bd.AllOrNothing {
		out := make([]map[string]string, len(ids))
		for i, id := range ids {
			out[i] = map[string]string{"id": id, "rev": "0-", "error": "not_implemented", "reason": "all_or_nothing is not supported"}
		}
		return g.writeJSON(rq, 417, out)
	}
	// a user doc the _users rules refuse fails alone, as a row error
	refused := make([]*pb.Error, len(parsed))
	if db == usersDB {
		for i, d := range parsed {
			if nd, err := g.checkUserWrite(rq, ids[i], d, newEdits); err != nil {
				refused[i] = userRuleErr(err)
			} else {
				parsed[i] = nd
			}
		}
	}
	var designErr error // whether the writer may write design docs, asked once
	designChecked := false
	for i, d := range parsed {
		if refused[i] != nil {
			continue
		}
		var err error
		if isDesign(ids[i]) && !designChecked {
			designErr, designChecked = g.requireDBAdmin(rq, db), true
		}
		if isDesign(ids[i]) && designErr != nil {
			// a design doc from a member fails alone, as CouchDB
			err = designErr
		} else if isDesign(ids[i]) {
			g.forgetDesigns(db)
			if !d.Deleted {
				err = g.checkDesign(ids[i], d.Body)
			}
		} else {
			err = g.validateWrite(rq, db, ids[i], d, newEdits)
		}
		if err != nil {
			ce := toCouch(err)
			refused[i] = &pb.Error{Code: ce.code, Reason: ce.reason}
		}
	}
	// _local docs in the batch are stored as local docs (no rev tree, rev
	// 0-N), as CouchDB does; the others go to the shards together
	var updates []*pb.DocUpdate
	var at []int // the batch position of updates[tag]
	for i, d := range parsed {
		if strings.HasPrefix(ids[i], "_local/") || refused[i] != nil {
			continue
		}
		u, err := docUpdate(uint32(len(updates)), ids[i], d, newEdits)
		if err != nil {
			return err
		}
		if err := g.checkAttSizes(u.Atts); err != nil {
			return err
		}
		updates, at = append(updates, u), append(at, i)
	}
	w := bd.W
	if !bd.HasW {
		w = quorumParam(rq, "w")
	}
	written, err := g.c.UpdateDocs(rq.ctx, db, updates, newEdits, w)
	if err != nil {
		return err
	}
	out := make([]coordinator.Outcome, len(parsed))
	for tag, o := range written {
		out[at[tag]] = o
	}
	for i, d := range parsed {
		switch {
		case refused[i] != nil:
			out[i] = coordinator.Outcome{Err: refused[i]}
			if !newEdits {
				out[i].Rev = d.Rev // CouchDB names the replicated rev it refused
			}
		case strings.HasPrefix(ids[i], "_local/"):
			out[i] = g.putLocalInBatch(rq, db, ids[i], d)
		}
	}
	status := 201
	buf := make([]byte, 0, 64*len(out)+2)
	buf = append(buf, '[')
	n := 0
	for i, o := range out {
		if o.Accepted {
			status = 202
		}
		if !newEdits && o.Err == nil {
			continue
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		n++
		if o.Err != nil {
			buf = append(buf, `{"id":`...)
			buf = docjson.AppendString(buf, ids[i])
			if o.Rev != "" {
				buf = append(buf, `,"rev":`...)
				buf = docjson.AppendString(buf, o.Rev)
			}
			buf = append(buf, `,"error":`...)
			buf = docjson.AppendString(buf, o.Err.Code)
			buf = append(buf, `,"reason":`...)
			buf = docjson.AppendString(buf, o.Err.Reason)
			buf = append(buf, '}')
			continue
		}
		buf = append(buf, `{"ok":true,"id":`...)
		buf = docjson.AppendString(buf, ids[i])
		buf = append(buf, `,"rev":`...)
		buf = docjson.AppendString(buf, o.Rev)
		buf = append(buf, '}')
	}
	buf = append(buf, "]\n"...)
	return g.writeJSON(rq, status, buf)
}

// putLocalInBatch writes one _local doc of a _bulk_docs batch.
func (g *Gateway) putLocalInBatch(rq *req, db, id string, d *docjson.Doc) coordinator.Outcome {
	rev, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: id, Rev: d.Rev, Json: d.Body, Deleted: d.Deleted})
	if err != nil {
		ce := toCouch(err)
		return coordinator.Outcome{Err: &pb.Error{Code: ce.code, Reason: ce.reason}}
	}
	return coordinator.Outcome{Rev: rev}
}

type bulkGetItem struct {
	ID        string   `json:"id"`
	Rev       string   `json:"rev"`
	AttsSince []string `json:"atts_since"`
}

// handleBulkGet fetches many docs (revs) in one request, as replicators do.
func (g *Gateway) handleBulkGet(rq *req, db string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	var body struct {
		Docs json.RawMessage `json:"docs"`
	}
	if err := g.decodeJSON(rq, &body); err != nil {
		return err
	}
	var items []bulkGetItem
	if len(body.Docs) == 0 {
		return badRequest("Missing JSON list of 'docs'.")
	}
	if err := json.Unmarshal(body.Docs, &items); err != nil {
		return badRequest("`docs` parameter must be an array of objects with an `id`.")
	}
	o, err := bulkGetOpts(rq)
	if err != nil {
		return err
	}
	latest := anyTrue(rq, "latest")
	mt, mp := wantsBulkGetMultipart(rq)
	results := make([]*bulkGetResult, len(items))
	// the valid items are read in one coordinator call: a request per
	// shard copy, not a goroutine and a request per doc
	var reads []*pb.GetDoc
	var readIdx []int
	usersAdmin := db == usersDB && g.usersAdmin(rq)
	for i := range items {
		res, m := bulkGetPrepare(&items[i], o, latest, mp)
		results[i] = res
		if m != nil && db == usersDB && userMayRead(usersAdmin, rq.user, m.Id) != nil {
			// another user's doc is not there for this reader (CouchDB 3.5
			// answers an internal_fabric_error for every item here)
			res.code, res.reason, m = "not_found", "missing", nil
		}
		if m != nil {
			reads = append(reads, m)
			readIdx = append(readIdx, i)
		}
	}
	if len(reads) > 0 {
		got, err := g.c.GetDocs(rq.ctx, db, reads)
		if err != nil {
			return err
		}
		for j, i := range readIdx {
			results[i].finish(got[j].Reply, got[j].Err)
		}
	}
	if mp {
		return g.writeBulkGetMultipart(rq, mt, results)
	}
	buf := []byte(`{"results":[`)
	for i, r := range results {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = r.appendJSON(buf)
	}
	buf = append(buf, "]}\n"...)
	return g.writeJSON(rq, 200, buf)
}

// bulkGetOpts reads _bulk_get's doc options as CouchDB does
// (chttpd_db:parse_doc_query): a flag is set by any value "true", other
// values are ignored, not a 400.
func bulkGetOpts(rq *req) (*couchdoc.Options, error) {
	o := &couchdoc.Options{Revs: anyTrue(rq, "revs"), RevsInfo: anyTrue(rq, "revs_info"),
		Conflicts: anyTrue(rq, "conflicts"), DeletedConflicts: anyTrue(rq, "deleted_conflicts"),
		LocalSeq: anyTrue(rq, "local_seq"), Attachments: anyTrue(rq, "attachments"),
		AttEncodingInfo: anyTrue(rq, "att_encoding_info")}
	if anyTrue(rq, "meta") {
		o.Conflicts, o.DeletedConflicts, o.RevsInfo = true, true, true
	}
	if _, err := jsonParam(rq, &o.AttsSince, "atts_since"); err != nil {
		return nil, err
	}
	return o, nil
}

func bulkGetError(id, rev, code, reason string) []byte {
	b := appendRevError([]byte(`{"error":`), id, rev, code, reason)
	return append(b, '}')
}

// appendRevError appends _bulk_get's error object for one rev:
// {"id","rev","error","reason"}.
func appendRevError(b []byte, id, rev, code, reason string) []byte {
	b = append(b, `{"id":`...)
	b = docjson.AppendString(b, id)
	b = append(b, `,"rev":`...)
	b = docjson.AppendString(b, rev)
	b = append(b, `,"error":`...)
	b = docjson.AppendString(b, code)
	b = append(b, `,"reason":`...)
	b = docjson.AppendString(b, reason)
	return append(b, '}')
}

// bulkGetResult is one item of _bulk_get: the revs read, or the item's
// error (code set).
type bulkGetResult struct {
	item         *bulkGetItem
	opts         couchdoc.Options
	reply        *pb.DocReply
	rev          string // as shown in errors
	code, reason string
}

// bulkGetPrepare checks one item and returns the read it needs (nil when
// the item is answered with an error already).
func bulkGetPrepare(it *bulkGetItem, base *couchdoc.Options, latest, allAtts bool) (*bulkGetResult, *pb.GetDoc) {
	res := &bulkGetResult{item: it, opts: *base, rev: it.Rev}
	if len(it.AttsSince) > 0 {
		res.opts.AttsSince = it.AttsSince
	}
	if res.rev == "" {
		res.rev = "undefined"
	}
	if it.ID == "" {
		res.code, res.reason = "illegal_docid", "Document id must not be empty"
		return res, nil
	}
	o := &res.opts
	m := &pb.GetDoc{Id: it.ID, Latest: latest, WithAttsData: allAtts || o.Attachments || len(o.AttsSince) > 0}
	if it.Rev != "" {
		if _, err := revtree.ParseRev(it.Rev); err != nil {
			res.code, res.reason = "bad_request", "Invalid rev format"
			return res, nil
		}
		m.Revs = []string{it.Rev}
	} else {
		// no rev: every leaf, as CouchDB answers (open_revs=all)
		m.OpenRevsAll = true
	}
	return res, m
}

// finish takes the read's answer.
func (res *bulkGetResult) finish(r *pb.DocReply, err error) {
	switch {
	case err != nil:
		ce := toCouch(err)
		res.code, res.reason = ce.code, ce.reason
	case r.Info == nil || len(r.Bodies) == 0:
		res.code, res.reason = "not_found", "missing"
	default:
		if len(r.Bodies) > 1 {
			sortRevBodies(r.Bodies)
		}
		res.reply = r
	}
}

// appendJSON renders the item as _bulk_get's JSON answer has it.
func (res *bulkGetResult) appendJSON(out []byte) []byte {
	it := res.item
	out = append(out, `{"id":`...)
	out = docjson.AppendString(out, it.ID)
	out = append(out, `,"docs":[`...)
	if res.code != "" {
		out = append(out, bulkGetError(it.ID, res.rev, res.code, res.reason)...)
		return append(out, "]}"...)
	}
	for n, b := range res.reply.Bodies {
		if n > 0 {
			out = append(out, ',')
		}
		if b.Missing {
			out = append(out, bulkGetError(it.ID, b.Rev, "not_found", "missing")...)
			continue
		}
		out = append(out, `{"ok":`...)
		out = couchdoc.Append(out, it.ID, res.reply.Info, b, &res.opts)
		out = append(out, '}')
	}
	return append(out, "]}"...)
}

// handleRevsDiff answers which of the given revs the database lacks.
func (g *Gateway) handleRevsDiff(rq *req, db string, legacy bool) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	var body map[string][]string
	if err := g.decodeJSON(rq, &body); err != nil {
		return err
	}
	ids := make([]string, 0, len(body))
	for id := range body {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	infos, err := g.c.GetDocInfos(rq.ctx, db, ids)
	if err != nil {
		return err
	}
	// the answer is appended as it is worked out, ids in order (what
	// encoding/json made of a map, at a fraction of the cost)
	out := make([]byte, 0, 64*len(ids)+32)
	if legacy {
		out = append(out, `{"missing_revs":`...)
	}
	out = append(out, '{')
	n := 0
	for i, id := range ids {
		info := infos[i]
		var missing []revtree.Rev
		seen := map[revtree.Rev]bool{}
		for _, s := range body[id] {
			r, err := revtree.ParseRev(s)
			if err != nil {
				return errBadRev
			}
			if seen[r] {
				continue
			}
			seen[r] = true
			if info == nil || revtree.Find(info, r) < 0 {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			continue
		}
		sort.Slice(missing, func(a, b int) bool {
			if missing[a].Pos != missing[b].Pos {
				return missing[a].Pos < missing[b].Pos
			}
			return missing[a].Hash < missing[b].Hash
		})
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = docjson.AppendString(out, id)
		if legacy {
			out = append(out, ':')
		} else {
			out = append(out, `:{"missing":`...)
		}
		var maxPos uint64
		for j, m := range missing {
			out = append(out, "[,"[min(j, 1)])
			out = docjson.AppendString(out, m.String())
			maxPos = max(maxPos, m.Pos)
		}
		out = append(out, ']')
		if legacy {
			continue
		}
		if info != nil {
			k := 0
			for _, l := range revtree.Leaves(info) {
				if l.Rev.Pos < maxPos {
					if k == 0 {
						out = append(out, `,"possible_ancestors":[`...)
					} else {
						out = append(out, ',')
					}
					k++
					out = docjson.AppendString(out, l.Rev.String())
				}
			}
			if k > 0 {
				out = append(out, ']')
			}
		}
		out = append(out, '}')
	}
	out = append(out, '}')
	if legacy {
		out = append(out, '}')
	}
	return g.writeJSON(rq, 200, append(out, '\n'))
}
