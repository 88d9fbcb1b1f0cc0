package httpgw

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// couchEscape percent-encodes s as CouchDB's couch_util:url_encode does
// for the Location of a write: every byte but letters, digits and "_.-:"
// (a slash too, so "_design/d" is "_design%2Fd").
func couchEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-', c == ':':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

func (g *Gateway) handleDocOrAtt(rq *req, db, id string, att []string) error {
	if len(att) > 0 && !(len(att) == 1 && att[0] == "") {
		return g.handleAtt(rq, db, id, strings.Join(att, "/"))
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		return g.getDoc(rq, db, id)
	case http.MethodPut:
		return g.putDoc(rq, db, id)
	case http.MethodDelete:
		return g.deleteDoc(rq, db, id)
	case "COPY":
		return g.copyDoc(rq, db, id)
	case http.MethodPost:
		return g.postForm(rq, db, id)
	}
	return methodNotAllowed("DELETE,GET,HEAD,POST,PUT,COPY")
}

func isDesign(id string) bool { return strings.HasPrefix(id, "_design/") }

// docFlag is a doc read's boolean option as CouchDB's parse_doc_query
// reads it: set by a value "true", any other value ignored (not an error,
// unlike a view's parameters).
func docFlag(rq *req, name string) bool {
	for _, v := range rq.q[name] {
		if v == "true" {
			return true
		}
	}
	return false
}

func (g *Gateway) parseDocOpts(rq *req) (*couchdoc.Options, error) {
	o := &couchdoc.Options{}
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"revs", &o.Revs}, {"revs_info", &o.RevsInfo}, {"conflicts", &o.Conflicts},
		{"deleted_conflicts", &o.DeletedConflicts}, {"local_seq", &o.LocalSeq},
		{"attachments", &o.Attachments}, {"att_encoding_info", &o.AttEncodingInfo}} {
		*p.dst = docFlag(rq, p.name)
	}
	if docFlag(rq, "meta") {
		o.Conflicts, o.DeletedConflicts, o.RevsInfo = true, true, true
	}
	var err error
	if o.AttsSince, err = attsSinceParam(rq); err != nil {
		return nil, err
	}
	return o, nil
}

// attsSinceParam reads atts_since as CouchDB's parse_doc_query: JSON
// (invalid UTF-8 JSON else), a list (Invalid list of revisions else) of
// revs (Invalid rev format else); the last one given counts.
func attsSinceParam(rq *req) ([]string, error) {
	vals := rq.q["atts_since"]
	if len(vals) == 0 {
		return nil, nil
	}
	return parseAttsSince(vals[len(vals)-1])
}

func parseAttsSince(spec string) ([]string, error) {
	var v any
	if json.Unmarshal([]byte(spec), &v) != nil {
		return nil, errInvalidJSON
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("Invalid list of revisions")
	}
	revs := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok || !validRev(s) {
			return nil, errBadRev
		}
		revs = append(revs, s)
	}
	return revs, nil
}

