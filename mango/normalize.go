package mango

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// RequestError is a refused Mango request as CouchDB answers it: the HTTP
// status and the body's "error" and "reason", in mango_error's words
// (and with its way of writing the offending value: Erlang's ~w, so a
// string "x" is <<120>>).
type RequestError struct {
	Status int
	Err    string // the body's "error"
	Reason string // the body's "reason"
}

func (e *RequestError) Error() string { return "mango: " + e.Err + ": " + e.Reason }

func reqErr(status int, name, format string, args ...any) *RequestError {
	return &RequestError{Status: status, Err: name, Reason: fmt.Sprintf(format, args...)}
}

func badRequest(name, format string, args ...any) *RequestError {
	return reqErr(400, name, format, args...)
}

// unknownError is mango_error's catch-all, a 500 "unknown_error" naming
// the module and the term (CouchDB adds a "ref" to the body, a hash of
// the stack; it is left to the HTTP layer).
func unknownError(module, term string) *RequestError {
	return reqErr(500, "unknown_error", "Unknown Error: %s :: %s", module, term)
}

func normBadArg(op string, arg any) error {
	return badRequest("bad_arg", "Bad argument for operator %s: %s", op, erlW(arg))
}

// Normalize is mango_selector:normalize: the selector as CouchDB runs it
// and _explain shows it under "selector". Every condition becomes an
// explicit operator ({"a":1} is {"a":{"$eq":1}}); an object of several
// members becomes an $and of them, in the order written (nested $ands
// stay nested: CouchDB does not flatten them); field names through
// nested objects and boolean operators become dotted paths on the
// conditions ({"a":{"b":{"$gt":1}}} is {"a.b":{"$gt":1}}, and
// {"a":{"$or":[…]}} is {"$or":[{"a":…},…]}); $not and $nor are pushed
// down to the conditions by De Morgan's laws and by negating the
// comparison ($gt becomes $lte, $in $nin, $exists its opposite) where
// one can, and kept as {"$not":…} around the others; $text becomes
// {"$default":{"$text":…}}. Operators' arguments are checked with
// CouchDB's errors (bad_arg, invalid_operator, not_supported, bad_field,
// invalid_selector). Normalizing a normalized selector changes nothing.
//
// selector may be decoded by encoding/json (maps: members then go in key
// order, a map having no other) or be an Object; the result is built of
// Object, []any, json.Number (integers exact, doubles in the form
// CouchDB writes them, see FormatFloat), string, bool and nil, and
// encodes with encoding/json to what CouchDB prints.
//
// A selector that is not an object is CouchDB's invalid_selector_json,
// which mango_opts checks before normalizing.
func Normalize(selector any) (any, error) {
	sel := ordered(selector)
	o, ok := sel.(Object)
	if !ok {
		return nil, badRequest("invalid_selector_json", "Selector must be a JSON object, not: %s", erlW(sel))
	}
	if len(o) == 0 {
		return Object{}, nil
	}
	v, err := normOps(o)
	if err != nil {
		return nil, err
	}
	if v, err = normFields(v); err != nil {
		return nil, err
	}
	if v, err = normNegations(v); err != nil {
		return nil, err
	}
	if no, ok := v.(Object); ok {
		for _, m := range no {
			if m.Key == "" {
				return nil, badRequest("invalid_selector", "One or more conditions is missing a field name.")
			}
		}
	}
	return v, nil
}

// single reports the one member of a one-member object: the shape
// {[{K, V}]} every clause of mango_selector matches.
func single(v any) (Member, bool) {
	o, ok := v.(Object)
	if !ok || len(o) != 1 {
		return Member{}, false
	}
	return o[0], true
}

func one(k string, v any) Object { return Object{{k, v}} }

func isObject(v any) bool { _, ok := v.(Object); return ok }

