package difftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Answer is what one target answered to one step.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	// Err is a transport error (no answer).
	Err error
	// Base is the target's base URL the request went to; it reads as
	// {base} in the answer.
	Base string
}

// Diff is one difference between CouchDB's answer and settee's.
type Diff struct {
	Seq    string `json:"seq"`
	Step   int    `json:"step"` // 1-based
	Name   string `json:"name,omitempty"`
	Method string `json:"method"`
	// Path is the step's path as written (placeholders unsubstituted), the
	// thing declared differences match.
	Path string `json:"path"`
	// Where: "status", "transport", "header NAME", "body POINTER",
	// "body POINTER length", "body POINTER type".
	Where  string `json:"where"`
	Couch  string `json:"couchdb"`
	Settee string `json:"settee"`
}

// Key is the difference in one line, what declared entries match.
func (d Diff) Key() string {
	return fmt.Sprintf("%s: couchdb %s, settee %s", d.Where, d.Couch, d.Settee)
}

func (d Diff) String() string {
	return fmt.Sprintf("%s step %d (%s %s): %s", d.Seq, d.Step, d.Method, d.Path, d.Key())
}

const absent = "<absent>"

// binder pairs values that differ by nature between the two servers
// (generated ids, node names) or by a difference already reported (a rev
// from a differing edit, a digest of differently gzipped bytes): the pair
// seen first is kept, and a later value must keep to it both ways.
type binder struct {
	c2s, s2c map[string]string
}

func newBinder() *binder { return &binder{c2s: map[string]string{}, s2c: map[string]string{}} }

// bind reports whether c and s may stand for each other, and whether this
// is their first sight together.
func (b *binder) bind(c, s string) (ok, first bool) {
	if v, seen := b.c2s[c]; seen {
		return v == s, false
	}
	if _, seen := b.s2c[s]; seen {
		return false, false
	}
	b.c2s[c], b.s2c[s] = s, c
	return true, true
}

// comparer holds what one sequence has bound so far: its 32-hex tokens
// (revs, uuids), digests and node names.
type comparer struct {
	hex, digests, nodes *binder
	// cBase, sBase: the base URLs of every node of each side.
	cBase, sBase []string
	diffs        []Diff
	cur          Diff // the step's fields for new diffs
	ignore       []string
	unordered    []string
}

func newComparer(cBase, sBase []string) *comparer {
	return &comparer{hex: newBinder(), digests: newBinder(), nodes: newBinder(), cBase: cBase, sBase: sBase}
}

func (c *comparer) add(where, couch, settee string) {
	d := c.cur
	d.Where, d.Couch, d.Settee = where, clip(couch), clip(settee)
	c.diffs = append(c.diffs, d)
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
}

// compare compares the answers of one step.
func (c *comparer) compare(st Step, ca, sa Answer) {
	c.ignore, c.unordered = st.Ignore, st.Unordered
	if ca.Err != nil || sa.Err != nil {
		if (ca.Err == nil) != (sa.Err == nil) {
			c.add("transport", errText(ca.Err), errText(sa.Err))
		}
		return
	}
	if ca.Status != sa.Status {
		c.add("status", strconv.Itoa(ca.Status), strconv.Itoa(sa.Status))
	}
	c.compareHeaders(ca, sa)
	c.compareBody(ca, sa)
}

func errText(err error) string {
	if err == nil {
		return "an answer"
	}
	return "no answer (" + err.Error() + ")"
}

// headers compared by value (after normalising) beside X-Couch-*.
var comparedHeaders = []string{
	"Content-Type", "ETag", "Location", "Cache-Control", "WWW-Authenticate",
	"Accept-Ranges", "Content-Range", "Content-Encoding", "Set-Cookie", "Expires", "Pragma",
}

// X-Couch-* headers not compared: the request id is for logs (and CouchDB
// leaves it out of some answers); the stack hash comes with a 500, and
// the status already differs then.
var uncomparedHeaders = map[string]bool{"X-Couch-Request-Id": true, "X-Couch-Stack-Hash": true}