func (g *Gateway) getDoc(rq *req, db, id string) error {
	if err := checkDocQuery(rq); err != nil {
		return err
	}
	if err := g.checkReadID(rq, db, id); err != nil {
		return err
	}
	o, err := g.parseDocOpts(rq)
	if err != nil {
		return err
	}
	latest := docFlag(rq, "latest")
	// r: copies that must answer (CouchDB's read quorum; 0 is the
	// database's default, n/2+1)
	quorum := quorumParam(rq, "r")
	// every parameter is read before the doc is: a bad ?rev= fails an
	// open_revs read too
	rev, err := revQuery(rq)
	if err != nil {
		return err
	}
	m := &pb.GetDoc{Id: id, Latest: latest, WithAttsData: o.Attachments || len(o.AttsSince) > 0}
	if ors, ok := rq.q["open_revs"]; ok && len(ors) > 0 {
		all, revs, err := parseOpenRevs(ors[len(ors)-1])
		if err != nil {
			return err
		}
		// an empty list is no open_revs: CouchDB reads the doc then
		if all || len(revs) > 0 {
			noMeta(o)
			m.OpenRevsAll = all
			return g.getOpenRevs(rq, db, m, revs, o, quorum)
		}
	}
	if rev != "" {
		if unstoredRev(rev) && !latest {
			return errMissing
		}
		// latest=true opens the winner whatever the rev, as CouchDB's
		// doc GET does (it drops the rev); a rev read renders no meta
		if !latest {
			m.Revs = []string{rev}
			noMeta(o)
		}
	}
	if len(m.Revs) == 0 && !m.WithAttsData && !o.Revs && !o.RevsInfo && !o.DeletedConflicts && !o.LocalSeq && !o.AttEncodingInfo {
		// the winner as stored: the shard makes its JSON inside the
		// read, one copy from the stored bytes (a decoded body and
		// couchdoc.Append copied each GET's body twice)
		m.Render, m.RenderConflicts = true, o.Conflicts
	}
	// the reader's rule (package policy): in _replicator another
	// owner's doc is shown without its credentials, so not as stored
	rule := g.pol.ReadRule(rq.ctx, rq.who(), db)
	if rule.Rewrites() {
		m.Render = false
	}
	var r *pb.DocReply
	if m.Render {
		// rendered into a buffer of the pool's, not a doc-sized one
		// allocated, zeroed and collected per GET: under 130 readers
		// that allocation drove the GC (docs/benchmarks.md, session 21)
		bp := g.docBufs.get()
		r, *bp, err = g.c.GetDocInto(rq.ctx, db, m, quorum, *bp)
		// the answer's bytes are written (or copied by the writer)
		// before getDoc returns: io.Writer keeps none of them
		defer g.docBufs.put(bp)
	} else {
		r, err = g.c.GetDocR(rq.ctx, db, m, quorum)
	}
	if err != nil {
		return err
	}
	if r.Info == nil {
		return errMissing
	}
	if len(r.Bodies) == 0 || r.Bodies[0].Missing {
		return errMissing
	}
	rb := r.Bodies[0]
	if len(m.Revs) == 0 && rb.Deleted {
		return errDeleted
	}
	if rule.Rewrites() {
		rb.Json = rule.Doc(rb.Json)
	}
	// CouchDB's doc has an ETag (and a 304) only when none of its meta
	// members is rendered: revs_info and local_seq always are, conflicts
	// and deleted_conflicts when there are some
	if !hasMeta(r.Info, o) {
		etag := `"` + rb.Rev + `"`
		rq.w.Header().Set("Etag", etag)
		if inm := rq.r.Header.Get("If-None-Match"); inm != "" && strings.TrimPrefix(inm, "W/") == etag {
			notModified(rq)
			return nil
		}
	}
	if m.WithAttsData && accepts(rq, "multipart/related", false) {
		if d := newRelatedDoc(id, r.Info, rb, *o); len(d.atts) > 0 {
			return g.writeRelated(rq, d)
		}
	}
	if r.Rendered != nil {
		return g.writeJSON(rq, 200, append(r.Rendered, '\n'))
	}
	buf := couchdoc.Append(make([]byte, 0, len(rb.Json)+128), id, r.Info, rb, o)
	return g.writeJSON(rq, 200, append(buf, '\n'))
}

// maxPooledDoc: a bigger doc's buffer goes to the GC rather than stay in
// the pool for the next GET, which is most likely of a smaller doc.
const maxPooledDoc = 256 << 10

// noMeta drops the options that CouchDB renders from the doc's meta,
// which a read of given revs (?rev=, open_revs) does not have.
func noMeta(o *couchdoc.Options) {
	o.RevsInfo, o.LocalSeq, o.Conflicts, o.DeletedConflicts = false, false, false, false
}

// hasMeta tells whether the winner's rendering has a meta member.
func hasMeta(info *pb.FullDocInfo, o *couchdoc.Options) bool {
	return o.RevsInfo || o.LocalSeq ||
		o.Conflicts && len(revtree.Conflicts(info)) > 0 ||
		o.DeletedConflicts && len(revtree.DeletedConflicts(info)) > 0
}