// normOps is norm_ops: checks each operator's argument and makes the
// implicit operators explicit.
func normOps(v any) (any, error) {
	m, ok := single(v)
	if !ok {
		if o, isObj := v.(Object); isObj && len(o) > 1 {
			args := make([]any, len(o))
			for i, p := range o {
				a, err := normOps(Object{p})
				if err != nil {
					return nil, err
				}
				args[i] = a
			}
			return one("$and", args), nil
		}
		return one("$eq", v), nil
	}
	k, arg := m.Key, m.Value
	switch k {
	case "$and", "$or", "$nor":
		list, ok := arg.([]any)
		if !ok {
			return nil, normBadArg(k, arg)
		}
		args := make([]any, len(list))
		for i, a := range list {
			n, err := normOps(a)
			if err != nil {
				return nil, err
			}
			args[i] = n
		}
		return one(k, args), nil
	case "$not", "$elemMatch", "$allMatch", "$keyMapMatch":
		if !isObject(arg) {
			return nil, normBadArg(k, arg)
		}
		n, err := normOps(arg)
		if err != nil {
			return nil, err
		}
		return one(k, n), nil
	case "$in", "$nin", "$all":
		if _, ok := arg.([]any); !ok {
			return nil, normBadArg(k, arg)
		}
		return v, nil
	case "$exists":
		if _, ok := arg.(bool); !ok {
			return nil, normBadArg(k, arg)
		}
		return v, nil
	case "$type":
		if _, ok := arg.(string); !ok {
			return nil, normBadArg(k, arg)
		}
		return v, nil
	case "$mod":
		if l, ok := arg.([]any); ok && len(l) == 2 {
			_, okD := isInt(l[0])
			_, okR := isInt(l[1])
			if okD && okR {
				return v, nil
			}
		}
		return nil, normBadArg(k, arg)
	case "$regex":
		s, ok := arg.(string)
		if !ok {
			break // no clause for a non-string: the unknown operator's
		}
		if !pcreCompiles(s) {
			return nil, normBadArg(k, s)
		}
		return v, nil
	case "$size":
		if n, ok := isInt(arg); ok && n.Sign() >= 0 {
			return v, nil
		}
		return nil, normBadArg(k, arg)
	case "$text":
		switch arg.(type) {
		case string, bool:
		default:
			if _, isNum := arg.(json.Number); !isNum {
				return nil, normBadArg(k, arg)
			}
		}
		return one("$default", one("$text", arg)), nil
	case "$beginsWith":
		if _, ok := arg.(string); ok {
			return v, nil
		}
	case "$default", "$lt", "$lte", "$eq", "$ne", "$gte", "$gt":
		return v, nil
	case "$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere":
		return nil, badRequest("not_supported", "Unsupported operator: %s", k)
	}
	if len(k) > 0 && k[0] == '$' {
		return nil, badRequest("invalid_operator", "Invalid operator: %s", k)
	}
	n, err := normOps(arg)
	if err != nil {
		return nil, err
	}
	return one(k, n), nil
}

// pcreCompiles approximates re:compile (PCRE 8, no unicode option) with
// Go's RE2 parser: what RE2 refuses but PCRE has (lookaround, atomic and
// branch-reset groups, comments, backreferences and recursion,
// possessive quantifiers, the x flag, (*VERB)s, escapes RE2 lacks,
// counts up to 65535) is replaced by something RE2 takes and the rest
// parsed again, so that an error further on is still found; what RE2
// takes but PCRE does not (a \x{…} above 255, the u flag) is refused.
// The matcher cannot run what PCRE alone has (Compile refuses it), but
// the request is valid, as in CouchDB; TestNormalizeAsCouchDB holds the
// patterns checked against CouchDB.
func pcreCompiles(p string) bool {
	if bigHex.MatchString(p) {
		return false
	}
	for range maxRewrites {
		_, err := syntax.Parse(p, syntax.Perl)
		if err == nil {
			return true
		}
		var se *syntax.Error
		if !errors.As(err, &se) {
			return false
		}
		at := strings.Index(p, se.Expr)
		if se.Code == syntax.ErrMissingRepeatArgument {
			at = -1
		}
		next, ok := pcreOnly(p, se.Code, se.Expr, at)
		if !ok || next == p {
			return false
		}
		p = next
	}
	// so many PCRE-only constructs: each costs a parse of the pattern,
	// so the rest is taken as PCRE would take it rather than parsed
	return true
}