func (c *comparer) compareHeaders(ca, sa Answer) {
	names := append([]string(nil), comparedHeaders...)
	seen := map[string]bool{}
	for _, h := range []http.Header{ca.Header, sa.Header} {
		for k := range h {
			ck := textproto.CanonicalMIMEHeaderKey(k)
			if strings.HasPrefix(ck, "X-Couch-") && !seen[ck] && !uncomparedHeaders[ck] {
				seen[ck] = true
				names = append(names, ck)
			}
		}
	}
	sort.Strings(names[len(comparedHeaders):])
	for _, name := range names {
		if c.ignored("header:" + name) {
			continue
		}
		cv, sv := strings.Join(ca.Header.Values(name), ", "), strings.Join(sa.Header.Values(name), ", ")
		cok, sok := len(ca.Header.Values(name)) > 0, len(sa.Header.Values(name)) > 0
		if !cok && !sok {
			continue
		}
		where := "header " + name
		if cok != sok {
			if !cok {
				cv = absent
			}
			if !sok {
				sv = absent
			}
			c.add(where, cv, sv)
			continue
		}
		switch textproto.CanonicalMIMEHeaderKey(name) {
		case "Content-Type":
			if a, b := normMediaType(cv), normMediaType(sv); a != b {
				c.add(where, a, b)
			}
		case "Etag":
			c.compareETag(where, cv, sv)
		case "Set-Cookie":
			if a, b := normCookie(cv), normCookie(sv); a != b {
				c.add(where, a, b)
			}
		default:
			if !c.sameString(cv, sv, ca.Base, sa.Base, "") {
				c.add(where, cv, sv)
			}
		}
	}
}

// normMediaType lower-cases a media type and its parameters, drops the
// boundary's value (every answer has its own).
func normMediaType(v string) string {
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		return strings.ToLower(strings.ReplaceAll(v, " ", ""))
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := mt
	for _, k := range keys {
		val := strings.ToLower(params[k])
		if k == "boundary" {
			val = "<boundary>"
		}
		out += ";" + k + "=" + val
	}
	return out
}

var cookieVaryRe = regexp.MustCompile(`(?i)(AuthSession=)[^;]*|(Expires=)[^;]*`)

func normCookie(v string) string {
	return cookieVaryRe.ReplaceAllStringFunc(v, func(m string) string {
		k, _, _ := strings.Cut(m, "=")
		if strings.EqualFold(k, "AuthSession") {
			if strings.TrimPrefix(m, k+"=") == "" {
				return k + "="
			}
			return k + "=<session>"
		}
		return k + "=<time>"
	})
}

var (
	revRe     = regexp.MustCompile(`^"?(\d+)-([0-9a-f]{32})"?$`)
	digestRe  = regexp.MustCompile(`^"?([A-Za-z0-9+/]{22}==)"?$`)
	hex32Re   = regexp.MustCompile(`[0-9a-f]{32}`)
	revPartRe = regexp.MustCompile(`\d+-$`)
	nodeRe    = regexp.MustCompile(`^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+$`)
)

// compareETag: a doc's ETag is its quoted rev, an attachment's its quoted
// md5; other ETags (_all_docs, _changes, _uuids, _local docs) are a
// server's internal hash, of which only the presence matters.
func (c *comparer) compareETag(where, cv, sv string) {
	switch {
	case revRe.MatchString(cv) || revRe.MatchString(sv):
		if !c.sameString(cv, sv, "", "", "") {
			c.add(where, cv, sv)
		}
	case digestRe.MatchString(cv) && digestRe.MatchString(sv):
		a, b := digestRe.FindStringSubmatch(cv)[1], digestRe.FindStringSubmatch(sv)[1]
		if ok, first := c.digests.bind("md5-"+a, "md5-"+b); !ok || (first && a != b) {
			c.add(where, cv, sv)
		}
	case strings.HasPrefix(cv, `"`) != strings.HasPrefix(sv, `"`), strings.HasPrefix(cv, "W/") != strings.HasPrefix(sv, "W/"):
		c.add(where, cv, sv)
	}
}

