package conformance

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// placeholderRe finds the placeholders of the README's "Placeholders" table.
// Group 1/2: a numbered kind (rev, uuid, seq) and its K; group 3: an any-value kind.
var placeholderRe = regexp.MustCompile(`<(rev|uuid|seq):(\d+)>|<(time|size|etag|session|hash|salt|boundary|ref)>`)

type placeholder struct {
	kind string // rev, uuid, seq, time, size, ...
	key  string // "rev:1" for numbered kinds, "" otherwise
	text string // as written, e.g. "<rev:1>"
}

func parsePlaceholder(s string, loc []int) placeholder {
	if loc[2] >= 0 {
		kind, k := s[loc[2]:loc[3]], s[loc[4]:loc[5]]
		return placeholder{kind: kind, key: kind + ":" + k, text: s[loc[0]:loc[1]]}
	}
	return placeholder{kind: s[loc[6]:loc[7]], text: s[loc[0]:loc[1]]}
}

// fullPlaceholder reports whether s is exactly one placeholder.
func fullPlaceholder(s string) (placeholder, bool) {
	loc := placeholderRe.FindStringSubmatchIndex(s)
	if loc == nil || loc[0] != 0 || loc[1] != len(s) {
		return placeholder{}, false
	}
	return parsePlaceholder(s, loc), true
}

func hasPlaceholder(v any) bool {
	switch v := v.(type) {
	case string:
		return placeholderRe.MatchString(v)
	case []any:
		for _, x := range v {
			if hasPlaceholder(x) {
				return true
			}
		}
	case *object:
		for _, k := range v.keys {
			if hasPlaceholder(v.vals[k]) {
				return true
			}
		}
	}
	return false
}

// Patterns a placeholder's value must match inside a string.
var (
	hex32Re = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hexRe   = regexp.MustCompile(`^[0-9a-f]+$`)
)

func valuePattern(kind string) string {
	switch kind {
	case "rev", "uuid":
		return `([0-9a-f]{32})` // md5 rev hashes, CouchDB uuids
	case "hash", "salt":
		return `([0-9a-f]+)`
	}
	return `(.+?)`
}

// bindings holds what the numbered placeholders of one scenario stand for.
// rev and uuid: same K = same value, and (checked too) different K = different
// value. seq: bound on first sight only, never asserted (README).
type bindings struct {
	vals  map[string]any    // "rev:1" -> "4c1f…" ; "seq:2" -> string or json.Number
	owner map[string]string // "rev|4c1f…" -> "rev:1"
}

func newBindings() *bindings {
	return &bindings{vals: map[string]any{}, owner: map[string]string{}}
}

func (b *bindings) clone() *bindings {
	c := newBindings()
	for k, v := range b.vals {
		c.vals[k] = v
	}
	for k, v := range b.owner {
		c.owner[k] = v
	}
	return c
}

// bind binds (or checks) p to v; it returns why v cannot stand for p.
func (b *bindings) bind(p placeholder, v any) error {
	if p.key == "" {
		return nil
	}
	if p.kind == "seq" {
		if _, ok := b.vals[p.key]; !ok {
			b.vals[p.key] = v
		}
		return nil
	}
	s := fmt.Sprint(v)
	if old, ok := b.vals[p.key]; ok {
		if old != v {
			return fmt.Errorf("<%s> was bound to %q by an earlier value", p.key, old)
		}
		return nil
	}
	if other, ok := b.owner[p.kind+"|"+s]; ok && other != p.key {
		return fmt.Errorf("%q is already <%s>; <%s> must differ", s, other, p.key)
	}
	b.vals[p.key] = v
	b.owner[p.kind+"|"+s] = p.key
	return nil
}

// text is the value of a bound placeholder as it goes into a request.
func (b *bindings) text(p placeholder) (string, bool) {
	v, ok := b.vals[p.key]
	if !ok {
		return "", false
	}
	if n, isNum := v.(json.Number); isNum {
		return string(n), true
	}
	return fmt.Sprint(v), true
}

// names are the {db}, {db2}, {base} substitutions of one scenario.
type names struct{ db, db2, base string }

func (n names) apply(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	return strings.NewReplacer("{db}", n.db, "{db2}", n.db2, "{base}", n.base).Replace(s)
}

// diff is one difference; ptr is a JSON pointer rooted at the record.
type diff struct {
	ptr, msg string
}