// maxRewrites bounds pcreCompiles' parses of one pattern.
const maxRewrites = 64

var (
	bigHex    = regexp.MustCompile(`\\x\{0*[1-9a-fA-F][0-9a-fA-F]{2,}\}`)
	verbs     = regexp.MustCompile(`^(\(\*[A-Z_0-9=]+\))+`)
	groupOpen = regexp.MustCompile(`^\(\?(?:=|!|<=|<!|>|\||'[A-Za-z_][A-Za-z0-9_]*'|<[A-Za-z_][A-Za-z0-9_]*>|P<[A-Za-z_][A-Za-z0-9_]*>)`)
	groupCall = regexp.MustCompile(`^\(\?(?:P=[A-Za-z_][A-Za-z0-9_]*|P>[A-Za-z_][A-Za-z0-9_]*|&[A-Za-z_][A-Za-z0-9_]*|R|[+-]?[0-9]+)\)`)
	flagGroup = regexp.MustCompile(`^\(\?([imsxXUJ-]*)([:)])`)
	repeat    = regexp.MustCompile(`^\{([0-9]*)(,?)([0-9]*)\}`)
)

// pcreOnly rewrites the construct RE2 refused at at (its text expr) when
// PCRE has it.
func pcreOnly(p string, code syntax.ErrorCode, expr string, at int) (string, bool) {
	switch code {
	case syntax.ErrInvalidEscape:
		// PCRE has \1…, \Z, \h, \R, \K, \e, \cX …, and takes an unknown
		// letter as itself
		n := len(expr)
		if expr == `\c` && at+3 <= len(p) {
			n = 3
		}
		if at < 0 {
			return p, false
		}
		return p[:at] + "x" + p[at+n:], true
	case syntax.ErrInvalidPerlOp, syntax.ErrInvalidNamedCapture:
		if m := verbs.FindString(p); m != "" {
			return p[len(m):], true
		}
		if at >= 0 {
			rest := p[at:]
			i := at
			if strings.HasPrefix(rest, "(?#") {
				if j := strings.IndexByte(rest, ')'); j >= 0 {
					return p[:i] + p[i+j+1:], true
				}
				return p, false
			}
			if m := groupCall.FindString(rest); m != "" {
				return p[:i] + "(?:)" + p[i+len(m):], true
			}
			if m := groupOpen.FindString(rest); m != "" {
				return p[:i] + "(?:" + p[i+len(m):], true
			}
			if m := flagGroup.FindStringSubmatch(rest); m != nil && strings.ContainsAny(m[1], "xXJ") {
				f := strings.NewReplacer("x", "", "X", "", "J", "").Replace(m[1])
				return p[:i] + "(?" + f + "i" + m[2] + p[i+len(m[0]):], true
			}
		}
		return p, false
	case syntax.ErrInvalidRepeatSize:
		if at < 0 {
			return p, false
		}
		m := repeat.FindStringSubmatch(p[at:])
		if m == nil {
			return p, false
		}
		lo, _ := strconv.Atoi(m[1])
		hi := lo
		if m[2] != "" {
			hi = 65535
			if m[3] != "" {
				hi, _ = strconv.Atoi(m[3])
			}
		}
		if lo > 65535 || hi > 65535 || lo > hi {
			return p, false
		}
		return p[:at] + "*" + p[at+len(m[0]):], true
	case syntax.ErrInvalidRepeatOp:
		// a possessive quantifier: *+ ++ ?+ {n}+
		if at >= 0 && len(expr) >= 2 && expr[len(expr)-1] == '+' {
			q := expr[:len(expr)-1]
			if q == "*" || q == "+" || q == "?" || repeat.MatchString(q) {
				return p[:at] + q + p[at+len(expr):], true
			}
		}
		return p, false
	case syntax.ErrMissingRepeatArgument:
		if m := verbs.FindString(p); m != "" {
			return p[len(m):], true
		}
	}
	return p, false
}

