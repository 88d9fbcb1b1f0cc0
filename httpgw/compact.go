package httpgw

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// Compaction, purge and disk figures: POST /db/_compact, POST /db/_purge,
// GET/PUT /db/_purged_infos_limit, and sizes.file / compact_running in db
// info.

// handleCompact starts compaction of every shard copy of db and answers at
// once (202); GET /_active_tasks shows progress. Asking again while one
// runs changes nothing and says so.
func (g *Gateway) handleCompact(rq *req, db string, rest []string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if len(rest) > 0 && rest[0] != "" {
		if err := g.requireMaintainer(rq, db); err != nil {
			return err
		}
	} else if err := requireAdmin(rq); err != nil {
		return err
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	if len(rest) > 0 && rest[0] != "" {
		// view compaction: the index's copies have the store give back
		// what its changed rows left (views.Service.Compact)
		ddocID := "_design/" + rest[0]
		_, def, err := g.loadDesign(rq, db, ddocID)
		if err != nil {
			return err
		}
		if err := g.c.ViewCompact(rq.ctx, db, ddocID, def.Sig); err != nil {
			return err
		}
		return g.writeJSON(rq, 202, okBody)
	}
	already, err := g.c.Compact(rq.ctx, db)
	if err != nil {
		return err
	}
	if already {
		return g.writeJSON(rq, 202, []byte("{\"ok\":true,\"already_running\":true}\n"))
	}
	return g.writeJSON(rq, 202, okBody)
}

// CouchDB's purge limits (max_document_id_number, max_revisions_number).
const (
	maxPurgeIDs  = 100
	maxPurgeRevs = 1000
)

// handlePurge removes revisions for good: {"id":["rev",...]} answers
// {"purge_seq":null,"purged":{"id":["rev purged",...]}} with 201.
func (g *Gateway) handlePurge(rq *req, db string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	if err := g.requireDBAdmin(rq, db); err != nil {
		return err
	}
	b, err := readBody(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return err
	}
	if !docjson.Valid(b) {
		return errInvalidJSON
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, _ := d.Token(); tok != json.Delim('{') {
		return errNotObject
	}
	var reqs []*pb.PurgeRequest
	seen := map[string]int{}
	revCount := 0
	for d.More() {
		kt, err := d.Token()
		if err != nil {
			return errInvalidJSON
		}
		id, _ := kt.(string)
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return errInvalidJSON
		}
		revs, err := revList(raw)
		if err != nil {
			return err
		}
		revCount += len(revs)
		if err := g.checkPartitionedIDs(rq, db, []string{id}); err != nil {
			return err
		}
		if i, ok := seen[id]; ok {
			reqs[i].Revs = append(reqs[i].Revs, revs...)
			continue
		}
		seen[id] = len(reqs)
		reqs = append(reqs, &pb.PurgeRequest{Id: id, Revs: revs})
	}
	if _, err := d.Token(); err != nil {
		return errInvalidJSON
	}
	if len(reqs) > maxPurgeIDs {
		return badRequest("Exceeded maximum number of documents.")
	}
	if revCount > maxPurgeRevs {
		return badRequest("Exceeded maximum number of revisions.")
	}
	results, err := g.c.Purge(rq.ctx, db, reqs)
	g.forgetDesigns(db) // a purged design doc must not be served from the cache
	if err != nil {
		return err
	}
	buf := []byte(`{"purge_seq":null,"purged":{`)
	for i, r := range results {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, _ := json.Marshal(reqs[i].Id)
		buf = append(buf, k...)
		buf = append(buf, ':')
		var purged []string
		if r != nil {
			purged = r.Purged
		}
		if purged == nil {
			purged = []string{}
		}
		v, _ := json.Marshal(purged)
		buf = append(buf, v...)
	}
	buf = append(buf, "}}\n"...)
	return g.writeJSON(rq, 201, buf)
}

// handlePurgedInfosLimit reads or sets how many purge records each shard
// keeps (default 1000).
// handlePurgedInfos is GET /db/_purged_infos (CouchDB 3.5): every purge
// the copies keep, {"id":…,"revs":[…]}, each once.
func (g *Gateway) handlePurgedInfos(rq *req, db string) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET")
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	infos, err := g.c.PurgedInfos(rq.ctx, db)
	if err != nil {
		return err
	}
	type info struct {
		ID   string   `json:"id"`
		Revs []string `json:"revs"`
	}
	out := make([]info, len(infos))
	for i, pi := range infos {
		out[i] = info{pi.Id, pi.Revs}
	}
	return g.writeJSON(rq, 200, map[string]any{"purged_infos": out})
}

