package httpgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/settee/settee/docjson"
	"github.com/settee/settee/node"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/rights"
	"github.com/settee/settee/views"
)

var dbNameRE = regexp.MustCompile(`^[a-z][a-z0-9_$()+/-]*$`)

const maxDBNameLen = 238

var systemDBs = map[string]bool{"_users": true, "_replicator": true, "_global_changes": true}

func illegalDBName(name string) error {
	return newErr(400, "illegal_database_name", "Name: '"+name+"'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
}

func checkDBName(name string) error {
	if len(name) > maxDBNameLen {
		return newErr(400, "database_name_too_long", "At least one path segment of `"+name+"` is too long.")
	}
	if systemDBs[name] || dbNameRE.MatchString(name) {
		return nil
	}
	return illegalDBName(name)
}

func (g *Gateway) routeDB(rq *req) error {
	db := rq.segs[0]
	if len(rq.segs) == 1 {
		return g.handleDB(rq, db)
	}
	second, rest := rq.segs[1], rq.segs[2:]
	if len(rq.segs) == 2 && second == "" {
		return g.handleDB(rq, db)
	}
	if db == usersDB {
		if err := g.usersGate(rq, second, rest); err != nil {
			return err
		}
	}
	switch second {
	case "_all_docs":
		return g.handleAllDocs(rq, db, "", "", rest)
	case "_design_docs":
		return g.handleAllDocs(rq, db, "_design/", "", rest)
	case "_local_docs":
		return g.handleAllDocs(rq, db, "_local/", "", rest)
	case "_partition":
		return g.handlePartition(rq, db, rest)
	case "_bulk_docs":
		return g.handleBulkDocs(rq, db)
	case "_bulk_get":
		return g.handleBulkGet(rq, db)
	case "_changes":
		return g.handleChanges(rq, db)
	case "_revs_diff":
		return g.handleRevsDiff(rq, db, false)
	case "_missing_revs":
		return g.handleRevsDiff(rq, db, true)
	case "_security":
		return g.handleSecurity(rq, db)
	case "_revs_limit":
		return g.handleRevsLimit(rq, db)
	case "_shards":
		return g.handleShards(rq, db, rest)
	case "_sync_shards":
		return g.handleSyncShards(rq, db)
	case "_ensure_full_commit":
		return g.handleEnsureFullCommit(rq, db)
	case "_view_cleanup":
		return g.handleViewCleanup(rq, db)
	case "_find":
		return g.handleFind(rq, db, false)
	case "_explain":
		return g.handleFind(rq, db, true)
	case "_index":
		return g.handleIndex(rq, db, rest)
	case "_compact":
		return g.handleCompact(rq, db, rest)
	case "_purge":
		return g.handlePurge(rq, db)
	case "_purged_infos_limit":
		return g.handlePurgedInfosLimit(rq, db)
	case "_purged_infos":
		if len(rest) > 0 {
			return errMissing
		}
		return g.handlePurgedInfos(rq, db)
	case "_local":
		// chttpd_db:db_req's clauses: /db/_local and /db/_local/ name no
		// doc, /db/_local/NAME/... is an attachment a local doc cannot have
		switch {
		case len(rest) == 0 || len(rest) == 1 && rest[0] == "":
			return errBadLocalID
		case len(rest) > 1:
			return badRequest("_local documents do not accept attachments.")
		}
		return g.handleLocal(rq, db, "_local/"+rest[0])
	case "_design":
		if len(rest) == 0 || len(rest) == 1 && rest[0] == "" {
			// /db/_design and /db/_design/ are the doc "_design"
			// (CouchDB's path has no empty last segment): 404 to a
			// read, "Only reserved document ids..." to a write
			return g.handleDocOrAtt(rq, db, "_design", nil)
		}
		if len(rest) >= 2 && designPath(rest[1]) {
			return g.handleDesignPath(rq, db, "_design/"+rest[0], rest[1:])
		}
		return g.handleDocOrAtt(rq, db, "_design/"+rest[0], rest[1:])
	}
	if strings.HasPrefix(second, "_local/") && len(rest) == 0 {
		// only _design%2F is redirected: _local%2FNAME is the doc
		return g.handleLocal(rq, db, second)
	}
	if strings.HasPrefix(second, "_design/") || strings.HasPrefix(second, "_local/") {
		if isDesign(second) && (rq.r.Method == http.MethodGet || rq.r.Method == http.MethodHead) {
			// CouchDB redirects an encoded slash to the canonical path
			// (a design doc's; a _local doc's is read as it is)
			u := *rq.r.URL
			u.RawPath = ""
			u.Path = "/" + db + "/" + second
			if len(rest) > 0 {
				u.Path += "/" + strings.Join(rest, "/")
			}
			rq.w.Header().Set("Location", g.base(rq)+u.EscapedPath()+queryString(rq))
			rawAnswer(rq)
			rq.w.WriteHeader(http.StatusMovedPermanently)
			return nil
		}
		if strings.HasPrefix(second, "_local/") {
			return g.handleLocal(rq, db, second)
		}
		if len(rest) > 0 && designPath(rest[0]) {
			return g.handleDesignPath(rq, db, second, rest)
		}
		return g.handleDocOrAtt(rq, db, second, rest)
	}
	// an unknown _name is a doc id to CouchDB: its parameters are read,
	// it is not found, a write of it is an illegal id
	return g.handleDocOrAtt(rq, db, second, rest)
}

func queryString(rq *req) string {
	if rq.r.URL.RawQuery == "" {
		return ""
	}
	return "?" + rq.r.URL.RawQuery
}

// base is the client-visible base URL (for Location headers).
func (g *Gateway) base(rq *req) string {
	scheme := "http"
	if rq.r.TLS != nil {
		scheme = "https"
	}
	if p := rq.r.Header.Get("X-Forwarded-Proto"); p != "" {
		scheme = p
	}
	// behind a proxy, Location names the host the client asked for
	// (CouchDB's [httpd] x_forwarded_host)
	if h := rq.r.Header.Get("X-Forwarded-Host"); h != "" {
		return scheme + "://" + h
	}
	return scheme + "://" + rq.r.Host
}

func (g *Gateway) handleDB(rq *req, db string) error {
	switch rq.r.Method {
	case http.MethodPut:
		if err := requireAdmin(rq); err != nil {
			return err
		}
		if err := checkDBName(db); err != nil {
			return err
		}
		q, err := shardsParam(rq, "q")
		if err != nil {
			return err
		}
		if q > 256 {
			return badRequest("q must be between 1 and 256")
		}
		n, err := shardsParam(rq, "n")
		if err != nil {
			return err
		}
		partitioned := false
		if v, ok := rq.q["partitioned"]; ok && len(v) > 0 {
			switch v[len(v)-1] {
			case "true":
				partitioned = true
			case "false":
			default:
				return badRequest("Invalid `partitioned` parameter")
			}
		}
		if partitioned && strings.HasPrefix(db, "_") {
			return badRequest("Cannot partition a system database")
		}
		all, err := g.dbs.CreateDB(rq.ctx, db, node.DBOptions{Q: q, N: n, Partitioned: partitioned})
		if err != nil {
			return err
		}
		rq.w.Header().Set("Location", g.base(rq)+"/"+couchEscape(db))
		if !all {
			return g.writeJSON(rq, 202, okBody)
		}
		return g.writeJSON(rq, 201, okBody)
	case http.MethodGet, http.MethodHead:
		if err := g.requireMember(rq, db); err != nil {
			return err
		}
		b, err := g.dbInfo(rq, db)
		if err != nil {
			return err
		}
		return g.writeJSON(rq, 200, append(b, '\n'))
	case http.MethodDelete:
		if rq.q.Has("rev") {
			return badRequest("You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
		}
		if err := requireAdmin(rq); err != nil {
			return err
		}
		all, err := g.dbs.DeleteDB(rq.ctx, db)
		if err != nil {
			return err
		}
		if !all {
			return g.writeJSON(rq, 202, okBody)
		}
		return g.writeJSON(rq, 200, okBody)
	case http.MethodPost:
		if err := g.requireMember(rq, db); err != nil {
			return err
		}
		if err := requireJSON(rq); err != nil {
			return err
		}
		return g.postDoc(rq, db)
	}
	// CouchDB's words: it leaves PUT out of the list
	return methodNotAllowed("DELETE,GET,HEAD,POST")
}

// dbProps are a database's props: {"partitioned":true} or {}.
type dbProps struct {
	Partitioned bool `json:"partitioned,omitempty"`
}

type dbInfoJSON struct {
	InstanceStartTime string           `json:"instance_start_time"`
	DBName            string           `json:"db_name"`
	PurgeSeq          string           `json:"purge_seq"`
	UpdateSeq         string           `json:"update_seq"`
	Sizes             map[string]int64 `json:"sizes"`
	Props             dbProps          `json:"props"`
	DocDelCount       uint64           `json:"doc_del_count"`
	DocCount          uint64           `json:"doc_count"`
	DiskFormatVersion int              `json:"disk_format_version"`
	CompactRunning    bool             `json:"compact_running"`
	Cluster           map[string]int   `json:"cluster"`
}

func (g *Gateway) dbInfo(rq *req, db string) ([]byte, error) {
	info, err := g.c.DBInfo(rq.ctx, db)
	if err != nil {
		return nil, err
	}
	disk, err := g.c.DiskInfo(rq.ctx, db)
	if err != nil {
		return nil, err
	}
	n := int(info.Record.N)
	if n < 1 {
		n = 1
	}
	return json.Marshal(dbInfoJSON{
		InstanceStartTime: strconv.FormatInt(info.Record.CreatedUs, 10),
		DBName:            db,
		PurgeSeq:          strconv.FormatUint(info.PurgeSeq, 10) + "-g1AAAAAA",
		UpdateSeq:         info.UpdateSeq,
		// a database's view and Mango indexes live in the same store
		// under its copies' keys: their bytes count in file and active
		// (CouchDB's index files are apart and db info leaves them out)
		Sizes: map[string]int64{"file": disk.FileSize + disk.IndexFile, "external": info.External,
			"active": info.Active + disk.IndexActive},
		DocDelCount:       info.DelCount,
		DocCount:          info.DocCount,
		DiskFormatVersion: 8,
		Props:             dbProps{Partitioned: info.Record.Partitioned},
		CompactRunning:    disk.CompactRunning,
		Cluster:           map[string]int{"q": int(info.Record.Q), "n": n, "w": n/2 + 1, "r": n/2 + 1},
	})
}

func (g *Gateway) handleSecurity(rq *req, db string) error {
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		if err := g.requireMember(rq, db); err != nil {
			return err
		}
		info, err := g.c.DBInfo(rq.ctx, db)
		if err != nil {
			return err
		}
		sec := info.Meta.Security
		if len(sec) == 0 {
			sec = []byte("{}")
		}
		return g.writeJSON(rq, 200, append(append([]byte{}, sec...), '\n'))
	case http.MethodPut:
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
		b, err := readBody(rq, mediumBody)
		if err != nil {
			return err
		}
		if !docjson.Valid(b) {
			return errInvalidJSON
		}
		// who may, how it is read and stored: the policy's
		if err := g.pol.SetSecurity(rq.ctx, rq.who(), db, b); err != nil {
			var se *rights.SecurityError
			switch {
			case errors.As(err, &se):
				return badRequest(se.Member + " must be a JSON object with string arrays names and roles")
			case errors.Is(err, rights.ErrSecurity), errors.Is(err, rights.ErrInvalid):
				return errInvalidJSON
			}
			return err
		}
		return g.writeJSON(rq, 200, okBody)
	}
	return methodNotAllowed("PUT,GET") // CouchDB's words
}

func (g *Gateway) handleRevsLimit(rq *req, db string) error {
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		if err := g.requireMember(rq, db); err != nil {
			return err
		}
		info, err := g.c.DBInfo(rq.ctx, db)
		if err != nil {
			return err
		}
		return g.writeJSON(rq, 200, []byte(strconv.FormatUint(info.Meta.RevsLimit, 10)+"\n"))
	case http.MethodPut:
		if err := g.requireDBAdmin(rq, db); err != nil {
			return err
		}
		b, err := readBody(rq, 1024)
		if err != nil {
			return err
		}
		if !docjson.Valid(b) {
			return errInvalidJSON // before the value's type (chttpd:json_body)
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 32)
		if err != nil || n == 0 {
			return badRequest("Rev limit has to be an integer")
		}
		if err := g.c.SetMeta(rq.ctx, db, &pb.SetMeta{RevsLimit: n}); err != nil {
			return err
		}
		return g.writeJSON(rq, 200, okBody)
	}
	return methodNotAllowed("PUT,GET") // CouchDB's words
}

