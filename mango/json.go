package mango

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object is a JSON object with its members in the order of the text it
// was decoded from, as jiffy decodes an object into a proplist: CouchDB's
// normalized selector, a sort and an index definition keep the order the
// client wrote (the implicit $and lists its fields in that order, and the
// default index name hashes the definition as written). A repeated key
// keeps its last value, at its last place, as CouchDB's body decoding
// does ({"a":1,"b":2,"a":3} is {"b":2,"a":3}).
type Object []Member

// Member is one key and value of an Object.
type Member struct {
	Key   string
	Value any
}

// Get returns the value of key and whether it is there.
func (o Object) Get(key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// MarshalJSON writes the members in order, as CouchDB writes JSON: no
// HTML escaping, and a negative zero (kept as "-0.0" so that the default
// index names hash it as CouchDB does) written 0.0, as jiffy writes it.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case Object:
		b.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.Key)
			b.WriteByte(':')
			if err := writeJSON(b, m.Value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case map[string]any:
		return writeJSON(b, objectOf(v))
	case string:
		writeString(b, v)
		return nil
	case json.Number:
		if v == "-0.0" {
			v = "0.0"
		}
		if !json.Valid([]byte(v)) {
			return errors.New("mango: invalid number " + string(v))
		}
		b.WriteString(string(v))
		return nil
	}
	var e bytes.Buffer
	enc := json.NewEncoder(&e)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Write(bytes.TrimRight(e.Bytes(), "\n"))
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	var e bytes.Buffer
	enc := json.NewEncoder(&e)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Write(bytes.TrimRight(e.Bytes(), "\n"))
}

// decodeJSON decodes text the way CouchDB's request bodies are decoded:
// objects as Object (ordered, repeated keys deduplicated), numbers as
// json.Number in the form CouchDB writes them back (an integer literal
// exactly, any other literal as the double it rounds to, written as
// Erlang's shortest form: 1e3 is 1.0e3, 100 is 100.0, see FormatFloat).
func decodeJSON(b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// maxDepth bounds the nesting of a decoded value, as encoding/json's
// Unmarshal does (10000): everything here recurses over values, and a
// body of a million "[" must be refused, not overflow the stack. jiffy
// has no such bound; CouchDB takes what is refused here.
const maxDepth = 10000

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("JSON nested too deep")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			var o Object
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o = append(o, Member{k, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if o == nil {
				o = Object{}
			}
			return dedupe(o), nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, errors.New("unexpected delimiter")
	case json.Number:
		return canonNumber(t)
	}
	return t, nil
}

// dedupe drops each member whose key comes again later (see Object),
// in linear time.
func dedupe(o Object) Object {
	last := make(map[string]int, len(o))
	for i, m := range o {
		last[m.Key] = i
	}
	if len(last) == len(o) {
		return o
	}
	out := make(Object, 0, len(last))
	for i, m := range o {
		if last[m.Key] == i {
			out = append(out, m)
		}
	}
	return out
}

// canonNumber is a number literal as jiffy decodes it and CouchDB writes
// it back: an integer literal (no fraction, no exponent) is an exact
// integer, "-0" being 0; any other is a double in Erlang's shortest form.
func canonNumber(n json.Number) (json.Number, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		i, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return "", errors.New("bad number")
		}
		return json.Number(i.String()), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", errors.New("number out of range")
	}
	if f == 0 && math.Signbit(f) {
		// jiffy keeps -0.0 (term_to_binary tells it from 0.0) and
		// writes it 0.0; see Object.MarshalJSON
		return "-0.0", nil
	}
	return json.Number(FormatFloat(f)), nil
}

// isInt reports whether a decoded number is an integer (Erlang's
// is_integer): canonNumber writes every double with a "." or an "e".
func isInt(v any) (*big.Int, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return nil, false
	}
	i, ok := new(big.Int).SetString(string(n), 10)
	return i, ok
}

// FormatFloat writes f as Erlang's float_to_list(F, [short]) does, which
// is how CouchDB 3.5.2 writes a double in JSON and in error reasons: the
// shortest digits that read back as f, in fixed notation unless the
// scientific one is shorter or |f| >= 2^53 (ties go to fixed), always
// with a fraction: 100.0, 1.0e3, 0.0001, 1.0e-5, 9.007199254740992e15.
func FormatFloat(f float64) string {
	if f == 0 {
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expS)
	sci := digits[:1] + "."
	if len(digits) > 1 {
		sci += digits[1:]
	} else {
		sci += "0"
	}
	sci += "e" + strconv.Itoa(exp)
	var fixed string
	switch {
	case exp >= len(digits)-1:
		fixed = digits + strings.Repeat("0", exp-len(digits)+1) + ".0"
	case exp < 0:
		fixed = "0." + strings.Repeat("0", -exp-1) + digits
	default:
		fixed = digits[:exp+1] + "." + digits[exp+1:]
	}
	if f >= 1<<53 || len(sci) < len(fixed) {
		return sign + sci
	}
	return sign + fixed
}