func (g *Gateway) handlePurgedInfosLimit(rq *req, db string) error {
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		if err := g.requireMember(rq, db); err != nil {
			return err
		}
		d, err := g.c.DiskInfo(rq.ctx, db)
		if err != nil {
			return err
		}
		return g.writeJSON(rq, 200, []byte(strconv.FormatUint(d.PurgedInfosLimit, 10)+"\n"))
	case http.MethodPut:
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
		if err := requireJSON(rq); err != nil {
			return err
		}
		b, err := readBody(rq, 1024)
		if err != nil {
			return err
		}
		if !docjson.Valid(b) {
			return errInvalidJSON // before the value's type (chttpd:json_body)
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 63)
		if err != nil || n == 0 {
			return badRequest("`purged_infos_limit` must be positive integer")
		}
		if err := g.c.SetPurgedInfosLimit(rq.ctx, db, n); err != nil {
			return err
		}
		return g.writeJSON(rq, 200, okBody)
	}
	return methodNotAllowed("GET,HEAD,PUT")
}

// Settings is the node's runtime configuration, CouchDB's _config
// (/_node/_local/_config), and the live settings the gateway reads from
// it; node implements it.
type Settings interface {
	ConfigSections() []string
	// ConfigSection is a section's keys; false when it has none.
	ConfigSection(section string) (map[string]string, bool)
	ConfigValue(section, key string) (string, error)
	// SetConfig and DeleteConfig answer the old value.
	SetConfig(section, key, value string) (old string, err error)
	DeleteConfig(section, key string) (old string, err error)
	ReloadConfig() error
	// MaxDocumentSize and MaxAttachmentSize are couchdb/max_document_size
	// and couchdb/max_attachment_size (bytes) as they are now.
	MaxDocumentSize() int64
	MaxAttachmentSize() int64
	// ServerAdmin is the server admin of that name (nil: none).
	ServerAdmin(name string) *auth.Credential
	// RequireValidUser is chttpd/require_valid_user and
	// require_valid_user_except_for_up.
	RequireValidUser() (all, exceptUp bool)
	// ConfigGeneration changes after every write or delete, so what the
	// gateway parses from a section is parsed again only after a change.
	ConfigGeneration() uint64
	// RequestTimeout is settee/request_timeout as it is now (0: none).
	RequestTimeout() time.Duration
	// MaxRequestSize is chttpd/max_http_request_size, MaxRequestMemory
	// settee/max_request_memory_mb in bytes, IOTimeout settee/io_timeout,
	// as they are now (limits.go).
	MaxRequestSize() int64
	MaxRequestMemory() int64
	IOTimeout() time.Duration
}

var errAuthRequired = newErr(401, "unauthorized", "Authentication required.")

// requireValidUser reports whether an anonymous request is refused
// (chttpd/require_valid_user): all but a login (POST /_session), and
// /_up with require_valid_user_except_for_up.
func (g *Gateway) requireValidUser(rq *req) bool {
	if g.cfg.Settings == nil {
		return false
	}
	all, exceptUp := g.cfg.Settings.RequireValidUser()
	if !all && !exceptUp {
		return false
	}
	first := ""
	if len(rq.segs) > 0 {
		first = rq.segs[0]
	}
	switch {
	case first == "_session" && len(rq.segs) == 1 && rq.r.Method == http.MethodPost:
		return false
	case first == "_up" && len(rq.segs) == 1 && !all:
		return false
	}
	return true
}

