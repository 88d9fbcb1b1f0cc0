package mango

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Find is a _find or _explain request body, validated as mango_opts'
// validate_find does it, with its defaults filled in.
type Find struct {
	// Selector is the normalized selector (see Normalize); RawSelector the
	// one the client sent.
	Selector    any
	RawSelector any
	// Fields is the "fields" option; nil means whole documents. CouchDB
	// also takes an object as a field spec (it validates it, then fails
	// on it when it projects a doc, see ProjectionError); ParseFind keeps
	// those out of Fields.
	Fields []string
	// fieldSpecs is "fields" as sent, objects included.
	fieldSpecs []any
	// limitRaw, skipRaw, rRaw are the numbers as sent (CouchDB echoes
	// a bignum limit as it is; Limit is capped).
	limitRaw, skipRaw, rRaw json.Number
	Sort                    []SortField // empty: no sort
	// Limit and Skip: limit defaults to 25 (CouchDB's [mango]
	// default_limit), skip to 0. Huge values are capped at MaxInt64.
	Limit, Skip int64
	// Bookmark is the bookmark as sent; "" when there is none (absent,
	// null or "", which CouchDB takes as none).
	Bookmark string
	// UseIndex is [] (none), [ddoc] or [ddoc, name]; a ddoc's leading
	// "_design/" is dropped when the option is a string ("_design/a/b"),
	// not when it is an array, as CouchDB does.
	UseIndex []string
	R        int64 // read quorum, default 1
	// Conflicts, Update (default true), Stable, ExecutionStats and
	// AllowFallback (default true) are the boolean options.
	Conflicts, Update, Stable, ExecutionStats, AllowFallback bool
	// Stale is "" (false, the default) or "ok".
	Stale string
	// Partition is the "partition" option, "" when none.
	Partition string
}

// SortField is one field of a sort or of an index, in its direction.
type SortField struct {
	Name string
	Desc bool
}

// findOpts are validate_find's options in the order it validates them:
// when several are bad, the first here is the one reported.
var findOpts = []string{"selector", "use_index", "bookmark", "limit", "skip", "sort", "fields",
	"partition", "r", "conflicts", "stale", "update", "stable", "execution_stats", "allow_fallback"}

