package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The recorder turns one real exchange (a scenario step's request, CouchDB's
// answer) into one corpus record: the database names and base URL become
// {db}, {db2}, {base}; the values the scenario says vary become placeholders,
// numbered per scenario in order of first sight; the headers are filtered.
// This file holds that conversion (no network); recorder_test.go drives it
// against a real CouchDB.

// recordedHeaders are the response headers a record keeps, in this order
// (testdata/README.md); Date, Server, X-Couch-Request-ID, Content-Length and
// the like are dropped.
var recordedHeaders = []string{"Content-Type", "ETag", "Location", "Cache-Control", "X-Couch-Update-NewRev", "Set-Cookie"}

// recState is what the recording of one scenario has learnt so far.
type recState struct {
	*scenarioState                   // names, bindings (for the requests of later steps), cookies
	last           map[string]int    // kind -> highest K handed out
	keyOf          map[string]string // kind + "|" + value -> "rev:3"
	clientRevs     map[string]bool   // rev hashes the scenario's requests write literally
}

func newRecState(st *scenarioState, sc *scenario) *recState {
	rs := &recState{scenarioState: st, last: map[string]int{}, keyOf: map[string]string{}, clientRevs: map[string]bool{}}
	for _, r := range sc.records {
		for _, m := range revRe.FindAllStringSubmatch(string(r.Request.Body)+" "+r.Request.Path+" "+fmt.Sprint(r.Request.Headers), -1) {
			rs.clientRevs[m[2]] = true
		}
	}
	return rs
}

var (
	revRe       = regexp.MustCompile(`\b(\d+)-([0-9a-f]{32})\b`)
	hex32RunRe  = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	cookieValRe = regexp.MustCompile(`^AuthSession=([^;]+)`)
	expiresRe   = regexp.MustCompile(`Expires=([^;]+)`)
	boundaryRe  = regexp.MustCompile(`boundary=("?)([^";]+)("?)`)
	feedRe      = regexp.MustCompile(`"(seq|last_seq)":("[^"]*"|-?[0-9]+)|(?m:^id: ("[^"]*")$)|"rev":"([0-9]+)-([0-9a-f]{32})"`)
)

// placeholder returns the numbered placeholder ("<rev:K>" without the angle
// brackets: "rev:K") that stands for value v of the given kind, handing out
// the next K on first sight, and binds it for the requests of later steps.
func (rs *recState) placeholder(kind string, v any) string {
	id := kind + "|" + fmt.Sprintf("%T|%v", v, v)
	if k, ok := rs.keyOf[id]; ok {
		return k
	}
	rs.last[kind]++
	k := fmt.Sprintf("%s:%d", kind, rs.last[kind])
	rs.keyOf[id] = k
	rs.b.vals[k] = v
	if s, ok := v.(string); ok && kind != "seq" {
		rs.b.owner[kind+"|"+s] = k
	}
	return k
}

func (rs *recState) revText(s string) (string, error) {
	if hex32Re.MatchString(s) {
		if rs.clientRevs[s] {
			return "", fmt.Errorf("%q is a rev the scenario's requests write themselves, not a server value", s)
		}
		return "<" + rs.placeholder("rev", s) + ">", nil
	}
	var err error
	out := revRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := revRe.FindStringSubmatch(m)
		if rs.clientRevs[sub[2]] {
			err = fmt.Errorf("%q is a rev the scenario's requests write themselves, not a server value", m)
			return m
		}
		return sub[1] + "-<" + rs.placeholder("rev", sub[2]) + ">"
	})
	if err == nil && out == s {
		err = fmt.Errorf("no rev in %q", s)
	}
	return out, err
}

