package httpgw

import (
	"encoding/json"
	"strconv"
	"strings"
)

// --- the rules form ------------------------------------------------------

// rwPart is a segment of a rule's from or to: a literal, a ":var" binding
// or "*".
type rwPart struct {
	lit  string
	bind bool // lit is the variable's name
	all  bool
}

type rwRule struct {
	from, to []rwPart
	method   string // "" any
	query    []kv
	formats  map[string]string
}

// rwVal is a bound value: a string from the path or the query string, or
// (for key-like parameters, and values a format or the rule's query made)
// any JSON value.
type rwVal struct {
	s    string
	json json.RawMessage // set: the value is this JSON, not s
}

type binding struct {
	k string
	v rwVal
}

// rwJSONParam: the query parameters CouchDB decodes from JSON before
// binding and encodes again after.
func rwJSONParam(k string) bool {
	switch k {
	case "key", "startkey", "start_key", "endkey", "end_key", "keys":
		return true
	}
	return false
}

// parseRulePath reads a rule's from or to; its third ".." is refused
// (chttpd/secure_rewrites).
func (g *Gateway) parseRulePath(p string) ([]rwPart, error) {
	var out []rwPart
	dots := 0
	for _, s := range strings.Split(p, "/") {
		switch {
		case s == "":
		case s == "*":
			out = append(out, rwPart{all: true})
		case s == "..":
			if dots == 2 && g.secureRewrites() {
				return nil, newErr(500, "insecure_rewrite_rule", "too many ../.. segments")
			}
			dots++
			out = append(out, rwPart{lit: s})
		case s[0] == ':':
			out = append(out, rwPart{lit: s[1:], bind: true})
		default:
			out = append(out, rwPart{lit: s})
		}
	}
	return out, nil
}

func (g *Gateway) rewriteRules(rq *req, db, ddocID string, raw json.RawMessage, rest []string, n int) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return errInvalidRewritePath
	}
	// every rule is read before any is matched (CouchDB's dispatch
	// list): a bad rule refuses every path
	var rules []rwRule
	for _, it := range items {
		fields, ok := orderedObject(it)
		if !ok {
			continue // CouchDB's comprehension skips what is no object
		}
		var rl rwRule
		var from, to *string
		methodSet := false
		for _, f := range fields {
			var s string
			isStr := json.Unmarshal(f.v, &s) == nil
			switch f.k {
			case "method":
				if !methodSet {
					methodSet = true
					// a method that is no string matches no request
					rl.method = "\x00"
					if isStr {
						rl.method = s
					}
				}
			case "query":
				if rl.query == nil {
					rl.query, _ = orderedObject(f.v)
				}
			case "from", "to":
				p := &from
				if f.k == "to" {
					p = &to
				}
				if *p == nil {
					if !isStr {
						return errBadarg // CouchDB's re:split of a non-string
					}
					*p = &s
				}
			case "formats":
				if rl.formats == nil {
					rl.formats = map[string]string{}
					fm, _ := orderedObject(f.v)
					for _, p := range fm {
						var fs string
						if json.Unmarshal(p.v, &fs) == nil {
							if _, seen := rl.formats[p.k]; !seen {
								rl.formats[p.k] = fs
							}
						}
					}
				}
			}
		}
		if from == nil {
			rl.from = []rwPart{{all: true}}
		} else {
			var err error
			if rl.from, err = g.parseRulePath(*from); err != nil {
				return err
			}
		}
		if to == nil {
			return newErr(500, "error", "invalid_rewrite_target")
		}
		var err error
		if rl.to, err = g.parseRulePath(*to); err != nil {
			return err
		}
		rules = append(rules, rl)
	}
	var parts []string
	for _, s := range rest {
		if s != "" {
			parts = append(parts, s)
		}
	}
	var query []binding
	for _, p := range requestQuery(rq.r.URL.RawQuery) {
		v := rwVal{s: p.s}
		if rwJSONParam(p.k) {
			if !json.Valid([]byte(p.s)) {
				return badRequest("invalid UTF-8 JSON")
			}
			v = rwVal{json: json.RawMessage(p.s)}
		}
		query = append(query, binding{p.k, v})
	}
	for _, rl := range rules {
		if rl.method != "" && rl.method != "*" && rl.method != rq.r.Method {
			continue
		}
		remaining, bound, ok := bindPath(rl.from, parts)
		if !ok {
			continue
		}
		target, err := rl.target(remaining, append(bound, query...))
		if err != nil {
			return err
		}
		target = normalizePath(designPrefix(db, ddocID) + "/" + target)
		return g.dispatchRewrite(rq, rq.r.Method, target, rq.r.Header, nil, false, false, n)
	}
	return errMissing
}