func (d diff) String() string { return d.ptr + ": " + d.msg }

// matcher compares one answer with one record.
type matcher struct {
	b         *bindings
	names     names
	norm      map[string]bool
	unordered bool
	diffs     []diff
}

func (m *matcher) addf(ptr, format string, args ...any) {
	m.diffs = append(m.diffs, diff{ptr, fmt.Sprintf(format, args...)})
}

// explain renders an expected string with the current value of its bound
// placeholders, e.g. "2-<rev:1>" (rev:1 = "4c1f…").
func (m *matcher) explain(e string) string {
	var bound []string
	seen := map[string]bool{}
	for _, loc := range placeholderRe.FindAllStringSubmatchIndex(e, -1) {
		p := parsePlaceholder(e, loc)
		if p.key == "" || seen[p.key] {
			continue
		}
		seen[p.key] = true
		if v, ok := m.b.vals[p.key]; ok {
			bound = append(bound, fmt.Sprintf("%s = %s", p.key, render(v)))
		}
	}
	s := jsonString(e)
	if len(bound) > 0 {
		s += " (" + strings.Join(bound, ", ") + ")"
	}
	return s
}

// compareStatus, compareHeaders and compareBody make up compareResponse.
func (m *matcher) compareResponse(r *record, status int, h http.Header, bodyBytes []byte) {
	if status != r.Response.Status {
		m.addf("/response/status", "expected %d, got %d", r.Response.Status, status)
	}
	m.compareHeaders(r, h)
	m.compareBody(r, bodyBytes)
}

