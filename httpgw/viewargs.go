package httpgw

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/settee/settee/collate"
)

// viewArgs are a view query's parameters, parsed as couch_mrview_http
// does.
type viewArgs struct {
	key, startKey, endKey json.RawMessage
	hasKey                bool
	keys                  []json.RawMessage
	hasKeys               bool
	startDocID, endDocID  string
	hasStartID, hasEndID  bool
	inclusiveEnd          bool
	limit, skip           int
	descending            bool
	group                 bool
	groupLevel            int // -1: not set
	reduce                bool
	reduceSet             bool
	includeDocs           bool
	conflicts             bool
	attachments           bool
	updateSeq             bool
	sorted                bool
	update                string
	// partition: a partition query (the path's /_partition/P, or the
	// query string's partition=P)
	partition string
}

func queryParseErr(reason string) error { return newErr(400, "query_parse_error", reason) }

// viewParam is one parameter as given: a query string value, or a JSON
// body member's (fromBody; its text is JSON).
type viewParam struct {
	name, value string
	fromBody    bool
}

// queryParams are the query string's parameters, in their order (where
// two settle one thing, as stale and update, the later wins).
func queryParams(rq *req) []viewParam {
	var out []viewParam
	for _, kv := range strings.Split(rq.r.URL.RawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 == nil && err2 == nil {
			out = append(out, viewParam{name: k, value: v})
		}
	}
	return out
}

// viewBodyParams are a POSTed query's members, after the query string's: a
// member the query string has is left out (the query string wins).
func viewBodyParams(q []viewParam, body map[string]json.RawMessage) []viewParam {
	inQuery := map[string]bool{}
	for _, p := range q {
		inQuery[p.name] = true
	}
	out := append([]viewParam(nil), q...)
	names := make([]string, 0, len(body))
	for k := range body {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if inQuery[k] || k == "keys" && inQuery["key"] {
			continue
		}
		out = append(out, viewParam{name: k, value: string(body[k]), fromBody: true})
	}
	return out
}