// sameString compares two strings with each side's base URL read as
// {base}, 32-hex tokens paired (revs reported at first sight when they
// differ, other tokens — generated ids, uuids — bound silently), node
// names paired, and md5 digests paired (reported at first sight). key is
// the JSON member name the string is the value of.
func (c *comparer) sameString(a, b, aBase, bBase, key string) bool {
	if a == b {
		// still bind what it holds: an equal rev pins its pair
		for _, t := range hex32Re.FindAllString(a, -1) {
			c.hex.bind(t, t)
		}
		return true
	}
	for _, base := range c.cBase {
		a = strings.ReplaceAll(a, base, "{base}")
	}
	for _, base := range c.sBase {
		b = strings.ReplaceAll(b, base, "{base}")
	}
	if aBase != "" {
		a = strings.ReplaceAll(a, aBase, "{base}")
	}
	if bBase != "" {
		b = strings.ReplaceAll(b, bBase, "{base}")
	}
	if a == b {
		return true
	}
	if nodeRe.MatchString(a) && nodeRe.MatchString(b) {
		ok, _ := c.nodes.bind(a, b)
		return ok
	}
	if strings.HasPrefix(a, "md5-") && strings.HasPrefix(b, "md5-") && len(a) == len(b) {
		ok, first := c.digests.bind(a, b)
		return ok && !first
	}
	at, bt := hex32Re.FindAllStringIndex(a, -1), hex32Re.FindAllStringIndex(b, -1)
	if len(at) == 0 || len(at) != len(bt) {
		return false
	}
	same := true
	var ra, rb strings.Builder
	pa, pb := 0, 0
	for i := range at {
		ta, tb := a[at[i][0]:at[i][1]], b[bt[i][0]:bt[i][1]]
		ra.WriteString(a[pa:at[i][0]])
		rb.WriteString(b[pb:bt[i][0]])
		pa, pb = at[i][1], bt[i][1]
		ok, first := c.hex.bind(ta, tb)
		if !ok {
			same = false
		}
		// a rev's hash (N-hash, or a _revisions id) that differs at first
		// sight is a difference: settee computes CouchDB's rev ids
		isRev := revPartRe.MatchString(a[:at[i][0]]) || key == "_revisions.ids"
		if first && ta != tb && isRev {
			same = false
		}
		ra.WriteString("<hex>")
		rb.WriteString("<hex>")
	}
	ra.WriteString(a[pa:])
	rb.WriteString(b[pb:])
	return same && ra.String() == rb.String()
}

// varying are the member names whose values differ by nature between two
// servers or two runs: compared by type only (an object's members by
// presence and type).
var varying = map[string]bool{
	"seq": true, "last_seq": true, "update_seq": true, "purge_seq": true, "committed_update_seq": true,
	"_local_seq": true, "since": true, "source_last_seq": true, "recorded_seq": true, "start_last_seq": true,
	"end_last_seq": true, "checkpointed_source_seq": true, "source_seq": true, "through_seq": true,
	"instance_start_time": true, "uuid": true, "git_sha": true, "started_on": true, "updated_on": true,
	"start_time": true, "end_time": true, "last_updated": true, "session_id": true, "execution_time_ms": true,
	"sizes": true, "disk_size": true, "data_size": true, "encoded_length": true, "bookmark": true,
	"signature": true, "ref": true, "replication_id": true, "_replication_id": true, "pid": true,
	"timestamp": true, "derived_key": true, "salt": true,
}

// body kinds
func (c *comparer) compareBody(ca, sa Answer) {
	if c.ignored("") {
		return
	}
	cb, sb := ca.Body, sa.Body
	if len(cb) == 0 || len(sb) == 0 {
		if len(cb) != len(sb) {
			c.add("body", describeBytes(cb), describeBytes(sb))
		}
		return
	}
	cmt, cparams, _ := mime.ParseMediaType(ca.Header.Get("Content-Type"))
	smt, sparams, _ := mime.ParseMediaType(sa.Header.Get("Content-Type"))
	if strings.HasPrefix(cmt, "multipart/") && strings.HasPrefix(smt, "multipart/") {
		c.compareMultipart("", cb, sb, cparams["boundary"], sparams["boundary"], ca.Base, sa.Base)
		return
	}
	c.compareBytes("", cb, sb, ca.Base, sa.Base)
}

func describeBytes(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	return fmt.Sprintf("%d bytes %q", len(b), clip(string(b)))
}

