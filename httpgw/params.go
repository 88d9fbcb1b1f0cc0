package httpgw

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Query parameters follow CouchDB's parsing and its error texts.

func boolParam(rq *req, name string, def bool) (bool, error) {
	v, ok := rq.q[name]
	if !ok || len(v) == 0 {
		return def, nil
	}
	switch v[len(v)-1] {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, newErr(400, "query_parse_error", "Invalid boolean parameter: "+erlString(v[len(v)-1]))
}

func intParam(rq *req, name string, def int) (int, error) {
	v, ok := rq.q[name]
	if !ok || len(v) == 0 {
		return def, nil
	}
	s := v[len(v)-1]
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, newErr(400, "query_parse_error", "Invalid value for integer: "+erlString(s))
	}
	if n < 0 {
		return 0, newErr(400, "query_parse_error", "Invalid value for positive integer: "+erlString(s))
	}
	return n, nil
}

// quorumParam is r or w of a doc read or write: CouchDB takes a value that
// is not a positive integer for the database's default (0 here), it never
// refuses one.
func quorumParam(rq *req, name string) int {
	v := rq.q[name]
	if len(v) == 0 {
		return 0
	}
	n, err := strconv.Atoi(v[len(v)-1])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// jsonParam decodes a JSON-valued query parameter (startkey, keys, ...)
// known by any of names. When the query gives several of them, CouchDB's
// parse lets the last one in the query string win (of startkey=a&
// start_key=b, b), each value being JSON.
func jsonParam(rq *req, v any, names ...string) (bool, error) {
	name, n := "", 0
	for _, nm := range names {
		if vals, ok := rq.q[nm]; ok && len(vals) > 0 {
			if n == 0 {
				name = nm
			}
			n++
		}
	}
	if n == 0 {
		return false, nil
	}
	if n > 1 {
		err := queryInOrder(rq, func(k, val string) error {
			if !slices.Contains(names, k) {
				return nil
			}
			if !json.Valid([]byte(val)) {
				return errInvalidJSON
			}
			name = k
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	vals := rq.q[name]
	if err := json.Unmarshal([]byte(vals[len(vals)-1]), v); err != nil {
		return false, errInvalidJSON
	}
	return true, nil
}

// idKey reads a JSON key parameter of an index of doc ids: a string, or
// (below) any other JSON value, which sorts before every id.
func idKey(rq *req, names ...string) (key string, below, ok bool, err error) {
	var raw json.RawMessage
	if ok, err = jsonParam(rq, &raw, names...); err != nil || !ok {
		return "", false, ok, err
	}
	if json.Unmarshal(raw, &key) != nil {
		return "", true, true, nil
	}
	return key, false, true, nil
}

// erlString is a parameter's value as CouchDB's reasons print it (Erlang's
// ~p of a string): quoted, and the empty string as [] (an empty list).
func erlString(s string) string {
	if s == "" {
		return "[]"
	}
	return strconv.Quote(s)
}

// queryInOrder calls f with each query parameter, unescaped, in the order
// the query string gives them (rq.q has lost it), until f fails; a pair
// that does not unescape is skipped (the gateway's own parse answered it).
func queryInOrder(rq *req, f func(k, v string) error) error {
	for raw := rq.r.URL.RawQuery; raw != ""; {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		k, err := url.QueryUnescape(k)
		if err != nil {
			continue
		}
		if v, err = url.QueryUnescape(v); err != nil {
			continue
		}
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}