// erlW writes a decoded JSON value as Erlang's io_lib:format("~w") writes
// the term jiffy decodes it to, which is how CouchDB's mango_error puts a
// bad value into a reason: binaries as their bytes (<<97,98>>), objects
// as {[{K,V}]}, null/true/false as atoms.
func erlW(v any) string {
	var b strings.Builder
	writeErl(&b, v, false)
	return b.String()
}

// erlP is io_lib:format("~p") for the terms mango_sort puts in its
// reasons, the term starting after the reason's first col characters:
// printable binaries as <<"...">>, printable lists of integers as
// strings, and a term too long for the line (80 columns) laid out as
// OTP's io_lib_pretty does: a list's or tuple's elements aligned after
// its opening bracket, as many atomic ones (binaries, numbers, strings)
// to a line as fit, a list or tuple always on a line of its own.
func erlP(v any, col int) string {
	var b strings.Builder
	writePretty(&b, ptree(v), col+1, 0)
	return b.String()
}

func flatP(v any) string {
	var b strings.Builder
	writeErl(&b, v, true)
	return b.String()
}

// lineLength is ~p's line length.
const lineLength = 80

// pnode is a term to write with ~p, with the length it has written on
// one line, computed once (io_lib_pretty's print_length): a list or a
// tuple has kids, an atomic term its text.
type pnode struct {
	n           int // characters on one line
	text        string
	open, close string
	kids        []*pnode
}

func (p *pnode) atomic() bool { return p.open == "" }

func ptree(v any) *pnode {
	switch v := v.(type) {
	case Object:
		if len(v) == 0 {
			return &pnode{n: 4, text: "{[]}"}
		}
		// {Proplist}: a tuple of one list of {Key, Value} tuples
		l := &pnode{open: "[", close: "]", n: 1 + len(v)}
		for _, m := range v {
			t := &pnode{open: "{", close: "}", kids: []*pnode{ptree(m.Key), ptree(m.Value)}}
			t.n = 3 + t.kids[0].n + t.kids[1].n
			l.kids = append(l.kids, t)
			l.n += t.n
		}
		return &pnode{open: "{", close: "}", n: 2 + l.n, kids: []*pnode{l}}
	case []any:
		if atomicList(v) {
			break
		}
		l := &pnode{open: "[", close: "]", n: 1 + len(v)}
		for _, e := range v {
			k := ptree(e)
			l.kids = append(l.kids, k)
			l.n += k.n
		}
		return l
	case map[string]any:
		return ptree(objectOf(v))
	}
	t := flatP(v)
	return &pnode{n: utf8.RuneCountInString(t), text: t}
}

// atomicList is a list io_lib_pretty writes as one string: [] or a
// printable list.
func atomicList(v []any) bool {
	if len(v) == 0 {
		return true
	}
	_, ok := printableIntList(v)
	return ok
}

func writeFlat(b *strings.Builder, p *pnode) {
	if p.atomic() {
		b.WriteString(p.text)
		return
	}
	b.WriteString(p.open)
	for i, k := range p.kids {
		if i > 0 {
			b.WriteByte(',')
		}
		writeFlat(b, k)
	}
	b.WriteString(p.close)
}

// writePretty is io_lib_pretty:pp: p written from the 1-based column
// col, with ld closing brackets to follow it.
func writePretty(b *strings.Builder, p *pnode, col, ld int) {
	if p.n < lineLength-col-ld || p.atomic() {
		writeFlat(b, p)
		return
	}
	b.WriteString(p.open)
	if len(p.kids) == 1 && p.open == "{" {
		// {List}: the one element is the last
		writePretty(b, p.kids[0], col+1, ld+1)
	} else {
		writePrettyList(b, p.kids, col+1, ld)
	}
	b.WriteString(p.close)
}

