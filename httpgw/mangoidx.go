package httpgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/mango"
	pb "github.com/settee/settee/proto"
)

// Mango indexes: /db/_index. A Mango index is a view of a design doc with
// "language": "query", stored as CouchDB stores it (so it replicates and
// shows in _design_docs) and built by the views engine (views.queryMaps).

// mangoIndex is one index of a database, with the design doc that holds
// it (a view query carries the doc).
type mangoIndex struct {
	ix   *mango.Index
	ddoc []byte
}

// mangoIndexes lists db's Mango indexes: every view of every live
// design doc with language "query", in design doc id then view name
// order; views CouchDB would skip as invalid are left out. The policy's
// design docs hold them (parsed once per doc and load).
func (g *Gateway) mangoIndexes(rq *req, db string) ([]mangoIndex, error) {
	ds, err := g.pol.Designs(rq.ctx, db)
	if err != nil {
		return nil, err
	}
	var out []mangoIndex
	for _, d := range ds {
		for _, ix := range d.MangoIndexes() {
			out = append(out, mangoIndex{ix: ix, ddoc: d.Body})
		}
	}
	return out, nil
}

// withMembers is a stored body (a JSON object) with members put first:
// name, value pairs, the values strings.
func withMembers(body []byte, kv ...string) []byte {
	out := []byte{'{'}
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			out = append(out, ',')
		}
		out = docjson.AppendString(out, kv[i])
		out = append(out, ':')
		out = docjson.AppendString(out, kv[i+1])
	}
	rest := bytes.TrimSpace(body)
	if len(rest) > 1 && rest[0] == '{' {
		rest = bytes.TrimSpace(rest[1:])
		if len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, rest...)
	}
	return append(out, '}')
}

// handleIndex serves /db/_index, /db/_index/_bulk_delete and
// /db/_index/{ddoc}/json/{name}.
func (g *Gateway) handleIndex(rq *req, db string, rest []string) error {
	if len(rest) > 0 && rest[0] == "_bulk_delete" && len(rest) == 1 {
		if rq.r.Method != http.MethodPost {
			return methodNotAllowed("POST")
		}
		return g.bulkDeleteIndexes(rq, db)
	}
	if len(rest) > 0 && rest[0] != "" {
		if rq.r.Method != http.MethodDelete {
			return methodNotAllowed("DELETE")
		}
		return g.deleteIndex(rq, db, rest)
	}
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		return g.listIndexes(rq, db)
	case http.MethodPost:
		return g.createIndex(rq, db)
	}
	return methodNotAllowed("GET,POST")
}

// listIndexes is GET /db/_index: _all_docs first, then every json index;
// limit and skip page the list, total_rows counts it whole.
func (g *Gateway) listIndexes(rq *req, db string) error {
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	limit, skip := -1, 0
	for name, dst := range map[string]*int{"limit": &limit, "skip": &skip} {
		if s := rq.q.Get(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return newErr(400, "query_parse_error", "Invalid value for "+name+": "+s)
			}
			*dst = n
		}
	}
	idxs, err := g.mangoIndexes(rq, db)
	if err != nil {
		return err
	}
	all := append([]*mango.Index{mango.AllDocsIndex()}, make([]*mango.Index, 0, len(idxs))...)
	for _, m := range idxs {
		all = append(all, m.ix)
	}
	b := []byte(`{"total_rows":`)
	b = strconv.AppendInt(b, int64(len(all)), 10)
	b = append(b, `,"indexes":[`...)
	n := 0
	for i, ix := range all {
		if i < skip || (limit >= 0 && n >= limit) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, ix.JSON()...)
		n++
	}
	return g.writeJSON(rq, 200, append(b, "]}\n"...))
}

// createIndex is POST /db/_index: the index's view added to its design doc
// (made when missing), or "exists" when the design doc has it already.
func (g *Gateway) createIndex(rq *req, db string) error {
	if err := requireJSON(rq); err != nil {
		return err
	}
	if err := g.requireDBAdmin(rq, db); err != nil {
		return err
	}
	body, err := readBody(rq, mediumBody)
	if err != nil {
		return err
	}
	ir, err := mango.ParseIndexRequest(body)
	if err != nil {
		return mangoErr(err)
	}
	answer := func(result string) error {
		b, _ := json.Marshal(mango.Object{{Key: "result", Value: result}, {Key: "id", Value: ir.DDoc}, {Key: "name", Value: ir.Name}})
		return g.writeJSON(rq, 200, append(b, '\n'))
	}
	// a concurrent edit of the design doc: read it again and retry
	for attempt := 0; ; attempt++ {
		cur, rev, err := g.readDDoc(rq, db, ir.DDoc)
		if err != nil {
			return err
		}
		doc, exists, err := ir.AddTo(cur)
		if err != nil {
			return mangoErr(err)
		}
		if exists {
			return answer("exists")
		}
		if cur != nil {
			doc = withMembers(doc, "_id", ir.DDoc, "_rev", rev)
		}
		err = g.saveDDoc(rq, db, doc)
		if errors.Is(err, coordinator.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return err
		}
		return answer("created")
	}
}