// parseOpenRevs reads open_revs as CouchDB's parse_doc_query: "all", or
// JSON (invalid UTF-8 JSON else) that is a list (Invalid list of
// revisions else) of revs (Invalid rev format else).
func parseOpenRevs(spec string) (all bool, revs []string, err error) {
	if spec == "all" {
		return true, nil, nil
	}
	var v any
	if json.Unmarshal([]byte(spec), &v) != nil {
		return false, nil, errInvalidJSON
	}
	list, ok := v.([]any)
	if !ok {
		return false, nil, badRequest("Invalid list of revisions")
	}
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return false, nil, errBadRev
		}
		if _, err := revtree.ParseRev(s); err != nil && !unstoredRev(s) {
			return false, nil, errBadRev
		}
		revs = append(revs, s)
	}
	return false, revs, nil
}

func (g *Gateway) getOpenRevs(rq *req, db string, m *pb.GetDoc, revs []string, o *couchdoc.Options, quorum int) error {
	mixed := accepts(rq, "multipart/mixed", true) // mochiweb accepts_content_type: no Accept, */* or multipart/* too
	// a rev no tree holds ("1-") is missing without a read
	var unstored []*pb.RevBody
	for _, s := range revs {
		if unstoredRev(s) {
			unstored = append(unstored, &pb.RevBody{Rev: s, Missing: true})
		} else {
			m.Revs = append(m.Revs, s)
		}
	}
	if mixed {
		m.WithAttsData = true
	}
	r := &pb.DocReply{}
	if m.OpenRevsAll || len(m.Revs) > 0 {
		var err error
		if r, err = g.c.GetDocR(rq.ctx, db, m, quorum); err != nil {
			return err
		}
	}
	if r.Info == nil {
		if m.OpenRevsAll {
			return errMissing
		}
		r.Bodies = nil
		for _, s := range m.Revs {
			r.Bodies = append(r.Bodies, &pb.RevBody{Rev: s, Missing: true})
		}
	}
	// CouchDB lists found revs sorted by rev, then the missing ones
	found := make([]*pb.RevBody, 0, len(r.Bodies))
	var missing []*pb.RevBody
	rule := g.pol.ReadRule(rq.ctx, rq.who(), db) // what this reader may see of them
	for _, b := range r.Bodies {
		if b.Missing {
			missing = append(missing, b)
		} else {
			b.Json = rule.Doc(b.Json)
			found = append(found, b)
		}
	}
	missing = append(missing, unstored...)
	if len(unstored) > 0 && len(missing) > len(unstored) {
		// the missing in the order asked, as CouchDB lists them
		at := make(map[string]int, len(revs))
		for i, s := range revs {
			if _, ok := at[s]; !ok {
				at[s] = i
			}
		}
		sort.SliceStable(missing, func(i, j int) bool { return at[missing[i].Rev] < at[missing[j].Rev] })
	}
	sortRevBodies(found)
	if mixed {
		return g.writeOpenRevsMixed(rq, m.Id, r.Info, found, missing, *o)
	}
	buf := []byte{'['}
	for i, b := range found {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"ok":`...)
		buf = couchdoc.Append(buf, m.Id, r.Info, b, o)
		buf = append(buf, '}')
	}
	for i, b := range missing {
		if i > 0 || len(found) > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"missing":`...)
		buf = docjson.AppendString(buf, b.Rev)
		buf = append(buf, '}')
	}
	buf = append(buf, "]\n"...)
	return g.writeJSON(rq, 200, buf)
}

func sortRevBodies(b []*pb.RevBody) {
	less := func(x, y *pb.RevBody) bool {
		rx, _ := revtree.ParseRev(x.Rev)
		ry, _ := revtree.ParseRev(y.Rev)
		if rx.Pos != ry.Pos {
			return rx.Pos < ry.Pos
		}
		return rx.Hash < ry.Hash
	}
	for i := 1; i < len(b); i++ {
		for j := i; j > 0 && less(b[j], b[j-1]); j-- {
			b[j], b[j-1] = b[j-1], b[j]
		}
	}
}