// parseViewArgs reads a view query as couch_mrview_http does.
func parseViewArgs(params []viewParam) (*viewArgs, error) {
	a := &viewArgs{inclusiveEnd: true, limit: -1, groupLevel: -1, reduce: true, sorted: true, update: "true"}
	groupSet := false
	for _, p := range params {
		v := p.value
		quoted := erlString(v)
		if p.fromBody {
			// a body member is JSON: strings are their text, and a
			// number is shown as it is in errors
			var str string
			if json.Unmarshal([]byte(v), &str) == nil {
				quoted = strconv.Quote(str)
				if p.name != "key" && p.name != "keys" && !strings.HasSuffix(p.name, "key") {
					v = str
				}
			} else {
				quoted = v
			}
		}
		boolean := func() (bool, error) {
			switch v {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
			return false, queryParseErr("Invalid boolean parameter: " + quoted)
		}
		integer := func(positive bool) (int, error) {
			i, err := strconv.Atoi(v)
			if err != nil {
				return 0, queryParseErr("Invalid value for integer: " + quoted)
			}
			if positive && i < 0 {
				return 0, queryParseErr("Invalid value for positive integer: " + quoted)
			}
			return i, nil
		}
		jsonVal := func() (json.RawMessage, error) {
			if !json.Valid([]byte(v)) {
				return nil, badRequest("invalid UTF-8 JSON")
			}
			return json.RawMessage(v), nil
		}
		var err error
		switch p.name {
		case "key":
			a.key, err = jsonVal()
			a.hasKey = err == nil
		case "keys":
			var raw json.RawMessage
			if raw, err = jsonVal(); err == nil {
				if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a.keys) != nil {
					if p.fromBody {
						err = badRequest("`keys` member must be an array.")
					} else {
						err = queryParseErr("`keys` must be an array of strings.")
					}
				}
				a.hasKeys = err == nil
			}
		case "startkey", "start_key":
			a.startKey, err = jsonVal()
		case "endkey", "end_key":
			a.endKey, err = jsonVal()
		case "startkey_docid", "start_key_doc_id":
			a.startDocID, a.hasStartID = v, true
		case "endkey_docid", "end_key_doc_id":
			a.endDocID, a.hasEndID = v, true
		case "inclusive_end":
			a.inclusiveEnd, err = boolean()
		case "limit":
			a.limit, err = integer(true)
		case "skip":
			a.skip, err = integer(true)
		case "descending":
			a.descending, err = boolean()
		case "group":
			a.group, err = boolean()
			groupSet = true
		case "group_level":
			a.groupLevel, err = integer(true)
		case "reduce":
			a.reduce, err = boolean()
			a.reduceSet = true
		case "include_docs":
			a.includeDocs, err = boolean()
		case "conflicts":
			a.conflicts, err = boolean()
		case "attachments":
			a.attachments, err = boolean()
		case "update_seq":
			a.updateSeq, err = boolean()
		case "sorted":
			a.sorted, err = boolean()
		case "partition":
			if !p.fromBody { // CouchDB reads it from the query string only
				if err = checkPartition(v); err == nil {
					a.partition = v
				}
			}
		case "stable":
			if v != "true" && v != "false" {
				err = queryParseErr("Invalid value for `stable`.")
			}
		case "update":
			switch v {
			case "true", "false", "lazy":
				a.update = v
			default:
				err = queryParseErr("Invalid value for `update`.")
			}
		case "stale":
			switch v {
			case "ok":
				a.update = "false"
			case "update_after":
				a.update = "lazy"
			default:
				err = queryParseErr("Invalid value for `stale`.")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if a.hasKeys {
		// keys wins over key (CouchDB's order of precedence)
		a.hasKey, a.key = false, nil
	}
	if groupSet && !a.group && a.groupLevel > 0 {
		return nil, queryParseErr("Can't specify group=false and group_level>0 at the same time")
	}
	return a, nil
}

// bounds turns the key range into the index's collated [start, end).
func (a *viewArgs) bounds() (start, end []byte, err error) {
	enc := func(key json.RawMessage, id string, hasID bool) ([]byte, error) {
		b, err := collate.AppendKey(nil, key)
		if err != nil {
			return nil, badRequest("invalid UTF-8 JSON")
		}
		if hasID {
			idJSON, _ := json.Marshal(id)
			return collate.AppendKey(b, idJSON)
		}
		return b, nil
	}
	after := func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff) }
	sk, ek := a.startKey, a.endKey
	sid, eid, hasS, hasE := a.startDocID, a.endDocID, a.hasStartID, a.hasEndID
	if a.hasKey {
		sk, ek = a.key, a.key // the docid bounds still apply, as CouchDB's
	}
	if sk == nil {
		hasS = false
	}
	if ek == nil {
		hasE = false
	}
	// in the index's ascending order: lo inclusive, hi exclusive
	var lo, hi []byte
	loKey, loID, hasLoID := sk, sid, hasS
	hiKey, hiID, hasHiID := ek, eid, hasE
	if a.descending {
		loKey, loID, hasLoID, hiKey, hiID, hasHiID = ek, eid, hasE, sk, sid, hasS
	}
	if loKey != nil {
		if lo, err = enc(loKey, loID, hasLoID); err != nil {
			return nil, nil, err
		}
		if a.descending && !a.inclusiveEnd {
			lo = after(lo) // the end key is excluded: rows above it only
		}
	}
	if hiKey != nil {
		if hi, err = enc(hiKey, hiID, hasHiID); err != nil {
			return nil, nil, err
		}
		if a.descending || a.inclusiveEnd {
			hi = after(hi)
		}
	}
	if sk != nil && ek != nil {
		c := collate.Compare(sk, ek)
		if c == 0 && hasS && hasE {
			sj, _ := json.Marshal(sid)
			ej, _ := json.Marshal(eid)
			c = collate.Compare(sj, ej)
		}
		if (!a.descending && c > 0) || (a.descending && c < 0) {
			if a.descending {
				return nil, nil, queryParseErr("No rows can match your key range, reverse your start_key and end_key or set descending=false")
			}
			return nil, nil, queryParseErr("No rows can match your key range, reverse your start_key and end_key or set descending=true")
		}
	}
	return lo, hi, nil
}

// viewBody reads a POSTed query: a JSON object.
func (g *Gateway) viewBody(rq *req) (map[string]json.RawMessage, error) {
	b, err := readBody(rq, g.cfg.MaxRequestSize)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, errInvalidJSON
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, badRequest("Request body must be a JSON object")
	}
	return body, nil
}