// substitute applies a vary kind to the recorded value v.
func (rs *recState) substitute(kind string, v any) (any, error) {
	s, isString := v.(string)
	_, isNumber := v.(json.Number)
	want := func(what string) error { return fmt.Errorf("%s wants %s, got %s", kind, what, render(v)) }
	switch kind {
	case "literal":
		return v, nil
	case "rev":
		if !isString {
			return nil, want("a string")
		}
		return rs.revText(s)
	case "uuid":
		if !isString {
			return nil, want("a string")
		}
		out := hex32RunRe.ReplaceAllStringFunc(s, func(m string) string { return "<" + rs.placeholder("uuid", m) + ">" })
		if out == s {
			return nil, want("32 hex digits")
		}
		return out, nil
	case "seq":
		if !isNumber && (!isString || s == "") {
			return nil, want("an update sequence")
		}
		return "<" + rs.placeholder("seq", v) + ">", nil
	case "time", "etag":
		if !isString {
			return nil, want("a string")
		}
		return "<" + kind + ">", nil
	case "size":
		if !isNumber {
			return nil, want("a number")
		}
		return "<size>", nil
	case "hash", "salt":
		if !isString || !hexRe.MatchString(s) {
			return nil, want("a hex string")
		}
		return "<" + kind + ">", nil
	case "ref":
		if v == nil {
			return nil, want("a value")
		}
		return "<ref>", nil
	case "boundary":
		if !isString {
			return nil, want("a string")
		}
		if m := boundaryRe.FindStringSubmatchIndex(s); m != nil {
			return s[:m[4]] + "<boundary>" + s[m[5]:], nil
		}
		return "<boundary>", nil
	case "cookie":
		if !isString {
			return nil, want("a string")
		}
		if m := cookieValRe.FindStringSubmatchIndex(s); m != nil {
			s = s[:m[2]] + "<session>" + s[m[3]:]
		}
		if m := expiresRe.FindStringSubmatchIndex(s); m != nil {
			s = s[:m[2]] + "<time>" + s[m[3]:]
		}
		return s, nil
	case "feed":
		if !isString {
			return nil, want("a text body")
		}
		out := feedRe.ReplaceAllStringFunc(s, func(m string) string {
			sub := feedRe.FindStringSubmatch(m)
			switch {
			case sub[1] != "": // "seq":value
				val := sub[2]
				var sv any = json.Number(val)
				if strings.HasPrefix(val, `"`) {
					sv = strings.Trim(val, `"`)
				}
				return `"` + sub[1] + `":"<` + rs.placeholder("seq", sv) + `>"`
			case sub[3] != "": // id: "seq"
				return `id: "<` + rs.placeholder("seq", strings.Trim(sub[3], `"`)) + `>"`
			default:
				if rs.clientRevs[sub[5]] {
					return m
				}
				return `"rev":"` + sub[4] + `-<` + rs.placeholder("rev", sub[5]) + `>"`
			}
		})
		return out, nil
	}
	return nil, fmt.Errorf("unknown vary kind %q", kind)
}

// unapply is names.apply backwards: the scenario's database names and the
// server's base URL become {db2}, {db}, {base} (db2 first: db is its prefix).
func (n names) unapply(s string) string {
	if !strings.Contains(s, n.db) && !strings.Contains(s, n.base) {
		return s
	}
	return strings.NewReplacer(n.db2, "{db2}", n.db, "{db}", n.base, "{base}").Replace(s)
}

func (n names) unapplyJSON(v any) any {
	switch v := v.(type) {
	case string:
		return n.unapply(v)
	case []any:
		for i, x := range v {
			v[i] = n.unapplyJSON(x)
		}
	case *object:
		out := newObject()
		for _, k := range v.keys {
			out.set(n.unapply(k), n.unapplyJSON(v.vals[k]))
		}
		return out
	}
	return v
}

// converter walks one response, substituting the vary pointers.
type converter struct {
	rs   *recState
	vary map[string]string // pointer -> kind
	seen map[string]bool
	err  error
}

func (c *converter) walk(ptr string, v any) any {
	if kind, ok := c.vary[ptr]; ok {
		c.seen[ptr] = true
		out, err := c.rs.substitute(kind, v)
		if err != nil {
			if c.err == nil {
				c.err = fmt.Errorf("vary %s: %v", ptr, err)
			}
			return v
		}
		return out
	}
	switch v := v.(type) {
	case []any:
		for i, x := range v {
			v[i] = c.walk(ptrJoin(ptr, i), x)
		}
	case *object:
		for _, k := range v.keys {
			v.vals[k] = c.walk(ptrJoin(ptr, k), v.vals[k])
		}
	}
	return v
}