// revFromRequest reconciles the rev given in the body, ?rev= and If-Match.
func revFromRequest(rq *req, d *docjson.Doc) error {
	q, err := revToEdit(rq)
	if err != nil {
		return err
	}
	im := strings.Trim(strings.TrimPrefix(rq.r.Header.Get("If-Match"), "W/"), `"`)
	if d.HasRev {
		if q != "" && q != d.Rev {
			return errRevMismatchQ
		}
		if im != "" && im != d.Rev {
			return errRevMismatchIM
		}
		return nil
	}
	if q != "" && im != "" && q != im {
		return errRevMismatchIM
	}
	if q != "" {
		d.Rev, d.HasRev = q, true
	} else if im != "" {
		d.Rev, d.HasRev = im, true
	}
	return nil
}

func (g *Gateway) putDoc(rq *req, db, id string) error {
	if err := checkDocQuery(rq); err != nil {
		return err
	}
	if err := g.checkWriteID(rq, db, id); err != nil {
		return err
	}
	if isDesign(id) {
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
	}
	var d *docjson.Doc
	var mp *couchdoc.Related
	boundary, isMP, err := couchdoc.RelatedBoundary(rq.r.Header.Get("Content-Type"))
	switch {
	case err != nil:
		return badRequest(err.Error())
	case isMP:
		d, mp, err = g.readMultipartDoc(rq, boundary)
	default:
		d, err = g.readDocBody(rq, g.cfg.MaxRequestSize)
	}
	if err != nil {
		return err
	}
	// CouchDB's PUT parses every ?rev= (parse_doc_query), then edits the first
	if _, err := revQuery(rq); err != nil {
		return err
	}
	if err := revFromRequest(rq, d); err != nil {
		return err
	}
	newEdits, err := boolParam(rq, "new_edits", true)
	if err != nil {
		return err
	}
	return g.writeOne(rq, db, id, d, mp, newEdits, withETag|withLocation)
}

// writeHeaders are the headers of a write's answer, as CouchDB sends them:
// a PUT has both, a POST /db only Location, a DELETE only the ETag (and a
// batch=ok write neither).
type writeHeaders uint8

const (
	withETag writeHeaders = 1 << iota
	withLocation
)

// writeOne writes a single doc and answers as CouchDB's PUT/POST/DELETE;
// mp holds the attachment parts of a multipart/related PUT.
func (g *Gateway) writeOne(rq *req, db, id string, d *docjson.Doc, mp *couchdoc.Related, newEdits bool, hdrs writeHeaders) error {
	if isDesign(id) {
		defer g.forgetDesigns(db) // a deleted one's function goes too
	}
	u, err := docUpdateMP(0, id, d, newEdits, mp)
	if err != nil {
		return err
	}
	if err := g.checkAttSizes(u.Atts); err != nil {
		return err
	}
	w := quorumParam(rq, "w")
	out, err := g.writeDocs(rq, db, []*pb.DocUpdate{u}, newEdits, w)
	if err != nil {
		return err
	}
	o := out[0]
	if o.Err != nil && rq.q.Get("batch") == "ok" && errors.Is(o.Err, coordinator.ErrConflict) {
		// CouchDB answers a batch=ok write before it is tried, so a
		// conflict is never reported to its client; settee writes it
		// first (a 202 is durable) and answers the same
		return g.writeJSON(rq, 202, map[string]any{"ok": true, "id": id})
	}
	if o.Err != nil {
		return o.Err
	}
	rev := o.Rev
	if !newEdits {
		rev = d.Rev
		if d.Revisions != nil && len(d.Revisions.IDs) > 0 {
			rev = revtree.Rev{Pos: d.Revisions.Start, Hash: d.Revisions.IDs[0]}.String()
		}
	}
	if rq.q.Get("batch") == "ok" {
		return g.writeJSON(rq, 202, map[string]any{"ok": true, "id": id})
	}
	h := rq.w.Header()
	if hdrs&withETag != 0 {
		h.Set("Etag", `"`+rev+`"`)
	}
	if hdrs&withLocation != 0 {
		h.Set("Location", g.base(rq)+"/"+couchEscape(db)+"/"+couchEscape(id))
	}
	status := 201
	switch {
	case o.Accepted:
		// before the deletion's 200, as CouchDB: a delete that reached
		// fewer than w copies is 202 like any other write
		status = 202
	case d.Deleted:
		status = 200
	}
	return g.writeJSON(rq, status, okRev(id, rev))
}

