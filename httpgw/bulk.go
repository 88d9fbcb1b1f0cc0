package httpgw

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
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
	partitioned := g.isPartitioned(rq, db)
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
		if partitioned {
			if err := checkPartitionedID(id); err != nil {
				return err
			}
		}
		// CouchDB parses every doc's _rev before it writes any: a bad one
		// fails the request, in either mode
		if d.HasRev && d.Rev != "" && !unstoredRev(d.Rev) {
			if _, err := revtree.ParseRev(d.Rev); err != nil {
				return errBadRev
			}
		}
		if !newEdits && strings.HasPrefix(id, "_local/") && (!d.HasRev || d.Rev == "") && (d.Revisions == nil || len(d.Revisions.IDs) == 0) {
			return errNewEditsNoRev
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
	// what the writer may write is the policy's (g.writeDocs): a doc it
	// refuses fails alone, as a row error
	refused := make([]*pb.Error, len(parsed))
	for i := range parsed {
		if isDesign(ids[i]) {
			g.forgetDesigns(db)
			break
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
		if newEdits && d.HasRev && unstoredRev(d.Rev) {
			refused[i] = &pb.Error{Code: "conflict", Reason: "Document update conflict."}
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
	written, err := g.writeDocs(rq, db, updates, newEdits, w)
	if err != nil {
		return err
	}
	out := make([]coordinator.Outcome, len(parsed))
	for tag, o := range written {
		out[at[tag]] = o
	}
	if !newEdits {
		for tag, o := range written {
			if o.Err != nil {
				refused[at[tag]] = o.Err // named with its rev below
			}
		}
	}
	for i, d := range parsed {
		switch {
		case refused[i] != nil:
			out[i] = coordinator.Outcome{Err: refused[i]}
			if !newEdits {
				out[i].Rev = d.Rev // CouchDB names the replicated rev it refused
			}
		case strings.HasPrefix(ids[i], "_local/") && g.pol.CheckLocal(rq.ctx, rq.who(), db, ids[i]) != nil:
			ce := toCouch(g.pol.CheckLocal(rq.ctx, rq.who(), db, ids[i]))
			out[i] = coordinator.Outcome{Err: &pb.Error{Code: ce.code, Reason: ce.reason}}
		case strings.HasPrefix(ids[i], "_local/") && !newEdits:
			if _, err := g.putLocalReplicated(rq, db, ids[i], d); err != nil {
				ce := toCouch(err)
				out[i] = coordinator.Outcome{Err: &pb.Error{Code: ce.code, Reason: ce.reason}}
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
	ID        string
	Rev       string
	AttsSince []string
	// what CouchDB answers an item it cannot read (code set): the item's
	// id and the rev (or the atts_since value) at fault as it was sent,
	// JSON (null where there is none)
	idJSON, revJSON []byte
	code, reason    string
}

var jsonNull = []byte("null")

// parseBulkGetItem reads one item of _bulk_get's docs as CouchDB's
// bulk_get_open_doc_revs does, in its order: an object, with an id, a valid
// doc id, a rev that parses, atts_since a list of revs that parse. A
// failure is the item's error (an answer in the results, not a 400); an id
// that is not a string is the request's (CouchDB crashes on it).
func parseBulkGetItem(raw json.RawMessage, partitioned bool) (bulkGetItem, error) {
	it := bulkGetItem{idJSON: jsonNull, revJSON: jsonNull}
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		it.code, it.reason = "bad_request", "document must be a JSON object"
		return it, nil
	}
	id, ok := m["id"]
	if !ok {
		it.code, it.reason = "bad_request", "document id missed"
		return it, nil
	}
	if json.Unmarshal(id, &it.ID) != nil || id[0] != '"' {
		return it, badRequest("`docs` parameter must be an array of objects with an `id`.")
	}
	it.idJSON = id
	err := checkDocID(it.ID)
	if err == nil && partitioned {
		err = checkPartitionedID(it.ID)
	}
	if err != nil {
		ce := toCouch(err)
		it.code, it.reason = ce.code, ce.reason
		return it, nil
	}
	if rev, ok := m["rev"]; ok {
		if !couchRev(rev, &it.Rev) {
			it.revJSON, it.code, it.reason = rev, "bad_request", "Invalid rev format"
			return it, nil
		}
	}
	if as, ok := m["atts_since"]; ok && string(as) != "null" {
		var revs []json.RawMessage
		if as[0] != '[' || json.Unmarshal(as, &revs) != nil {
			it.revJSON, it.code, it.reason = as, "bad_request", "att_since value must be array of revs."
			return it, nil
		}
		for _, r := range revs {
			var s string
			if !couchRev(r, &s) {
				it.revJSON, it.code, it.reason = r, "bad_request", "Invalid rev format"
				return it, nil
			}
			it.AttsSince = append(it.AttsSince, s)
		}
	}
	return it, nil
}

// couchRev reads a rev as CouchDB's parse_rev takes it: a string of
// digits, a dash and a hash (an empty one, or generation 0, too).
func couchRev(raw json.RawMessage, dst *string) bool {
	if raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
		return false
	}
	if unstoredRev(*dst) {
		return true
	}
	_, err := revtree.ParseRev(*dst)
	return err == nil
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
	if len(body.Docs) == 0 {
		return badRequest("Missing JSON list of 'docs'.")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body.Docs, &raws); err != nil {
		return badRequest("`docs` parameter must be an array of objects with an `id`.")
	}
	items := make([]bulkGetItem, len(raws))
	partitioned := g.isPartitioned(rq, db)
	for i, raw := range raws {
		it, err := parseBulkGetItem(raw, partitioned)
		if err != nil {
			return err
		}
		items[i] = it
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
	rule := g.pol.ReadRule(rq.ctx, rq.who(), db)
	for i := range items {
		res, m := bulkGetPrepare(&items[i], o, latest, mp)
		results[i] = res
		if m != nil && !rule.Visible(m.Id) {
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
			if rule.Rewrites() && got[j].Reply != nil {
				for _, b := range got[j].Reply.Bodies {
					if !b.Missing {
						b.Json = rule.Doc(b.Json)
					}
				}
			}
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
	// the per-doc parameters belong in the body's items: CouchDB refuses
	// the first of them it finds in the query string
	for _, kv := range strings.Split(rq.r.URL.RawQuery, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if k, err := url.QueryUnescape(k); err == nil {
			switch k {
			case "open_revs", "new_edits", "w", "rev", "atts_since":
				return nil, badRequest(`"` + k + `" query parameter is not acceptable`)
			}
		}
	}
	o := &couchdoc.Options{Revs: anyTrue(rq, "revs"), RevsInfo: anyTrue(rq, "revs_info"),
		Conflicts: anyTrue(rq, "conflicts"), DeletedConflicts: anyTrue(rq, "deleted_conflicts"),
		LocalSeq: anyTrue(rq, "local_seq"), Attachments: anyTrue(rq, "attachments"),
		AttEncodingInfo: anyTrue(rq, "att_encoding_info")}
	if anyTrue(rq, "meta") {
		o.Conflicts, o.DeletedConflicts, o.RevsInfo = true, true, true
	}
	return o, nil
}

func bulkGetError(id, rev []byte, code, reason string) []byte {
	b := appendRevError([]byte(`{"error":`), id, rev, code, reason)
	return append(b, '}')
}

// appendRevError appends _bulk_get's error object for one rev:
// {"id","rev","error","reason"}, id and rev JSON values.
func appendRevError(b []byte, id, rev []byte, code, reason string) []byte {
	b = append(b, `{"id":`...)
	b = append(b, id...)
	b = append(b, `,"rev":`...)
	b = append(b, rev...)
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
	rev          []byte // as shown in errors, JSON
	code, reason string
}

// bulkGetPrepare checks one item and returns the read it needs (nil when
// the item is answered with an error already).
func bulkGetPrepare(it *bulkGetItem, base *couchdoc.Options, latest, allAtts bool) (*bulkGetResult, *pb.GetDoc) {
	res := &bulkGetResult{item: it, opts: *base, rev: it.revJSON}
	if it.code != "" {
		res.code, res.reason = it.code, it.reason
		return res, nil
	}
	if len(it.AttsSince) > 0 {
		res.opts.AttsSince = it.AttsSince
	}
	// a doc that is not there is answered with the rev asked for, as
	// CouchDB prints it (its atom undefined when none was)
	res.rev = docjson.AppendString(nil, it.Rev)
	if it.Rev == "" {
		res.rev = []byte(`"undefined"`)
	}
	o := &res.opts
	m := &pb.GetDoc{Id: it.ID, Latest: latest, WithAttsData: allAtts || o.Attachments || len(o.AttsSince) > 0}
	if unstoredRev(it.Rev) {
		res.code, res.reason = "not_found", "missing" // a rev no tree holds
		return res, nil
	}
	if it.Rev != "" {
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
	out = append(out, it.idJSON...)
	out = append(out, `,"docs":[`...)
	if res.code != "" {
		out = append(out, bulkGetError(it.idJSON, res.rev, res.code, res.reason)...)
		return append(out, "]}"...)
	}
	for n, b := range res.reply.Bodies {
		if n > 0 {
			out = append(out, ',')
		}
		if b.Missing {
			out = append(out, bulkGetError(it.idJSON, docjson.AppendString(nil, b.Rev), "not_found", "missing")...)
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
	if err := g.checkPartitionedIDs(rq, db, ids); err != nil {
		return err
	}
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
		// CouchDB's order: a missing doc's revs as given, duplicates too;
		// an existing doc's missing ones in the parsed revs' order
		// (couch_key_tree:find_missing), duplicates too
		var missing []revtree.Rev
		for _, s := range body[id] {
			r, err := revtree.ParseRev(s)
			if err != nil && unstoredRev(s) {
				// generation 0: a rev CouchDB parses and no tree has
				_, h, _ := strings.Cut(s, "-")
				r, err = revtree.Rev{Hash: h}, nil
			}
			if err != nil {
				return errBadRev
			}
			if info == nil || revtree.Find(info, r) < 0 {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if info != nil {
			slices.SortStableFunc(missing, func(a, b revtree.Rev) int { return revtree.CompareParsed(a.String(), b.String()) })
		}
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