// handleConfig serves /_node/_local/_config[/section[/key]] and
// POST …/_config/_reload, with CouchDB 3.5's shapes and answers: values
// are JSON strings; PUT and DELETE answer the old value.
func (g *Gateway) handleConfig(rq *req, rest []string) error {
	st := g.cfg.Settings
	if st == nil {
		return errMissing
	}
	if len(rest) > 0 && rest[len(rest)-1] == "" {
		// a trailing slash names the level above (CouchDB: …/admins/ is
		// the section)
		rest = rest[:len(rest)-1]
	}
	get := rq.r.Method == http.MethodGet || rq.r.Method == http.MethodHead
	switch len(rest) {
	case 0:
		if !get {
			return methodNotAllowed("GET")
		}
		all := map[string]map[string]string{}
		for _, s := range st.ConfigSections() {
			if sec, ok := st.ConfigSection(s); ok {
				all[s] = sec
			}
		}
		return g.writeJSON(rq, 200, all)
	case 1:
		if rest[0] == "_reload" {
			if rq.r.Method != http.MethodPost {
				return methodNotAllowed("POST")
			}
			if err := st.ReloadConfig(); err != nil {
				return err
			}
			return g.writeJSON(rq, 200, okBody)
		}
		if !get {
			return methodNotAllowed("GET")
		}
		sec, ok := st.ConfigSection(rest[0])
		if !ok {
			sec = map[string]string{}
		}
		return g.writeJSON(rq, 200, sec)
	case 2:
		section, key := rest[0], rest[1]
		if section == "" || key == "" {
			// …/_config//key: CouchDB's answer for a path it takes for
			// the section level
			return methodNotAllowed("GET")
		}
		switch rq.r.Method {
		case http.MethodGet, http.MethodHead:
			v, err := st.ConfigValue(section, key)
			if err != nil {
				return err
			}
			return g.writeJSON(rq, 200, v)
		case http.MethodPut:
			b, err := readBody(rq, smallBody)
			if err != nil {
				return err
			}
			var raw any
			if err := json.Unmarshal(b, &raw); err != nil {
				return errInvalidJSON
			}
			v, ok := raw.(string)
			if !ok {
				return badRequest("a JSON string expected")
			}
			old, err := st.SetConfig(section, key, v)
			if err != nil {
				return err
			}
			if section == "admins" {
				g.auth.forget()
			}
			return g.writeJSON(rq, 200, old)
		case http.MethodDelete:
			old, err := st.DeleteConfig(section, key)
			if err != nil {
				return err
			}
			if section == "admins" {
				g.auth.forget()
			}
			return g.writeJSON(rq, 200, old)
		}
		return methodNotAllowed("GET,PUT,DELETE")
	}
	return errMissing
}

// maxDocumentSize is couchdb/max_document_size now.
func (g *Gateway) maxDocumentSize() int64 {
	if g.cfg.Settings != nil {
		return g.cfg.Settings.MaxDocumentSize()
	}
	return g.cfg.MaxDocumentSize
}

// checkAttSizes refuses attachments over couchdb/max_attachment_size:
// 413 attachment_too_large naming the first, as CouchDB.
func (g *Gateway) checkAttSizes(atts []*pb.Att) error {
	if g.cfg.Settings == nil {
		return nil
	}
	limit := g.cfg.Settings.MaxAttachmentSize()
	for _, a := range atts {
		n := int64(len(a.Data))
		if a.Length > 0 {
			n = int64(a.Length) // the identity length of a compressed one
		}
		if n > limit {
			return newErr(413, "attachment_too_large", a.Name)
		}
	}
	return nil
}

// requireMaintainer lets server and database admins maintain a database's
// indexes (view compaction, _view_cleanup), with CouchDB's 401 for others.
func (g *Gateway) requireMaintainer(rq *req, db string) error {
	if g.requireDBAdmin(rq, db) != nil {
		return newErr(401, "unauthorized", "You are not a server or db admin.")
	}
	return nil
}