// ParseFind reads a _find/_explain body. Errors are *RequestError with
// CouchDB 3.5.2's status, error and reason for the same body.
func ParseFind(body []byte) (*Find, error) {
	obj, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	f := &Find{Limit: 25, R: 1, Update: true, AllowFallback: true, UseIndex: []string{}}
	for _, name := range findOpts {
		v, ok := obj.Get(name)
		if !ok {
			if name == "selector" {
				return nil, badRequest("missing_required_key", "Missing required key: selector")
			}
			continue
		}
		if err := f.set(name, v); err != nil {
			return nil, err
		}
	}
	if err := unknownKey(obj, findOpts); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeBody is chttpd:json_body_obj: the body must be JSON, and an
// object.
func decodeBody(body []byte) (Object, error) {
	v, err := decodeJSON(body)
	if err != nil || hasLoneSurrogate(body) {
		return nil, badRequest("bad_request", "invalid UTF-8 JSON")
	}
	obj, ok := v.(Object)
	if !ok {
		return nil, badRequest("bad_request", "Request body must be a JSON object")
	}
	return obj, nil
}

// unknownKey is mango_opts' invalid_key for the first member, in the
// body's order, that is not an option.
func unknownKey(obj Object, known []string) error {
	for _, m := range obj {
		found := false
		for _, k := range known {
			if m.Key == k {
				found = true
				break
			}
		}
		if !found {
			return badRequest("invalid_key", "Invalid key %s for this request.", m.Key)
		}
	}
	return nil
}

func (f *Find) set(name string, v any) error {
	switch name {
	case "selector":
		if !isObject(v) {
			return badRequest("invalid_selector_json", "Selector must be a JSON object, not: %s", erlW(v))
		}
		n, err := Normalize(v)
		if err != nil {
			return err
		}
		f.RawSelector, f.Selector = v, n
	case "use_index":
		u, err := parseUseIndex(v)
		if err != nil {
			return err
		}
		f.UseIndex = u
	case "bookmark":
		switch b := v.(type) {
		case nil:
		case string:
			f.Bookmark = b
		default:
			return unknownError("mango_opts", "{invalid_bookmark,"+erlW(v)+"}")
		}
	case "limit", "skip":
		n, err := nonNegInt(v)
		if err != nil {
			return err
		}
		if name == "limit" {
			f.Limit, f.limitRaw = n, v.(json.Number)
		} else {
			f.Skip, f.skipRaw = n, v.(json.Number)
		}
	case "r":
		n, ok := isInt(v)
		if !ok || n.Sign() <= 0 {
			return badRequest("invalid_pos_integer", "%s is not an integer greater than zero", erlW(v))
		}
		f.R, f.rRaw = clamp(n), v.(json.Number)
	case "sort":
		s, err := parseSort(v)
		if err != nil {
			return err
		}
		f.Sort = s
	case "fields":
		list, ok := v.([]any)
		if !ok {
			return badRequest("invalid_fields", "Fields must be an array of strings, not: %s", erlW(v))
		}
		for _, e := range list {
			switch e := e.(type) {
			case string:
				f.Fields = append(f.Fields, e)
			case Object:
			default:
				return badRequest("invalid_field", "Invalid JSON for field spec: %s", erlW(e))
			}
		}
		f.fieldSpecs = list
	case "partition":
		p, err := parsePartition(v)
		if err != nil {
			return err
		}
		f.Partition = p
	case "stale":
		switch v {
		case "ok":
			f.Stale = "ok"
		case "false", false:
		default:
			return unknownError("mango_opts", "{invalid_ok_or_false_value,"+erlW(v)+"}")
		}
	default:
		b, ok := v.(bool)
		if !ok {
			return badRequest("invalid_boolean", "Invalid boolean value: %s", erlW(v))
		}
		switch name {
		case "conflicts":
			f.Conflicts = b
		case "update":
			f.Update = b
		case "stable":
			f.Stable = b
		case "execution_stats":
			f.ExecutionStats = b
		case "allow_fallback":
			f.AllowFallback = b
		}
	}
	return nil
}

// ExplainOpts is the "opts" member of CouchDB's _explain answer for the
// request: every option with its value or default, in validate_find's
// order, as CouchDB writes them ("bookmark" is "nil" when there is none,
// "sort" an object of field and direction, "fields" as sent, a limit
// beyond int64 as sent).
func (f *Find) ExplainOpts() Object {
	sort := Object{}
	for _, s := range f.Sort {
		dir := "asc"
		if s.Desc {
			dir = "desc"
		}
		sort = append(sort, Member{s.Name, dir})
	}
	bookmark := "nil"
	if f.Bookmark != "" {
		bookmark = f.Bookmark
	}
	var stale any = false
	if f.Stale != "" {
		stale = f.Stale
	}
	useIndex := make([]any, len(f.UseIndex))
	for i, u := range f.UseIndex {
		useIndex[i] = u
	}
	return Object{{"use_index", useIndex}, {"bookmark", bookmark}, {"limit", f.ExplainLimit()},
		{"skip", number(f.skipRaw, f.Skip)}, {"sort", sort}, {"fields", f.ExplainFields()},
		{"partition", f.Partition}, {"r", number(f.rRaw, f.R)}, {"conflicts", f.Conflicts},
		{"stale", stale}, {"update", f.Update}, {"stable", f.Stable}, {"execution_stats", f.ExecutionStats},
		{"allow_fallback", f.AllowFallback}}
}

// ExplainLimit is the limit as _explain shows it (a bignum as sent).
func (f *Find) ExplainLimit() json.Number { return number(f.limitRaw, f.Limit) }

// ExplainFields is "fields" as _explain shows it: as sent, [] when none.
func (f *Find) ExplainFields() []any {
	if f.fieldSpecs == nil {
		return []any{}
	}
	return f.fieldSpecs
}

func number(raw json.Number, n int64) json.Number {
	if raw != "" {
		return raw
	}
	return json.Number(strconv.FormatInt(n, 10))
}

// ProjectionError is the error CouchDB answers a _find with when it
// projects its first doc with the "fields" option, for a field it took
// when it read the request: a field with an empty part ("a..b") is a
// 400 invalid_field_name, an object as a field spec a 500 unknown_error
// "badarg" (mango_fields:extract fails on it); the first such field in
// the list decides. A _find that finds no doc answers 200: call this
// before projecting the first doc.
func (f *Find) ProjectionError() error {
	for _, e := range f.fieldSpecs {
		switch e := e.(type) {
		case string:
			if err := FieldsError([]string{e}); err != nil {
				return err
			}
		default:
			return reqErr(500, "unknown_error", "badarg")
		}
	}
	return nil
}

func clamp(n *big.Int) int64 {
	if n.IsInt64() {
		return n.Int64()
	}
	return math.MaxInt64
}

func nonNegInt(v any) (int64, error) {
	n, ok := isInt(v)
	if !ok || n.Sign() < 0 {
		return 0, badRequest("invalid_non_neg_integer", "%s is not an integer greater than or equal to zero", erlW(v))
	}
	return clamp(n), nil
}

// parseUseIndex is validate_use_index.
func parseUseIndex(v any) ([]string, error) {
	bad := badRequest("invalid_index_name", "Invalid index name: %s", erlW(v))
	switch v := v.(type) {
	case nil:
		return []string{}, nil
	case string:
		parts := strings.Split(v, "/")
		switch {
		case len(parts) == 1:
			return parts, nil
		case len(parts) == 2 && parts[0] == "_design":
			return parts[1:], nil
		case len(parts) == 2:
			return parts, nil
		case len(parts) == 3 && parts[0] == "_design":
			return parts[1:], nil
		}
		return nil, bad
	case []any:
		if len(v) > 2 {
			return nil, bad
		}
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, bad
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, bad
}

// parseSort is mango_sort:new.
func parseSort(v any) ([]SortField, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("invalid_sort_json", "Sort must be an array of sort specs, not: %s", erlP(v, 42))
	}
	out := []SortField{}
	for _, e := range list {
		sf, ok := sortField(e)
		if !ok {
			return nil, badRequest("invalid_sort_field", "Invalid sort field: %s", erlP(e, 20))
		}
		out = append(out, sf)
	}
	for _, s := range out[min(1, len(out)):] {
		if s.Desc != out[0].Desc {
			return nil, badRequest("unsupported_mixed_sort", "Sorts currently only support a single direction for all fields.")
		}
	}
	return out, nil
}

func sortField(e any) (SortField, bool) {
	switch e := e.(type) {
	case string:
		return SortField{Name: e}, e != ""
	case Object:
		if len(e) == 1 {
			switch e[0].Value {
			case "asc":
				return SortField{Name: e[0].Key}, true
			case "desc":
				return SortField{Name: e[0].Key, Desc: true}, true
			}
		}
	}
	return SortField{}, false
}

// parsePartition is couch_partition:validate_partition.
func parsePartition(v any) (string, error) {
	p, ok := v.(string)
	switch {
	case !ok:
		return "", badRequest("illegal_partition", "Partition must be a string")
	case p == "":
		return "", nil
	case p[0] == '_':
		return "", badRequest("illegal_partition", "Partition must not start with an underscore")
	case strings.Contains(p, ":"):
		return "", badRequest("illegal_partition", "Partition must not contain a colon")
	}
	return p, nil
}

// hasLoneSurrogate reports a \u escape of half a surrogate pair without
// its other half, which jiffy refuses and encoding/json would turn into
// U+FFFD.
func hasLoneSurrogate(b []byte) bool {
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inStr {
			if c == '"' {
				inStr = true
			}
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				if ok && r >= 0xD800 && r <= 0xDFFF {
					if r >= 0xDC00 {
						return true
					}
					r2, ok2 := rune(0), false
					if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						r2, ok2 = hex4(b, i+8)
					}
					if !ok2 || r2 < 0xDC00 || r2 > 0xDFFF {
						return true
					}
					i += 6
				}
				i += 5
			} else {
				i++
			}
		}
	}
	return false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// MarshalJSON writes a sort field as CouchDB lists it: {"name":"asc"}.
func (s SortField) MarshalJSON() ([]byte, error) {
	dir := "asc"
	if s.Desc {
		dir = "desc"
	}
	return json.Marshal(Object{{s.Name, dir}})
}
