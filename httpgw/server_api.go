package httpgw

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/settee/settee/docjson"
)

// etagOf is a strong ETag over content.
func etagOf(b []byte) string {
	sum := md5.Sum(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:]) + `"`
}

func (g *Gateway) handleRoot(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	return g.writeJSON(rq, 200, g.welcome)
}

var upBody = []byte("{\"status\":\"ok\",\"seeds\":{}}\n")

func (g *Gateway) handleUp(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	return g.writeJSON(rq, 200, upBody)
}

// uuidGen is CouchDB's "sequential" algorithm: a random 26-hex prefix and a
// 6-hex counter advanced by small random steps, so ids sort by creation.
type uuidGen struct {
	mu     sync.Mutex
	prefix string
	n      uint32
}

var uuids = &uuidGen{}

func (u *uuidGen) next() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b [1]byte
	_, _ = rand.Read(b[:])
	u.n += uint32(b[0]%0xfe) + 1
	if u.prefix == "" || u.n >= 0xfff000 {
		var p [13]byte
		_, _ = rand.Read(p[:])
		u.prefix = hex.EncodeToString(p[:])
		u.n = uint32(b[0])
	}
	return fmt.Sprintf("%s%06x", u.prefix, u.n)
}

func (g *Gateway) handleUUIDs(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET")
	}
	n := 1
	if rq.q.Has("count") {
		// CouchDB's words, for an empty count too
		v, err := strconv.Atoi(rq.q.Get("count"))
		if err != nil || v < 0 {
			return badRequest("count must be a positive integer")
		}
		if v > 1000 {
			return badRequest("count parameter too large")
		}
		n = v
	}
	out := make([]string, n)
	for i := range out {
		out[i] = uuids.next()
	}
	h := rq.w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Pragma", "no-cache")
	// as CouchDB: a date in the past, for HTTP/1.0 caches that know no Cache-Control
	h.Set("Expires", "Mon, 01 Jan 1990 00:00:00 GMT")
	h.Set("Etag", etagOf([]byte(strings.Join(out, ""))))
	return g.writeJSON(rq, 200, map[string]any{"uuids": out})
}

// dbRange filters db names with _all_dbs' startkey/endkey/key/limit/skip/descending.
func dbRange(rq *req, names []string) ([]string, error) {
	// CouchDB reads _all_dbs' parameters as a view query's (fabric's
	// all_dbs takes #mrargs): every one is checked, in order
	if _, err := parseViewArgs(queryParams(rq)); err != nil {
		return nil, err
	}
	desc, err := boolParam(rq, "descending", false)
	if err != nil {
		return nil, err
	}
	start, startBelow, hasStart, err := idKey(rq, "startkey", "start_key")
	if err != nil {
		return nil, err
	}
	end, endBelow, hasEnd, err := idKey(rq, "endkey", "end_key")
	if err != nil {
		return nil, err
	}
	incl, err := boolParam(rq, "inclusive_end", true)
	if err != nil {
		return nil, err
	}
	// key is the one name: it sets both ends, which startkey and endkey
	// then override (CouchDB reads the parameters in order; settee reads
	// key first)
	if key, keyBelow, hasKey, err := idKey(rq, "key"); err != nil {
		return nil, err
	} else if hasKey {
		if !hasStart {
			start, startBelow, hasStart = key, keyBelow, true
		}
		if !hasEnd {
			end, endBelow, hasEnd = key, keyBelow, true
		}
	}
	// a key that is not a string sorts before every name (as in
	// _all_docs: parseRangeQuery)
	if startBelow && desc || endBelow && !desc {
		return []string{}, nil
	}
	hasStart = hasStart && !startBelow
	hasEnd = hasEnd && !endBelow
	limit, err := intParam(rq, "limit", -1)
	if err != nil {
		return nil, err
	}
	skip, err := intParam(rq, "skip", 0)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	if desc {
		for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
			names[i], names[j] = names[j], names[i]
		}
	}
	out := []string{}
	for _, n := range names {
		if hasStart && ((!desc && n < start) || (desc && n > start)) {
			continue
		}
		if hasEnd {
			if (!desc && (n > end || (!incl && n == end))) || (desc && (n < end || (!incl && n == end))) {
				continue
			}
		}
		if skip > 0 {
			skip--
			continue
		}
		if limit >= 0 && len(out) >= limit {
			break
		}
		out = append(out, n)
	}
	return out, nil
}

func (g *Gateway) handleAllDBs(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	if len(rq.segs) > 1 {
		return errMissing
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	names, err := dbRange(rq, g.dbs.AllDBs(rq.ctx))
	if err != nil {
		return err
	}
	b, err := json.Marshal(names)
	if err != nil {
		return err
	}
	rq.w.Header().Set("Etag", etagOf(b))
	return g.writeJSON(rq, 200, append(b, '\n'))
}

// maxDBsInfoKeys is CouchDB's default [chttpd]
// max_db_number_for_dbs_info_req: a POST /_dbs_info with more keys is a 400.
const maxDBsInfoKeys = 100

func (g *Gateway) handleDBsInfo(rq *req) error {
	if len(rq.segs) > 1 {
		return errMissing
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	// keys as the request gave them: CouchDB looks up each and answers
	// one that is not a database's name (1, null) not_found, echoing it
	var keys []json.RawMessage
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		names, err := dbRange(rq, g.dbs.AllDBs(rq.ctx))
		if err != nil {
			return err
		}
		for _, n := range names {
			keys = append(keys, docjson.AppendString(nil, n))
		}
	case http.MethodPost:
		if err := requireJSON(rq); err != nil {
			return err
		}
		var body struct {
			Keys []json.RawMessage "json:\"keys\" reason:\"`keys` member must be an array.\""
		}
		if err := decodeJSONUpTo(rq, smallBody, &body); err != nil {
			return err
		}
		if body.Keys == nil {
			return badRequest("`keys` member must exist.")
		}
		if len(body.Keys) > maxDBsInfoKeys {
			return badRequest("too_many_keys")
		}
		keys = body.Keys
	default:
		return methodNotAllowed("GET,HEAD,POST")
	}
	type infoRow struct {
		Key   json.RawMessage `json:"key"`
		Info  json.RawMessage `json:"info,omitempty"`
		Error string          `json:"error,omitempty"`
	}
	out := make([]infoRow, 0, len(keys))
	for _, k := range keys {
		var n string
		if json.Unmarshal(k, &n) == nil {
			if info, err := g.dbInfo(rq, n); err == nil {
				out = append(out, infoRow{Key: k, Info: info})
				continue
			}
		}
		out = append(out, infoRow{Key: k, Error: "not_found"})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if rq.r.Method != http.MethodPost {
		rq.w.Header().Set("Etag", etagOf(b))
	}
	return g.writeJSON(rq, 200, append(b, '\n'))
}

func (g *Gateway) handleActiveTasks(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	return g.writeJSON(rq, 200, g.cfg.Tasks.List())
}
