package httpgw

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

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
	if err := requireAdmin(rq); err != nil {
		return err
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	if len(rest) > 0 && rest[0] != "" {
		// view compaction: settee has no view indexes yet, so there is
		// nothing to compact for a design doc that exists
		if _, err := g.c.GetDoc(rq.ctx, db, &pb.GetDoc{Id: "_design/" + rest[0]}); err != nil {
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

// dbDiskFigures is what db info needs beyond the shard headers: the bytes on
// disk attributed to the database and whether a compaction runs.
func (g *Gateway) dbDiskFigures(rq *req, db string) (file int64, running bool, err error) {
	d, err := g.c.DiskInfo(rq.ctx, db)
	if err != nil {
		return 0, false, err
	}
	return d.FileSize, d.CompactRunning, nil
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
	d := json.NewDecoder(bytes.NewReader(b))
	tok, err := d.Token()
	if err != nil {
		return errInvalidJSON
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return badRequest("Request body must be a JSON object")
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
		var revs []string
		if err := d.Decode(&revs); err != nil {
			return badRequest("Document revisions must be a list of revision strings")
		}
		revCount += len(revs)
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

// Settings is the node's runtime configuration shown and changed by
// /_node/_local/_config: settee keeps only the auto-compaction ("smoosh")
// section there.
type Settings interface {
	ConfigSections() []string
	ConfigSection(section string) (map[string]string, bool)
	// SetConfig changes a key and returns its old value.
	SetConfig(section, key, value string) (old string, err error)
}

// handleConfig serves GET /_node/_local/_config[/section[/key]] and PUT of a
// key with a JSON string body, answering the old value (CouchDB's shapes).
func (g *Gateway) handleConfig(rq *req, rest []string) error {
	st := g.cfg.Settings
	if st == nil {
		return errMissing
	}
	for len(rest) > 0 && rest[len(rest)-1] == "" {
		rest = rest[:len(rest)-1]
	}
	switch len(rest) {
	case 0:
		if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
			return methodNotAllowed("GET,HEAD")
		}
		all := map[string]map[string]string{}
		for _, s := range st.ConfigSections() {
			all[s], _ = st.ConfigSection(s)
		}
		return g.writeJSON(rq, 200, all)
	case 1:
		if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
			return methodNotAllowed("GET,HEAD")
		}
		sec, ok := st.ConfigSection(rest[0])
		if !ok {
			sec = map[string]string{}
		}
		return g.writeJSON(rq, 200, sec)
	case 2:
		switch rq.r.Method {
		case http.MethodGet, http.MethodHead:
			sec, _ := st.ConfigSection(rest[0])
			v, ok := sec[rest[1]]
			if !ok {
				return newErr(404, "not_found", "unknown_config_value")
			}
			return g.writeJSON(rq, 200, v)
		case http.MethodPut:
			b, err := readBody(rq, 64<<10)
			if err != nil {
				return err
			}
			var v string
			if err := json.Unmarshal(b, &v); err != nil {
				return badRequest("config value must be a JSON string")
			}
			old, err := st.SetConfig(rest[0], rest[1], v)
			if err != nil {
				return err
			}
			return g.writeJSON(rq, 200, old)
		}
		return methodNotAllowed("GET,HEAD,PUT")
	}
	return errMissing
}