// compareBytes compares one body or part: a JSON value, else lines (feeds:
// JSON lines, eventsource data: lines), else the bytes.
func (c *comparer) compareBytes(ptr string, cb, sb []byte, cBase, sBase string) {
	cv, cerr := decode(cb)
	sv, serr := decode(sb)
	if cerr == nil && serr == nil {
		c.compareValue(ptr, "", cv, sv, cBase, sBase)
		return
	}
	if (cerr == nil) != (serr == nil) {
		c.add("body"+ptr+" type", kindOfBody(cb, cerr == nil), kindOfBody(sb, serr == nil))
		return
	}
	cl, sl := lines(cb), lines(sb)
	if len(cl) > 1 || len(sl) > 1 {
		if len(cl) != len(sl) {
			c.add("body"+ptr+" lines", strconv.Itoa(len(cl)), strconv.Itoa(len(sl)))
			return
		}
		for i := range cl {
			c.compareLine(fmt.Sprintf("%s/line%d", ptr, i+1), cl[i], sl[i], cBase, sBase)
		}
		return
	}
	if !bytes.Equal(cb, sb) && !c.sameString(string(cb), string(sb), cBase, sBase, "") {
		c.add("body"+ptr, describeBytes(cb), describeBytes(sb))
	}
}

func kindOfBody(b []byte, isJSON bool) string {
	if isJSON {
		return "json"
	}
	return "text " + describeBytes(b)
}

func lines(b []byte) []string {
	out := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := range out {
		out[i] = strings.TrimSuffix(out[i], "\r")
	}
	return out
}

// compareLine: a feed's line; "id: SEQ" lines of an eventsource feed vary
// by nature.
func (c *comparer) compareLine(ptr, a, b, cBase, sBase string) {
	pa, ra, _ := strings.Cut(a, ": ")
	pb, rb, _ := strings.Cut(b, ": ")
	if pa == "id" && pb == "id" {
		return
	}
	if pa == "data" && pb == "data" {
		a, b = ra, rb
	}
	av, aerr := decode([]byte(a))
	bv, berr := decode([]byte(b))
	if aerr == nil && berr == nil {
		c.compareValue(ptr, "", av, bv, cBase, sBase)
		return
	}
	if a != b && !c.sameString(a, b, cBase, sBase, "") {
		c.add("body"+ptr, a, b)
	}
}

func (c *comparer) compareMultipart(ptr string, cb, sb []byte, cbnd, sbnd, cBase, sBase string) {
	cp, cerr := parts(cb, cbnd)
	sp, serr := parts(sb, sbnd)
	if cerr != nil || serr != nil {
		if (cerr == nil) != (serr == nil) {
			c.add("body"+ptr+" multipart", errText(cerr), errText(serr))
		}
		return
	}
	if len(cp) != len(sp) {
		c.add("body"+ptr+" parts", strconv.Itoa(len(cp)), strconv.Itoa(len(sp)))
		return
	}
	for i := range cp {
		pp := fmt.Sprintf("%s/part%d", ptr, i+1)
		for _, h := range []string{"Content-Type", "Content-Disposition", "Content-Encoding"} {
			a, b := cp[i].hdr.Get(h), sp[i].hdr.Get(h)
			if h == "Content-Type" {
				a, b = normMediaType(a), normMediaType(b)
			}
			if a != b {
				c.add("body"+pp+" header "+h, orAbsent(a), orAbsent(b))
			}
		}
		cmt, cpar, _ := mime.ParseMediaType(cp[i].hdr.Get("Content-Type"))
		smt, spar, _ := mime.ParseMediaType(sp[i].hdr.Get("Content-Type"))
		if strings.HasPrefix(cmt, "multipart/") && strings.HasPrefix(smt, "multipart/") {
			c.compareMultipart(pp, cp[i].body, sp[i].body, cpar["boundary"], spar["boundary"], cBase, sBase)
			continue
		}
		c.compareBytes(pp, cp[i].body, sp[i].body, cBase, sBase)
	}
}

func orAbsent(s string) string {
	if s == "" {
		return absent
	}
	return s
}

type part struct {
	hdr  textproto.MIMEHeader
	body []byte
}