func (m *matcher) compareHeaders(r *record, h http.Header) {
	hs := make([]string, 0, len(r.Response.Headers))
	for k := range r.Response.Headers {
		hs = append(hs, k)
	}
	sort.Strings(hs)
	for _, name := range hs {
		ptr := ptrJoin("/response/headers", name)
		e := m.names.apply(r.Response.Headers[name])
		got := h.Values(name)
		if len(got) == 0 {
			m.addf(ptr, "expected %s, got no such header", m.explain(e))
			continue
		}
		if r.norm[ptr] && !placeholderRe.MatchString(e) {
			continue // a literal CouchDB value: present is all we ask
		}
		switch http.CanonicalHeaderKey(name) {
		case "Content-Type":
			if !sameMediaType(e, got[0]) {
				m.addf(ptr, "expected %q, got %q", e, got[0])
			}
		case "Set-Cookie":
			// several cookies may be set: one must match
			ok := false
			for _, g := range got {
				saved := m.b.clone()
				if err := m.matchText(e, g); err == nil {
					ok = true
					break
				}
				m.b = saved
			}
			if !ok {
				m.addf(ptr, "expected %s, got %s", m.explain(e), strings.Join(quoteAll(got), " and "))
			}
		default:
			if len(got) > 1 {
				m.addf(ptr, "expected one header, got %d: %s", len(got), strings.Join(quoteAll(got), ", "))
			}
			if err := m.matchText(e, got[0]); err != nil {
				m.addf(ptr, "expected %s, got %q%s", m.explain(e), got[0], errSuffix(err))
			}
		}
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func errSuffix(err error) string {
	if err == nil || err == errNoMatch {
		return ""
	}
	return ": " + err.Error()
}

// sameMediaType compares Content-Types, ignoring a charset parameter.
func sameMediaType(exp, got string) bool {
	et, ep, err1 := mime.ParseMediaType(exp)
	gt, gp, err2 := mime.ParseMediaType(got)
	if err1 != nil || err2 != nil {
		return exp == got
	}
	delete(ep, "charset")
	delete(gp, "charset")
	if et != gt || len(ep) != len(gp) {
		return false
	}
	for k, v := range ep {
		if gp[k] != v {
			return false
		}
	}
	return true
}

func (m *matcher) compareBody(r *record, got []byte) {
	const ptr = "/response/body"
	switch r.resBody.kind {
	case bodyNone:
		if len(got) > 0 {
			m.addf(ptr, "expected no body, got %d bytes: %q", len(got), clip(string(got), 200))
		}
	case bodyJSON:
		if len(got) == 0 {
			m.addf(ptr, "expected %s, got an empty body", render(r.resBody.json))
			return
		}
		v, err := decodeJSON(got)
		if err != nil {
			m.addf(ptr, "expected JSON %s, got a body that is not JSON (%v): %q", render(r.resBody.json), err, clip(string(got), 200))
			return
		}
		m.compareValue(ptr, r.resBody.json, v)
	case bodyText:
		if r.norm[ptr] && !placeholderRe.MatchString(r.resBody.text) {
			return
		}
		m.compareText(ptr, m.names.apply(r.resBody.text), string(got))
	}
}

// compareValue compares JSON values; exp comes from the record.
func (m *matcher) compareValue(ptr string, exp, got any) {
	if m.norm[ptr] && !hasPlaceholder(exp) {
		return // a literal CouchDB value that varies between servers
	}
	switch e := exp.(type) {
	case string:
		m.compareString(ptr, m.names.apply(e), got)
	case json.Number:
		if g, ok := got.(json.Number); !ok || !numEqual(e, g) {
			m.addf(ptr, "expected %s, got %s", e, render(got))
		}
	case nil, bool:
		if got != exp {
			m.addf(ptr, "expected %s, got %s", render(exp), render(got))
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			m.addf(ptr, "expected an array %s, got %s %s", render(e), kindOf(got), render(got))
			return
		}
		if m.unordered {
			m.compareUnordered(ptr, e, g)
			return
		}
		if len(e) != len(g) {
			m.addf(ptr, "expected %d elements, got %d: expected %s, got %s", len(e), len(g), render(e), render(g))
		}
		for i := 0; i < len(e) && i < len(g); i++ {
			m.compareValue(ptrJoin(ptr, i), e[i], g[i])
		}
	case *object:
		g, ok := got.(*object)
		if !ok {
			m.addf(ptr, "expected an object %s, got %s %s", render(e), kindOf(got), render(got))
			return
		}
		for _, k := range g.dups {
			m.addf(ptrJoin(ptr, k), "key sent more than once")
		}
		for _, k := range e.keys {
			gv, present := g.vals[k]
			if !present {
				m.addf(ptrJoin(ptr, k), "expected %s, got no such member", m.renderExpected(e.vals[k]))
				continue
			}
			m.compareValue(ptrJoin(ptr, k), e.vals[k], gv)
		}
		for _, k := range g.keys {
			if _, ok := e.vals[k]; !ok {
				m.addf(ptrJoin(ptr, k), "unexpected member, got %s", render(g.vals[k]))
			}
		}
	default:
		m.addf(ptr, "harness: unexpected %T in record", exp)
	}
}

func (m *matcher) renderExpected(v any) string {
	if s, ok := v.(string); ok {
		return m.explain(m.names.apply(s))
	}
	return render(v)
}

// compareUnordered matches each expected element with some unused element of
// got (a note said list order is not significant).
func (m *matcher) compareUnordered(ptr string, exp, got []any) {
	used := make([]bool, len(got))
	for i, e := range exp {
		found := false
		for j, g := range got {
			if used[j] {
				continue
			}
			trial := &matcher{b: m.b.clone(), names: m.names, norm: m.norm, unordered: true}
			trial.compareValue(ptrJoin(ptr, i), e, g)
			if len(trial.diffs) == 0 {
				m.b = trial.b
				used[j] = true
				found = true
				break
			}
		}
		if !found {
			m.addf(ptrJoin(ptr, i), "expected an element %s (in any order), got none in %s", m.renderExpected(e), render(got))
		}
	}
	for j, g := range got {
		if !used[j] {
			m.addf(ptrJoin(ptr, j), "unexpected element %s (expected %s in any order)", render(g), render(exp))
		}
	}
}

func (m *matcher) compareString(ptr, e string, got any) {
	if p, ok := fullPlaceholder(e); ok {
		if err := m.matchWhole(p, got); err != nil {
			m.addf(ptr, "expected %s, got %s: %v", m.explain(e), render(got), err)
		}
		return
	}
	g, ok := got.(string)
	if !ok {
		m.addf(ptr, "expected %s, got %s %s", m.explain(e), kindOf(got), render(got))
		return
	}
	if err := m.matchText(e, g); err != nil {
		m.addf(ptr, "expected %s, got %s%s", m.explain(e), jsonString(g), errSuffix(err))
	}
}

// matchWhole checks a JSON value that is one placeholder as a whole.
func (m *matcher) matchWhole(p placeholder, got any) error {
	s, isString := got.(string)
	switch p.kind {
	case "rev", "uuid":
		if !isString || !hex32Re.MatchString(s) {
			return fmt.Errorf("want 32 lowercase hex digits")
		}
		return m.b.bind(p, s)
	case "seq":
		// an opaque sequence: a string (CouchDB 2+) or an integer (_local_seq)
		if _, isNum := got.(json.Number); !isNum && (!isString || s == "") {
			return fmt.Errorf("want an update sequence (string or integer)")
		}
		return m.b.bind(p, got)
	case "size":
		if _, isNum := got.(json.Number); !isNum {
			return fmt.Errorf("want a number")
		}
	case "hash", "salt":
		if !isString || !hexRe.MatchString(s) {
			return fmt.Errorf("want a hex string")
		}
	case "ref":
		if got == nil {
			return fmt.Errorf("want a value")
		}
	default: // time, etag, session, boundary
		if !isString {
			return fmt.Errorf("want a string")
		}
	}
	return nil
}

var errNoMatch = fmt.Errorf("no match")

// matchText matches a string that may hold placeholders (anywhere) against got,
// binding the numbered ones.
func (m *matcher) matchText(e, got string) error {
	locs := placeholderRe.FindAllStringSubmatchIndex(e, -1)
	if len(locs) == 0 {
		if e != got {
			return errNoMatch
		}
		return nil
	}
	var re strings.Builder
	re.WriteString(`(?s)^`)
	var ps []placeholder
	last := 0
	for _, loc := range locs {
		re.WriteString(regexp.QuoteMeta(e[last:loc[0]]))
		p := parsePlaceholder(e, loc)
		re.WriteString(valuePattern(p.kind))
		ps = append(ps, p)
		last = loc[1]
	}
	re.WriteString(regexp.QuoteMeta(e[last:]))
	re.WriteString(`$`)
	sub := regexp.MustCompile(re.String()).FindStringSubmatch(got)
	if sub == nil {
		return errNoMatch
	}
	for i, p := range ps {
		if err := m.b.bind(p, sub[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// compareText compares text bodies line by line. A line that is JSON (a feed
// row) or "field: <JSON>" (an eventsource line) is compared as JSON.
func (m *matcher) compareText(ptr, exp, got string) {
	el, gl := strings.Split(exp, "\n"), strings.Split(got, "\n")
	if len(el) != len(gl) {
		m.addf(ptr, "expected %d lines, got %d: expected %q, got %q", len(el), len(gl), clip(exp, 400), clip(got, 400))
	}
	for i := 0; i < len(el) && i < len(gl); i++ {
		m.compareLine(fmt.Sprintf("%s[line %d]", ptr, i+1), el[i], gl[i])
	}
}

var fieldLineRe = regexp.MustCompile(`^([a-z]+): (.*)$`)

func (m *matcher) compareLine(ptr, e, g string) {
	if ev, err := decodeJSON([]byte(e)); err == nil && isContainer(ev) {
		gv, err := decodeJSON([]byte(g))
		if err != nil {
			m.addf(ptr, "expected JSON %s, got %q (%v)", e, clip(g, 200), err)
			return
		}
		m.compareValue(ptr, ev, gv)
		return
	}
	if f := fieldLineRe.FindStringSubmatch(e); f != nil {
		if ev, err := decodeJSON([]byte(f[2])); err == nil {
			prefix := f[1] + ": "
			if !strings.HasPrefix(g, prefix) {
				m.addf(ptr, "expected %q, got %q", e, clip(g, 200))
				return
			}
			gv, err := decodeJSON([]byte(g[len(prefix):]))
			if err != nil {
				m.addf(ptr, "expected %q, got %q (not JSON after %q: %v)", e, clip(g, 200), prefix, err)
				return
			}
			if _, isStr := ev.(string); isStr {
				if _, ok := gv.(string); !ok {
					m.addf(ptr, "expected %q (a quoted JSON string), got %q", e, g)
					return
				}
			}
			m.compareValue(ptr, ev, gv)
			return
		}
	}
	if err := m.matchText(e, g); err != nil {
		m.addf(ptr, "expected %s, got %s%s", m.explain(e), jsonString(clip(g, 200)), errSuffix(err))
	}
}

func isContainer(v any) bool {
	switch v.(type) {
	case []any, *object:
		return true
	}
	return false
}