// convert makes the record of one exchange: area, scenario, name, step,
// setup, the request as the scenario has it, the filtered response with
// placeholders, the normalise pointers and the note.
func (rs *recState) convert(r *record, st *stepDef, status int, hdr http.Header, body []byte) (*object, error) {
	c := &converter{rs: rs, vary: map[string]string{}, seen: map[string]bool{}}
	for _, v := range st.Vary {
		c.vary[v.ptr] = v.kind
	}

	headers := newObject()
	for _, name := range recordedHeaders {
		vals := hdr.Values(name)
		switch {
		case len(vals) == 0:
			continue
		case len(vals) > 1:
			return nil, fmt.Errorf("%d %s headers: %q", len(vals), name, vals)
		}
		headers.set(name, c.walk(ptrJoin("/response/headers", name), rs.names.unapply(vals[0])))
	}

	resp := newObject()
	resp.set("status", json.Number(strconv.Itoa(status)))
	resp.set("headers", headers)
	if len(body) > 0 {
		var v any
		mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type"))
		if c.vary["/response/body"] != "feed" && mt == "application/json" {
			if j, err := decodeJSON(body); err == nil {
				v = rs.names.unapplyJSON(j)
			}
		}
		if v == nil {
			if !utf8.Valid(body) {
				return nil, fmt.Errorf("the body is neither JSON nor UTF-8 text (%d bytes)", len(body))
			}
			v = rs.names.unapply(string(body))
		}
		resp.set("body", c.walk("/response/body", v))
	}
	if c.err != nil {
		return nil, c.err
	}
	for _, v := range st.Vary {
		if !c.seen[v.ptr] {
			return nil, fmt.Errorf("vary %s: no such value in the response", v.ptr)
		}
	}

	req, err := decodeJSON(st.Request)
	if err != nil {
		return nil, err
	}
	// normalise: the request's placeholders, the vary pointers in the order
	// the scenario lists them, then the request's <admin-password>.
	reqVarying, reqLiterals := requestNormalise(req.(*object))
	norm := append([]string{}, reqVarying...)
	for _, v := range st.Vary {
		norm = append(norm, v.ptr)
	}
	norm = append(norm, reqLiterals...)

	rec := newObject()
	rec.set("area", r.Area)
	rec.set("scenario", r.Scenario)
	rec.set("name", r.Name)
	rec.set("step", json.Number(strconv.Itoa(r.Step)))
	if len(r.Setup) > 0 {
		setup := make([]any, len(r.Setup))
		for i, s := range r.Setup {
			setup[i] = s
		}
		rec.set("setup", setup)
	}
	rec.set("request", req)
	rec.set("response", resp)
	normList := make([]any, len(norm))
	for i, p := range norm {
		normList[i] = p
	}
	rec.set("normalise", normList)
	if r.Note != "" {
		rec.set("note", r.Note)
	}
	return rec, nil
}

// requestNormalise lists the request values that vary: those holding a
// placeholder bound by an earlier step, and (literal, listed after the
// response's) those holding <admin-password>.
func requestNormalise(req *object) (varying, literals []string) {
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		switch v := v.(type) {
		case string:
			switch {
			case placeholderRe.MatchString(v):
				varying = append(varying, ptr)
			case strings.Contains(v, "<admin-password>"):
				literals = append(literals, ptr)
			}
		case []any:
			for i, x := range v {
				walk(ptrJoin(ptr, i), x)
			}
		case *object:
			for _, k := range v.keys {
				walk(ptrJoin(ptr, k), v.vals[k])
			}
		}
	}
	for _, k := range req.keys {
		if k != "method" {
			walk(ptrJoin("/request", k), req.vals[k])
		}
	}
	return varying, literals
}

// encodeRecord writes a record as one corpus line: JSON with ", " and ": "
// separators, object members in their order, non-ASCII characters as they are.
func encodeRecord(v any) []byte {
	var b bytes.Buffer
	appendRecordJSON(&b, v)
	b.WriteByte('\n')
	return b.Bytes()
}

func appendRecordJSON(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case string:
		appendRecordString(b, v)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			appendRecordJSON(b, x)
		}
		b.WriteByte(']')
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			appendRecordString(b, k)
			b.WriteString(": ")
			appendRecordJSON(b, v.vals[k])
		}
		b.WriteByte('}')
	default:
		appendJSON(b, v)
	}
}

func appendRecordString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