func (g *Gateway) handleEnsureFullCommit(rq *req, db string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	if err := g.requireMember(rq, db); err != nil {
		return err
	}
	info, err := g.c.DBInfo(rq.ctx, db)
	if err != nil {
		return err
	}
	// every acknowledged write is already synced; flush what was cast
	if err := g.c.Flush(rq.ctx, db); err != nil {
		return err
	}
	return g.writeJSON(rq, 201, map[string]any{"ok": true, "instance_start_time": strconv.FormatInt(info.Record.CreatedUs, 10)})
}

// handleViewCleanup removes index files of views no design doc names. settee
// has no views yet, so there is never anything to remove.
func (g *Gateway) handleViewCleanup(rq *req, db string) error {
	if rq.r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	// CouchDB 3.5 takes any Content-Type here
	if err := g.requireMaintainer(rq, db); err != nil {
		return err
	}
	// the signatures of the design docs there are now; every other index
	// of every copy goes
	var keep [][16]byte
	err := g.eachDesign(rq, db, func(id string, body []byte) {
		if def, err := views.ParseDesign(id, body); err == nil && len(def.Views) > 0 {
			keep = append(keep, def.Sig)
		}
	})
	if err != nil {
		return err
	}
	if err := g.c.ViewCleanup(rq.ctx, db, keep); err != nil {
		return err
	}
	return g.writeJSON(rq, 202, okBody)
}

// designPath names what a design doc serves under it (not an attachment).
func designPath(s string) bool {
	switch s {
	case "_view", "_info", "_show", "_list", "_update", "_rewrite":
		return true
	}
	return false
}

// shardsParam is a database's q or n as CouchDB's create_db_req reads it:
// a positive integer, else 400 with its reason; 0 when not given (the
// node's default).
func shardsParam(rq *req, name string) (int, error) {
	v, ok := rq.q[name]
	if !ok || len(v) == 0 {
		return 0, nil
	}
	n, err := strconv.Atoi(v[len(v)-1])
	if err != nil || n <= 0 {
		return 0, badRequest("The `" + name + "` value should be a positive integer.")
	}
	return n, nil
}