// bindPath matches a rule's from against the path: the path left for a
// trailing "*", the bindings (the last bound first, as CouchDB keeps them).
func bindPath(from []rwPart, path []string) ([]string, []binding, bool) {
	var bound []binding
	for i, p := range from {
		if p.all && i == len(from)-1 {
			return path, bound, true
		}
		if len(path) == 0 {
			return nil, nil, false
		}
		switch {
		case p.all:
			// a "*" before the end binds the segment to "*"
			bound = append([]binding{{"*", rwVal{s: path[0]}}}, bound...)
		case p.bind:
			bound = append([]binding{{p.lit, rwVal{s: path[0]}}}, bound...)
		case p.lit != path[0]:
			return nil, nil, false
		}
		path = path[1:]
	}
	if len(path) > 0 {
		return nil, nil, false
	}
	return nil, bound, true
}

func lookup(bs []binding, k string) (rwVal, bool) {
	for _, b := range bs {
		if b.k == k {
			return b.v, true
		}
	}
	return rwVal{}, false
}

// target is the rule's to with the bindings put in, and its query string.
func (rl rwRule) target(remaining []string, bindings []binding) (string, error) {
	getVar := func(name string, dflt rwVal) rwVal {
		v, ok := lookup(bindings, name)
		if !ok {
			v = dflt
		}
		return format(rl.formats[name], v)
	}
	replace := func(s string) rwVal {
		switch {
		case s == "*":
			return getVar("*", rwVal{s: s})
		case strings.HasPrefix(s, ":"):
			return getVar(s[1:], rwVal{s: s})
		}
		return rwVal{s: s}
	}
	// the rule's query, in reverse as CouchDB accumulates it
	var qargs []binding
	for _, q := range rl.query {
		var v rwVal
		var s string
		var arr []json.RawMessage
		switch {
		case json.Unmarshal(q.v, &s) == nil:
			v = replace(s)
		case json.Unmarshal(q.v, &arr) == nil:
			out := make([]json.RawMessage, len(arr))
			for i, e := range arr {
				out[i] = e
				if json.Unmarshal(e, &s) == nil && strings.HasPrefix(s, ":") {
					out[i] = getVar(s[1:], rwVal{s: s}).asJSON()
				}
			}
			v.json, _ = json.Marshal(out)
		default:
			v.json = q.v
		}
		qargs = append([]binding{{q.k, v}}, qargs...)
	}
	var final []binding
	for _, b := range bindings {
		if _, ok := lookup(qargs, b.k); !ok {
			final = append(final, b)
		}
	}
	final = append(final, qargs...)

	var segs []string
	for _, p := range rl.to {
		if p.all {
			segs = append(segs, remaining...)
			break
		}
		if !p.bind {
			segs = append(segs, p.lit)
			continue
		}
		v, ok := lookup(final, p.lit)
		if !ok {
			segs = append(segs, "undefined")
			continue
		}
		s, err := v.iolist()
		if err != nil {
			return "", err
		}
		segs = append(segs, s)
	}
	for i, s := range segs {
		segs[i] = quotePath(s)
	}
	path := strings.Join(segs, "/")
	var qs []string
	for i := len(final) - 1; i >= 0; i-- {
		b := final[i]
		if b.k == "*" {
			continue
		}
		var s string
		if rwJSONParam(b.k) {
			s = string(b.v.asJSON())
		} else {
			var err error
			if s, err = b.v.iolist(); err != nil {
				return "", err
			}
		}
		qs = append(qs, quotePlus(b.k)+"="+quotePlus(s))
	}
	if len(qs) > 0 {
		path += "?" + strings.Join(qs, "&")
	}
	return path, nil
}

// format applies a rule's formats member: "int" and "bool" turn a string
// into a number or a boolean when it is one.
func format(f string, v rwVal) rwVal {
	if v.json != nil {
		return v
	}
	switch f {
	case "int":
		if i, err := strconv.ParseInt(v.s, 10, 64); err == nil {
			return rwVal{json: json.RawMessage(strconv.FormatInt(i, 10))}
		}
	case "bool":
		switch strings.ToLower(v.s) {
		case "true":
			return rwVal{json: json.RawMessage("true")}
		case "false":
			return rwVal{json: json.RawMessage("false")}
		}
	}
	return v
}

func (v rwVal) asJSON() json.RawMessage {
	if v.json != nil {
		return v.json
	}
	b, _ := json.Marshal(v.s)
	return b
}

// iolist is a value put into a path or a plain query parameter: a
// string, or an array of strings joined; anything else is Erlang's
// badarg, as CouchDB answers it.
func (v rwVal) iolist() (string, error) {
	if v.json == nil {
		return v.s, nil
	}
	var s string
	if json.Unmarshal(v.json, &s) == nil {
		return s, nil
	}
	var arr []string
	if json.Unmarshal(v.json, &arr) == nil {
		return strings.Join(arr, ""), nil
	}
	return "", errBadarg
}

// errBadarg is Erlang's badarg as CouchDB answers it (without the "ref"
// of its stack hash).
var errBadarg = newErr(500, "unknown_error", "badarg")