// normFields is norm_fields: moves field names down onto the conditions
// as dotted paths, through the boolean operators; the sub-selector of
// $elemMatch, $allMatch and $keyMapMatch is normalized on its own.
func normFields(v any) (any, error) {
	if o, ok := v.(Object); ok && len(o) == 0 {
		return Object{}, nil
	}
	return normFieldsAt(v, "")
}

func normFieldsAt(v any, path string) (any, error) {
	m, ok := single(v)
	if !ok {
		return nil, badRequest("bad_field", "Invalid field normalization on selector: %s", erlW(v))
	}
	k, arg := m.Key, m.Value
	switch k {
	case "$and", "$or", "$nor":
		list, _ := arg.([]any)
		args := make([]any, len(list))
		for i, a := range list {
			n, err := normFieldsAt(a, path)
			if err != nil {
				return nil, err
			}
			args[i] = n
		}
		return one(k, args), nil
	case "$not":
		n, err := normFieldsAt(arg, path)
		if err != nil {
			return nil, err
		}
		return one(k, n), nil
	case "$elemMatch", "$allMatch", "$keyMapMatch":
		n, err := normFields(arg)
		if err != nil {
			return nil, err
		}
		return one(path, one(k, n)), nil
	case "$default":
		if t, ok := single(arg); ok && t.Key == "$text" && path == "" {
			return v, nil
		}
		return nil, badRequest("bad_field", "Invalid field normalization on selector: %s", erlW(v))
	}
	if len(k) > 0 && k[0] == '$' {
		return one(path, v), nil
	}
	if path == "" {
		return normFieldsAt(arg, k)
	}
	return normFieldsAt(arg, path+"."+k)
}

// normNegations is norm_negations: pushes $not and $nor down.
func normNegations(v any) (any, error) {
	m, ok := single(v)
	if !ok {
		return v, nil
	}
	k, arg := m.Key, m.Value
	switch k {
	case "$not":
		return negate(arg)
	case "$nor", "$and", "$or":
		list, _ := arg.([]any)
		args := make([]any, len(list))
		for i, a := range list {
			var n any
			var err error
			if k == "$nor" {
				n, err = negate(a)
			} else {
				n, err = normNegations(a)
			}
			if err != nil {
				return nil, err
			}
			args[i] = n
		}
		if k == "$nor" {
			k = "$and"
		}
		return one(k, args), nil
	case "$elemMatch", "$allMatch", "$keyMapMatch":
		n, err := normNegations(arg)
		if err != nil {
			return nil, err
		}
		return one(k, n), nil
	}
	return v, nil
}

var negated = map[string]string{"$lt": "$gte", "$lte": "$gt", "$eq": "$ne", "$ne": "$eq",
	"$gte": "$lt", "$gt": "$lte", "$in": "$nin", "$nin": "$in"}

// negate is mango_selector:negate.
func negate(v any) (any, error) {
	m, ok := single(v)
	if !ok {
		// CouchDB has no clause for it (a function_clause crash); the
		// steps before never hand negate anything else
		return nil, unknownError("mango_selector", "function_clause")
	}
	k, arg := m.Key, m.Value
	switch k {
	case "$not":
		return normNegations(arg)
	case "$nor", "$and", "$or":
		list, _ := arg.([]any)
		args := make([]any, len(list))
		for i, a := range list {
			var n any
			var err error
			if k == "$nor" {
				n, err = normNegations(a)
			} else {
				n, err = negate(a)
			}
			if err != nil {
				return nil, err
			}
			args[i] = n
		}
		return one(map[string]string{"$nor": "$or", "$and": "$or", "$or": "$and"}[k], args), nil
	case "$default":
		return nil, normBadArg("$not", v)
	case "$exists":
		b, _ := arg.(bool)
		return one(k, !b), nil
	}
	if n, ok := negated[k]; ok {
		return one(n, arg), nil
	}
	if len(k) > 0 && k[0] == '$' {
		return one("$not", v), nil
	}
	n, err := negate(arg)
	if err != nil {
		return nil, err
	}
	return one(k, n), nil
}
