package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeCouch is a test-only, in-memory server with just the endpoints bench
// uses, answering as CouchDB does. The unit under test is the client.
type fakeCouch struct {
	srv  *httptest.Server
	auth string // required Authorization header ("" = none)

	// Knobs, set before the run.
	bulkStatus int         // status of _bulk_docs answers (default 201)
	bulkDocErr bool        // answer one conflict per _bulk_docs batch
	onGetDoc   func(n int) // called on every GET /db/doc with its count
	// badGet and badPut, when set, may replace the answer to the n-th
	// GET /db/doc or PUT /db/doc (status 0: answer as usual).
	badGet func(n int) (status int, body string)
	badPut func(n int) (status int, body string)

	mu          sync.Mutex
	dbs         map[string]*fakeDB
	createQuery url.Values
	deleted     map[string]*fakeDB // dbs as they were when deleted
	inBulk      int
	maxInBulk   int
	gets        int
	puts        int
	unauth      int
	seenPaths   map[string]int
}

type fakeDB struct {
	docs map[string]*fakeDoc
	seq  int
}

type fakeDoc struct {
	rev    string
	gen    int
	seq    int
	fields map[string]json.RawMessage // without _id/_rev
}

func newFakeCouch(t *testing.T, auth string) *fakeCouch {
	t.Helper()
	f := &fakeCouch{auth: auth, bulkStatus: http.StatusCreated, dbs: map[string]*fakeDB{},
		deleted: map[string]*fakeDB{}, seenPaths: map[string]int{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

// url returns the server URL with credentials in the userinfo.
func (f *fakeCouch) url(user, pw string) string {
	u, _ := url.Parse(f.srv.URL)
	if user != "" {
		u.User = url.UserPassword(user, pw)
	}
	return u.String()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func couchErr(w http.ResponseWriter, status int, e, reason string) {
	writeJSON(w, status, map[string]string{"error": e, "reason": reason})
}

func (f *fakeCouch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.auth != "" && r.Header.Get("Authorization") != f.auth {
		f.mu.Lock()
		f.unauth++
		f.mu.Unlock()
		couchErr(w, http.StatusUnauthorized, "unauthorized", "Name or password is incorrect.")
		return
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	kind := r.Method + " " + segs[0]
	if len(segs) > 1 {
		kind = r.Method + " /db/" + segs[1]
		if !strings.HasPrefix(segs[1], "_") {
			kind = r.Method + " /db/doc"
		}
	} else if !strings.HasPrefix(segs[0], "_") && segs[0] != "" {
		kind = r.Method + " /db"
	}
	f.mu.Lock()
	f.seenPaths[kind]++
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"couchdb": "Welcome", "version": "3.5.2", "git_sha": "abc1234",
			"vendor": map[string]string{"name": "fake"}})
	case r.URL.Path == "/_membership":
		writeJSON(w, 200, map[string]any{"all_nodes": []string{"a@x", "b@x"}, "cluster_nodes": []string{"a@x", "b@x"}})
	case r.URL.Path == "/_all_dbs":
		f.allDBs(w, r)
	case len(segs) == 1:
		f.dbReq(w, r, segs[0])
	case len(segs) == 2:
		f.mu.Lock()
		db := f.dbs[segs[0]]
		f.mu.Unlock()
		if db == nil {
			couchErr(w, 404, "not_found", "Database does not exist.")
			return
		}
		switch {
		case segs[1] == "_bulk_docs" && r.Method == http.MethodPost:
			f.bulkDocs(w, r, db)
		case segs[1] == "_all_docs" && r.Method == http.MethodGet:
			f.allDocs(w, r, db)
		case segs[1] == "_changes" && r.Method == http.MethodGet:
			f.changes(w, db)
		case strings.HasPrefix(segs[1], "_"):
			couchErr(w, 400, "bad_request", "unsupported")
		case r.Method == http.MethodGet:
			f.getDoc(w, db, segs[1])
		case r.Method == http.MethodPut:
			f.putDoc(w, r, db, segs[1])
		default:
			couchErr(w, 405, "method_not_allowed", "Only GET,PUT allowed")
		}
	default:
		couchErr(w, 400, "bad_request", "unsupported path")
	}
}

func (f *fakeCouch) allDBs(w http.ResponseWriter, r *http.Request) {
	var start, end string
	if err := json.Unmarshal([]byte(r.URL.Query().Get("start_key")), &start); err != nil {
		couchErr(w, 400, "bad_request", "start_key")
		return
	}
	if err := json.Unmarshal([]byte(r.URL.Query().Get("end_key")), &end); err != nil {
		couchErr(w, 400, "bad_request", "end_key")
		return
	}
	f.mu.Lock()
	var names []string
	for n := range f.dbs {
		if n >= start && n <= end {
			names = append(names, n)
		}
	}
	f.mu.Unlock()
	slices.Sort(names)
	writeJSON(w, 200, names)
}

func (f *fakeCouch) dbReq(w http.ResponseWriter, r *http.Request, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	db := f.dbs[name]
	switch r.Method {
	case http.MethodPut:
		if db != nil {
			couchErr(w, 412, "file_exists", "The database could not be created, the file already exists.")
			return
		}
		f.dbs[name] = &fakeDB{docs: map[string]*fakeDoc{}}
		f.createQuery = r.URL.Query()
		writeJSON(w, 201, map[string]bool{"ok": true})
	case http.MethodDelete:
		if db == nil {
			couchErr(w, 404, "not_found", "Database does not exist.")
			return
		}
		f.deleted[name] = db
		delete(f.dbs, name)
		writeJSON(w, 200, map[string]bool{"ok": true})
	case http.MethodGet:
		if db == nil {
			couchErr(w, 404, "not_found", "Database does not exist.")
			return
		}
		writeJSON(w, 200, map[string]any{"db_name": name, "doc_count": len(db.docs), "update_seq": strconv.Itoa(db.seq),
			"cluster": map[string]int{"q": 2, "n": 1, "w": 1, "r": 1}})
	default:
		couchErr(w, 405, "method_not_allowed", "")
	}
}

// update applies one doc write under f.mu and returns its result row.
func (f *fakeCouch) update(db *fakeDB, id string, fields map[string]json.RawMessage) map[string]any {
	var rev string
	if raw, ok := fields["_rev"]; ok {
		_ = json.Unmarshal(raw, &rev)
	}
	delete(fields, "_id")
	delete(fields, "_rev")
	cur := db.docs[id]
	if (cur == nil && rev != "") || (cur != nil && rev != cur.rev) {
		return map[string]any{"id": id, "error": "conflict", "reason": "Document update conflict."}
	}
	gen := 1
	if cur != nil {
		gen = cur.gen + 1
	}
	db.seq++
	d := &fakeDoc{gen: gen, seq: db.seq, fields: fields, rev: fmt.Sprintf("%d-%032x", gen, db.seq)}
	db.docs[id] = d
	return map[string]any{"ok": true, "id": id, "rev": d.rev}
}

func (f *fakeCouch) bulkDocs(w http.ResponseWriter, r *http.Request, db *fakeDB) {
	f.mu.Lock()
	f.inBulk++
	f.maxInBulk = max(f.maxInBulk, f.inBulk)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inBulk--
		f.mu.Unlock()
	}()
	var req struct {
		Docs []map[string]json.RawMessage `json:"docs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		couchErr(w, 400, "bad_request", err.Error())
		return
	}
	f.mu.Lock()
	res := make([]map[string]any, 0, len(req.Docs))
	for i, d := range req.Docs {
		var id string
		_ = json.Unmarshal(d["_id"], &id)
		if f.bulkDocErr && i == len(req.Docs)/2 {
			res = append(res, map[string]any{"id": id, "error": "conflict", "reason": "Document update conflict."})
			continue
		}
		res = append(res, f.update(db, id, d))
	}
	f.mu.Unlock()
	writeJSON(w, f.bulkStatus, res)
}

// docJSON renders a stored doc with _id and _rev first.
func docJSON(id string, d *fakeDoc) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"_id":%q,"_rev":%q`, id, d.rev)
	for k, v := range d.fields {
		kb, _ := json.Marshal(k)
		b.WriteByte(',')
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (f *fakeCouch) getDoc(w http.ResponseWriter, db *fakeDB, id string) {
	f.mu.Lock()
	f.gets++
	n := f.gets
	d := db.docs[id]
	var body []byte
	if d != nil {
		body = docJSON(id, d)
	}
	hook, bad := f.onGetDoc, f.badGet
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if bad != nil {
		if st, b := bad(n); st != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(st)
			_, _ = io.WriteString(w, b)
			return
		}
	}
	if d == nil {
		couchErr(w, 404, "not_found", "missing")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", `"`+d.rev+`"`)
	_, _ = w.Write(body)
}

func (f *fakeCouch) putDoc(w http.ResponseWriter, r *http.Request, db *fakeDB, id string) {
	var fields map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&fields); err != nil {
		couchErr(w, 400, "bad_request", err.Error())
		return
	}
	f.mu.Lock()
	f.puts++
	n, bad := f.puts, f.badPut
	f.mu.Unlock()
	if bad != nil {
		if st, b := bad(n); st != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(st)
			_, _ = io.WriteString(w, b)
			return
		}
	}
	f.mu.Lock()
	res := f.update(db, id, fields)
	f.mu.Unlock()
	if _, bad := res["error"]; bad {
		writeJSON(w, 409, res)
		return
	}
	writeJSON(w, 201, res)
}

// allDocs streams rows sorted by id, flushing as it goes.
func (f *fakeCouch) allDocs(w http.ResponseWriter, r *http.Request, db *fakeDB) {
	include := r.URL.Query().Get("include_docs") == "true"
	f.mu.Lock()
	ids := make([]string, 0, len(db.docs))
	for id := range db.docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rows := make([][]byte, len(ids))
	for i, id := range ids {
		d := db.docs[id]
		row := fmt.Sprintf(`{"id":%q,"key":%q,"value":{"rev":%q}`, id, id, d.rev)
		if include {
			row += `,"doc":` + string(docJSON(id, d))
		}
		rows[i] = []byte(row + "}")
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"total_rows":%d,"offset":0,"rows":[`+"\r\n", len(rows))
	streamRowsTo(w, rows)
	_, _ = io.WriteString(w, "\r\n]}\n")
}

func (f *fakeCouch) changes(w http.ResponseWriter, db *fakeDB) {
	f.mu.Lock()
	type ch struct {
		id string
		d  *fakeDoc
	}
	all := make([]ch, 0, len(db.docs))
	for id, d := range db.docs {
		all = append(all, ch{id, d})
	}
	slices.SortFunc(all, func(a, b ch) int { return a.d.seq - b.d.seq })
	rows := make([][]byte, len(all))
	for i, c := range all {
		rows[i] = fmt.Appendf(nil, `{"seq":"%d-g1AAAA","id":%q,"changes":[{"rev":%q}]}`, c.d.seq, c.id, c.d.rev)
	}
	last := db.seq
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"results":[`+"\n")
	streamRowsTo(w, rows)
	fmt.Fprintf(w, "\n],\n\"last_seq\":\"%d-g1AAAA\",\"pending\":0}\n", last)
}

func streamRowsTo(w http.ResponseWriter, rows [][]byte) {
	fl, _ := w.(http.Flusher)
	for i, row := range rows {
		if i > 0 {
			_, _ = io.WriteString(w, ",\r\n")
		}
		_, _ = w.Write(row)
		if fl != nil && i%500 == 499 {
			fl.Flush()
		}
	}
}

// deletedDB returns the database as it was when deleted, or nil.
func (f *fakeCouch) deletedDB(name string) *fakeDB {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deleted[name]
}