// writePrettyList is io_lib_pretty:pp_list and pp_tail: the elements
// from column col0.
func writePrettyList(b *strings.Builder, es []*pnode, col0, ld int) {
	lastDepth := func(i int) int {
		if i == len(es)-1 {
			return ld + 1
		}
		return 0
	}
	indent := strings.Repeat(" ", col0-1)
	element := func(e *pnode, ld1 int) int {
		if e.n < lineLength-col0-ld1 && e.atomic() {
			writeFlat(b, e)
			return e.n
		}
		writePretty(b, e, col0, ld1)
		return lineLength // a new line after it
	}
	col := col0 + element(es[0], lastDepth(0))
	for i := 1; i < len(es); i++ {
		e, ld1 := es[i], lastDepth(i)
		elen := 1 + e.n
		if e.atomic() && (ld1 == 0 && elen+1 < lineLength-col || ld1 > 0 && elen < lineLength-col-ld1) {
			b.WriteByte(',')
			writeFlat(b, e)
			col += elen
			continue
		}
		b.WriteString(",\n" + indent)
		col = col0 + element(e, ld1)
	}
}

func writeErl(b *strings.Builder, v any, pretty bool) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(string(v))
	case float64:
		b.WriteString(FormatFloat(v))
	case string:
		if pretty && v != "" && printableLatin1(v) {
			b.WriteString(`<<"`)
			writeErlChars(b, v)
			b.WriteString(`">>`)
			return
		}
		b.WriteString("<<")
		for i := 0; i < len(v); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(v[i])))
		}
		b.WriteString(">>")
	case []any:
		if pretty && len(v) > 0 {
			if s, ok := printableIntList(v); ok {
				b.WriteByte('"')
				writeErlChars(b, s)
				b.WriteByte('"')
				return
			}
		}
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeErl(b, e, pretty)
		}
		b.WriteByte(']')
	case Object:
		b.WriteString("{[")
		for i, m := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('{')
			writeErl(b, m.Key, pretty)
			b.WriteByte(',')
			writeErl(b, m.Value, pretty)
			b.WriteByte('}')
		}
		b.WriteString("]}")
	case map[string]any:
		writeErl(b, objectOf(v), pretty)
	default:
		b.WriteString("undefined")
	}
}

// printableLatin1 is io_lib:printable_latin1_list over a binary's bytes.
// The bytes are written as they are: CouchDB's reason is their bytes, so
// UTF-8 text comes out as the same text.
func printableLatin1(s string) bool {
	for i := 0; i < len(s); i++ {
		if !printableByte(int(s[i])) {
			return false
		}
	}
	return true
}

func printableByte(c int) bool {
	switch {
	case c >= 32 && c <= 126, c >= 160 && c <= 255:
		return true
	}
	switch c {
	case '\n', '\r', '\t', '\v', '\b', '\f', 27:
		return true
	}
	return false
}

func printableIntList(v []any) (string, bool) {
	var s []byte
	for _, e := range v {
		i, ok := isInt(e)
		if !ok || !i.IsInt64() || !printableByte(int(i.Int64())) {
			return "", false
		}
		s = append(s, byte(i.Int64()))
	}
	return string(s), true
}

func writeErlChars(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
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
		case '\v':
			b.WriteString(`\v`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case 27:
			b.WriteString(`\e`)
		default:
			b.WriteByte(c)
		}
	}
}

// objectOf turns a map into an Object with sorted keys (a map has no
// order of its own).
func objectOf(m map[string]any) Object {
	keys := sortedKeys(m)
	o := make(Object, len(keys))
	for i, k := range keys {
		o[i] = Member{k, m[k]}
	}
	return o
}

// ordered converts a value decoded with encoding/json (maps, float64)
// into this package's form (Object, json.Number); values already in it
// pass through.
func ordered(v any) any {
	switch v := v.(type) {
	case map[string]any:
		o := objectOf(v)
		for i := range o {
			o[i].Value = ordered(o[i].Value)
		}
		return o
	case Object:
		o := make(Object, len(v))
		for i, m := range v {
			o[i] = Member{m.Key, ordered(m.Value)}
		}
		return o
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = ordered(e)
		}
		return a
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			// encoding/json lost whether the literal was an integer;
			// a whole number within float64's exact range is taken as
			// one, as the matcher does (see integer)
			return json.Number(strconv.FormatInt(int64(v), 10))
		}
		return json.Number(FormatFloat(v))
	case json.Number:
		if n, err := canonNumber(v); err == nil {
			return n
		}
		return v
	}
	return v
}

// plain converts this package's form into what encoding/json decodes
// (maps; json.Number kept), for the matcher.
func plain(v any) any {
	switch v := v.(type) {
	case Object:
		m := make(map[string]any, len(v))
		for _, e := range v {
			m[e.Key] = plain(e.Value)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = plain(e)
		}
		return a
	}
	return v
}