// okRev is the answer to a write: {"ok":true,"id":…,"rev":…}.
func okRev(id, rev string) []byte {
	buf := append([]byte(`{"ok":true,"id":`), docjson.AppendString(nil, id)...)
	buf = append(buf, `,"rev":`...)
	buf = docjson.AppendString(buf, rev)
	return append(buf, "}\n"...)
}

// readDocBody reads and parses a single document's body: bigger than
// max_document_size is 413 document_too_large (with CouchDB's empty
// reason), bad JSON or special members the parser's error.
func (g *Gateway) readDocBody(rq *req, limit int64) (*docjson.Doc, error) {
	// a gzipped doc is inflated no further than max_document_size: past it
	// the answer is the same 413, and memory stays the doc limit's
	gz, err := gzipped(rq)
	if err != nil {
		return nil, err
	}
	if gz {
		limit = min(limit, g.maxDocumentSize()+1)
	}
	b, err := readBody(rq, limit)
	if gz && errors.Is(err, errTooLarge) {
		return nil, newErr(413, "document_too_large", "")
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > g.maxDocumentSize() {
		return nil, newErr(413, "document_too_large", "")
	}
	return docjson.ParseDoc(b)
}

func (g *Gateway) postDoc(rq *req, db string) error {
	d, err := g.readDocBody(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return err
	}
	id := d.ID
	if !d.HasID {
		id = uuids.next()
	}
	if err := g.checkWriteID(rq, db, id); err != nil {
		return err
	}
	if isDesign(id) {
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
	}
	return g.writeOne(rq, db, id, d, nil, true, withLocation)
}

func (g *Gateway) deleteDoc(rq *req, db, id string) error {
	if err := g.checkReadID(rq, db, id); err != nil {
		return err
	}
	d := &docjson.Doc{Deleted: true, Body: []byte("{}")}
	err := revFromRequest(rq, d)
	if isDesign(id) {
		if aerr := g.requireDBAdmin(rq, db); aerr != nil {
			// CouchDB finds a stale rev before it asks who deletes
			if r, gerr := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id}); gerr == nil && r.Info != nil && !r.Info.Deleted && r.Info.Winner != d.Rev {
				return errConflict
			}
			return aerr
		}
	}
	if err == nil && !d.HasRev {
		err = errConflict
	}
	if err == nil {
		err = g.writeOne(rq, db, id, d, nil, true, withETag)
	}
	if err != nil {
		return g.whyNotDeleted(rq, db, id, err)
	}
	return nil
}

// whyNotDeleted is the answer to a DELETE that failed with err: CouchDB
// tells a doc that is not there, or deleted already, apart from a bad or
// stale rev (404 missing or deleted, whatever the rev), so the doc is
// looked up on that path only.
func (g *Gateway) whyNotDeleted(rq *req, db, id string, err error) error {
	if ce := toCouch(err); ce.status != 400 && ce.status != 409 {
		return err
	}
	r, gerr := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: id})
	switch {
	case gerr != nil && errors.Is(gerr, coordinator.ErrNotFound), gerr == nil && r.Info == nil:
		return errMissing
	case gerr == nil:
		if w, ok := revtree.Winner(r.Info); ok && w.Deleted {
			return errDeleted
		}
	}
	return err
}