func parts(b []byte, boundary string) ([]part, error) {
	if boundary == "" {
		return nil, fmt.Errorf("no boundary")
	}
	r := multipart.NewReader(bytes.NewReader(b), boundary)
	var out []part
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return out, err
		}
		out = append(out, part{hdr: p.Header, body: body})
	}
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// compareValue compares two JSON values at pointer ptr; key is the member
// name they are the value of.
func (c *comparer) compareValue(ptr, key string, a, b any, cBase, sBase string) {
	if c.ignored(ptr) {
		return
	}
	where := "body " + orRoot(ptr)
	ta, tb := typeOf(a), typeOf(b)
	if ta != tb {
		c.add(where+" type", ta+" "+show(a), tb+" "+show(b))
		return
	}
	vary := varying[key]
	switch a := a.(type) {
	case map[string]any:
		b := b.(map[string]any)
		keys := make([]string, 0, len(a)+len(b))
		for k := range a {
			keys = append(keys, k)
		}
		for k := range b {
			if _, ok := a[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			av, aok := a[k]
			bv, bok := b[k]
			p := ptr + "/" + escapePointer(k)
			if c.ignored(p) {
				continue
			}
			switch {
			case !aok:
				c.add("body "+p, absent, show(bv))
			case !bok:
				c.add("body "+p, show(av), absent)
			case vary:
				// an object of varying values: members by presence and type
				if typeOf(av) != typeOf(bv) {
					c.add("body "+p+" type", typeOf(av), typeOf(bv))
				}
			default:
				c.compareValue(p, k, av, bv, cBase, sBase)
			}
		}
	case []any:
		b := b.([]any)
		if len(a) != len(b) {
			c.add(where+" length", fmt.Sprintf("%d %s", len(a), show(a)), fmt.Sprintf("%d %s", len(b), show(b)))
			return
		}
		if c.isUnordered(ptr) {
			a, b = sortedCopy(a), sortedCopy(b)
		}
		elemKey := key
		if key == "ids" && strings.HasSuffix(ptr, "/_revisions/ids") {
			elemKey = "_revisions.ids"
		}
		for i := range a {
			c.compareValue(ptr+"/"+strconv.Itoa(i), elemKey, a[i], b[i], cBase, sBase)
		}
	case string:
		if !vary && !c.sameString(a, b.(string), cBase, sBase, key) {
			c.add(where, show(a), show(b))
		}
	case json.Number:
		if !vary && !sameNumber(a, b.(json.Number)) {
			c.add(where, a.String(), b.(json.Number).String())
		}
	case bool:
		if a != b.(bool) {
			c.add(where, show(a), show(b))
		}
	}
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return ptr
}

func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	fa, ea := a.Float64()
	fb, eb := b.Float64()
	return ea == nil && eb == nil && fa == fb
}

func sortedCopy(v []any) []any {
	out := append([]any(nil), v...)
	sort.SliceStable(out, func(i, j int) bool { return show(out[i]) < show(out[j]) })
	return out
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// ignored reports whether ptr is under one of the step's Ignore patterns
// ("*" stands for one segment).
func (c *comparer) ignored(ptr string) bool {
	for _, p := range c.ignore {
		if strings.HasPrefix(p, "header:") || strings.HasPrefix(ptr, "header:") {
			if strings.EqualFold(p, ptr) {
				return true
			}
			continue
		}
		if p == "/" {
			p = "" // the whole body
		}
		if pointerUnder(ptr, p) {
			return true
		}
	}
	return false
}

func (c *comparer) isUnordered(ptr string) bool {
	for _, p := range c.unordered {
		if pointerMatch(ptr, p) {
			return true
		}
	}
	return false
}

// pointerUnder: ptr is pattern or below it.
func pointerUnder(ptr, pattern string) bool {
	ps, qs := strings.Split(ptr, "/"), strings.Split(pattern, "/")
	if len(ps) < len(qs) {
		return false
	}
	for i := range qs {
		if qs[i] != "*" && qs[i] != ps[i] {
			return false
		}
	}
	return true
}

func pointerMatch(ptr, pattern string) bool {
	return strings.Count(ptr, "/") == strings.Count(pattern, "/") && pointerUnder(ptr, pattern)
}