// deleteIndex is DELETE /db/_index/{ddoc}/json/{name} ({ddoc} with or
// without _design/): the view goes from its design doc, the design doc
// with its last view.
func (g *Gateway) deleteIndex(rq *req, db string, rest []string) error {
	if err := g.requireDBAdmin(rq, db); err != nil {
		return err
	}
	if rest[0] == "_design" && len(rest) > 1 {
		rest = append([]string{"_design/" + rest[1]}, rest[2:]...)
	}
	if len(rest) != 3 {
		return errMissing
	}
	ddocID, typ, name := rest[0], rest[1], rest[2]
	if !strings.HasPrefix(ddocID, "_design/") {
		ddocID = "_design/" + ddocID
	}
	if typ != "json" {
		return errMissing
	}
	for attempt := 0; ; attempt++ {
		cur, rev, err := g.readDDoc(rq, db, ddocID)
		if err != nil {
			return err
		}
		if cur == nil {
			return errMissing
		}
		var m map[string]json.RawMessage
		vs := map[string]json.RawMessage{}
		var lang string
		if json.Unmarshal(cur, &m) == nil {
			_ = json.Unmarshal(m["language"], &lang)
			_ = json.Unmarshal(m["views"], &vs)
		}
		if _, ok := vs[name]; !ok || lang != "query" {
			return errMissing
		}
		delete(vs, name)
		m["_id"], _ = json.Marshal(ddocID)
		m["_rev"], _ = json.Marshal(rev)
		if len(vs) == 0 {
			m = map[string]json.RawMessage{"_id": m["_id"], "_rev": m["_rev"], "_deleted": json.RawMessage("true")}
		} else {
			m["views"], _ = json.Marshal(vs)
		}
		doc, _ := json.Marshal(m)
		err = g.saveDDoc(rq, db, doc)
		if errors.Is(err, coordinator.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return err
		}
		return g.writeJSON(rq, 200, okBody)
	}
}

// bulkDeleteIndexes is POST /db/_index/_bulk_delete {"docids":[…]}: each
// design doc named is deleted whole; the answer lists which went.
func (g *Gateway) bulkDeleteIndexes(rq *req, db string) error {
	if err := requireJSON(rq); err != nil {
		return err
	}
	if err := g.requireDBAdmin(rq, db); err != nil {
		return err
	}
	body, err := readBody(rq, mediumBody)
	if err != nil {
		return err
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return errInvalidJSON
	}
	raw, ok := req["docids"]
	if !ok {
		return newErr(400, "missing_required_key", "Missing required key: docids")
	}
	var ids []string
	if json.Unmarshal(raw, &ids) != nil {
		return newErr(400, "invalid_bulk_docs", "Bulk Delete requires an array of non-null docids. Docids: "+string(raw))
	}
	type okRow struct {
		ID string `json:"id"`
		OK bool   `json:"ok"`
	}
	type failRow struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	out := struct {
		Success []okRow   `json:"success"`
		Fail    []failRow `json:"fail"`
	}{[]okRow{}, []failRow{}}
	for _, id := range ids {
		if !strings.HasPrefix(id, "_design/") {
			id = "_design/" + id
		}
		cur, rev, err := g.readDDoc(rq, db, id)
		if err != nil {
			return err
		}
		if cur == nil {
			out.Fail = append(out.Fail, failRow{id, "not_found"})
			continue
		}
		doc, _ := json.Marshal(map[string]any{"_id": id, "_rev": rev, "_deleted": true})
		if err := g.saveDDoc(rq, db, doc); err != nil {
			out.Fail = append(out.Fail, failRow{id, toCouch(err).code})
			continue
		}
		out.Success = append(out.Success, okRow{id, true})
	}
	return g.writeJSON(rq, 200, out)
}

// readDDoc reads a design doc's body and rev (nil: missing or deleted).
func (g *Gateway) readDDoc(rq *req, db, id string) ([]byte, string, error) {
	r, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id})
	if errors.Is(err, coordinator.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || r.Bodies[0].Deleted {
		return nil, "", nil
	}
	return r.Bodies[0].Json, r.Bodies[0].Rev, nil
}

// saveDDoc writes a design doc as a PUT by this request's user would.
func (g *Gateway) saveDDoc(rq *req, db string, doc []byte) error {
	d, err := docjson.ParseDoc(doc)
	if err != nil {
		return err
	}
	if !d.Deleted {
		if err := g.pol.CheckDesign(rq.ctx, db, d.ID, d.Body); err != nil {
			return err
		}
	}
	_, err = g.saveUpdated(rq, db, d)
	return err
}

// mangoErr is a mango request or plan error as CouchDB answers it.
func mangoErr(err error) error {
	var re *mango.RequestError
	if errors.As(err, &re) {
		return newErr(re.Status, re.Err, re.Reason)
	}
	var pe *mango.PlanError
	if errors.As(err, &pe) {
		return newErr(pe.Status, pe.Err, pe.Reason)
	}
	var se *mango.Error
	if errors.As(err, &se) {
		return newErr(400, "invalid_operator", se.Reason)
	}
	return err
}