// copyDoc implements COPY with a Destination header ("id" or "id?rev=R").
func (g *Gateway) copyDoc(rq *req, db, id string) error {
	// CouchDB's order: the source's rev, the Destination and its rev,
	// then the source doc
	srcRev, err := revToEdit(rq)
	if err != nil {
		return err
	}
	dest := rq.r.Header.Get("Destination")
	if dest == "" {
		return badRequest("Destination header is mandatory for COPY.")
	}
	// CouchDB refuses only http(s) URLs: an id may hold a colon
	// (org.couchdb.user:NAME), which url.Parse would take for a scheme
	if l := strings.ToLower(dest); strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
		return badRequest("Destination URL must be relative.")
	}
	destID, destQ, hasQ := strings.Cut(dest, "?")
	var destRev string
	if hasQ {
		// "id?rev=R": whatever the key, what follows "=" is the rev
		_, destRev, _ = strings.Cut(destQ, "=")
		if !validRev(destRev) {
			return errBadRev
		}
	}
	destID, err = url.PathUnescape(destID)
	if err != nil {
		return badRequest("Invalid Destination header")
	}
	if err := g.checkWriteID(rq, db, destID); err != nil {
		return err
	}
	if isDesign(destID) {
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
	}
	// the source is read as the user reads it (package policy): another
	// user's doc of _users is missing to it; the destination, written as a
	// write of it is, _local docs of _users included
	rule := g.pol.ReadRule(rq.ctx, rq.who(), db)
	if err := rule.Allow(id); err != nil {
		return err
	}
	if strings.HasPrefix(destID, "_local/") {
		if err := g.pol.CheckLocal(rq.ctx, rq.who(), db, destID); err != nil {
			return err
		}
	}
	// the source: a doc (at ?rev=) with its attachments, or a local doc
	// (by its id alone, as a GET reads one)
	var src *pb.RevBody
	if strings.HasPrefix(id, "_local/") {
		if _, ok := rq.q["rev"]; ok {
			return errMissing
		}
		ld, err := g.c.GetLocal(rq.ctx, db, id)
		if err != nil {
			return err
		}
		src = &pb.RevBody{Json: ld.Json}
	} else {
		m := &pb.GetDoc{Id: id, WithAttsData: true}
		if unstoredRev(srcRev) {
			return errMissing
		}
		if srcRev != "" {
			m.Revs = []string{srcRev}
		}
		r, err := g.c.GetDoc(rq.ctx, db, m)
		if err != nil {
			return err
		}
		if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing {
			return errMissing
		}
		src = r.Bodies[0]
		if len(m.Revs) == 0 && src.Deleted {
			return errDeleted
		}
	}
	d := &docjson.Doc{Body: rule.Doc(src.Json)}
	if destRev != "" {
		d.Rev, d.HasRev = destRev, true
	}
	if strings.HasPrefix(destID, "_local/") {
		// a local doc takes the body alone, its rev one past the one
		// given (0-1 without), as a PUT of it does
		rev, err := g.c.PutLocal(rq.ctx, db, &pb.PutLocal{Id: destID, Rev: d.Rev, Json: d.Body})
		if err != nil {
			return err
		}
		rq.w.Header().Set("Etag", `"`+rev+`"`)
		rq.w.Header().Set("Location", g.base(rq)+"/"+couchEscape(db)+"/"+couchEscape(destID))
		return g.writeJSON(rq, 201, okRev(destID, rev))
	}
	u, err := docUpdate(0, destID, d, true)
	if err != nil {
		return err
	}
	for i, a := range src.Atts {
		if i < len(src.AttData) {
			u.Atts = append(u.Atts, &pb.Att{Name: a.Name, ContentType: a.ContentType, Data: src.AttData[i], Digest: a.Digest,
				Length: a.Length, Encoding: a.Encoding, EncodedLength: a.EncodedLength})
		}
	}
	u.HasAtts = len(u.Atts) > 0
	out, err := g.writeDocs(rq, db, []*pb.DocUpdate{u}, true, 0)
	if err != nil {
		return err
	}
	if out[0].Err != nil {
		return out[0].Err
	}
	h := rq.w.Header()
	h.Set("Etag", `"`+out[0].Rev+`"`)
	h.Set("Location", g.base(rq)+"/"+couchEscape(db)+"/"+couchEscape(destID))
	status := 201
	if out[0].Accepted {
		status = 202
	}
	return g.writeJSON(rq, status, map[string]any{"ok": true, "id": destID, "rev": out[0].Rev})
}

// checkDocQuery fails as CouchDB's parse_doc_query does, which a doc GET
// or PUT runs before its work (a DELETE does not): the parameters in the
// query string's order, the first bad rev, open_revs or atts_since its
// error.
func checkDocQuery(rq *req) error {
	if rq.r.URL.RawQuery == "" {
		return nil
	}
	return queryInOrder(rq, func(k, v string) error {
		switch k {
		case "rev":
			if !validRev(v) {
				return errBadRev
			}
		case "open_revs":
			if _, _, err := parseOpenRevs(v); err != nil {
				return err
			}
		case "atts_since":
			if _, err := parseAttsSince(v); err != nil {
				return err
			}
		}
		return nil
	})
}
