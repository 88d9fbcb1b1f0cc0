package etf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrJSON is what every AppendJSON error unwraps to.
var ErrJSON = errors.New("etf: not JSON that CouchDB accepts")

// maxDepth bounds nesting, as settee's JSON reader does.
const maxDepth = 10000

// AppendJSON appends the term jiffy decodes the JSON value src to (see
// the package doc), without the version byte. It reads the bytes once
// and builds no tree: lists are written with a placeholder count that
// is patched at their end, a list of small integers is then rewritten
// as a string, and an object with a repeated key has the earlier
// members cut out. It fails on what CouchDB refuses (malformed JSON, a
// lone surrogate in an escape, a number beyond a double's range).
func AppendJSON(dst, src []byte) ([]byte, error) {
	var e Encoder
	return e.AppendJSON(dst, src)
}

// An Encoder is AppendJSON with its scratch space kept between calls,
// for a caller that encodes many values; it is not safe for concurrent
// use.
type Encoder struct {
	members []member
	hashes  []uint64
}

// AppendJSON is the package's AppendJSON.
func (e *Encoder) AppendJSON(dst, src []byte) ([]byte, error) {
	t := transcoder{src: src, members: e.members[:0], hashes: e.hashes[:0]}
	defer func() { e.members, e.hashes = t.members[:0], t.hashes[:0] }()
	t.ws()
	out, err := t.value(dst, 0)
	if err != nil {
		return dst, err
	}
	t.ws()
	if t.pos != len(src) {
		return dst, t.fail("data after the value")
	}
	return out, nil
}

type transcoder struct {
	src []byte
	pos int
	// members is a stack of the open objects' members, where each
	// starts in the output and where its key's bytes are
	members []member
	hashes  []uint64 // scratch of lastOfEachKey
}

type member struct {
	start, key, keyEnd int
	hash               uint64 // FNV-1a of the key
}

func (t *transcoder) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrJSON, what, t.pos)
}

func (t *transcoder) ws() {
	for t.pos < len(t.src) {
		switch t.src[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

func (t *transcoder) value(b []byte, depth int) ([]byte, error) {
	if t.pos >= len(t.src) {
		return b, t.fail("unexpected end")
	}
	switch c := t.src[t.pos]; {
	case c == '{':
		return t.object(b, depth+1)
	case c == '[':
		return t.array(b, depth+1)
	case c == '"':
		return t.str(b)
	case c == '-' || c >= '0' && c <= '9':
		return t.number(b)
	case bytes.HasPrefix(t.src[t.pos:], []byte("true")):
		t.pos += 4
		return AppendAtom(b, "true"), nil
	case bytes.HasPrefix(t.src[t.pos:], []byte("false")):
		t.pos += 5
		return AppendAtom(b, "false"), nil
	case bytes.HasPrefix(t.src[t.pos:], []byte("null")):
		t.pos += 4
		return AppendAtom(b, "null"), nil
	}
	return b, t.fail("not a value")
}

func (t *transcoder) object(b []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, t.fail("nested too deep")
	}
	t.pos++ // {
	b = append(b, tagSmallTuple, 1)
	t.ws()
	if t.pos < len(t.src) && t.src[t.pos] == '}' {
		t.pos++
		return AppendNil(b), nil
	}
	head := len(b)
	b = AppendList(b, 0)
	base := len(t.members)
	for {
		if t.pos >= len(t.src) || t.src[t.pos] != '"' {
			return b, t.fail("want a key")
		}
		m := member{start: len(b)}
		b = append(b, tagSmallTuple, 2)
		m.key = len(b) + 5
		var err error
		if b, err = t.str(b); err != nil {
			return b, err
		}
		m.keyEnd = len(b)
		m.hash = fnv1a(b[m.key:m.keyEnd])
		t.members = append(t.members, m)
		t.ws()
		if t.pos >= len(t.src) || t.src[t.pos] != ':' {
			return b, t.fail("want ':'")
		}
		t.pos++
		t.ws()
		if b, err = t.value(b, depth); err != nil {
			return b, err
		}
		t.ws()
		if t.pos >= len(t.src) {
			return b, t.fail("unexpected end")
		}
		if t.src[t.pos] == ',' {
			t.pos++
			t.ws()
			continue
		}
		if t.src[t.pos] != '}' {
			return b, t.fail("want ',' or '}'")
		}
		t.pos++
		break
	}
	ms := t.members[base:]
	n := len(ms)
	if keep := t.lastOfEachKey(b, ms); keep != nil {
		b, n = cut(b, ms, keep)
	}
	t.members = t.members[:base]
	binary.BigEndian.PutUint32(b[head+1:], uint32(n))
	return AppendNil(b), nil
}

// lastOfEachKey reports, when two members have the same key, which to
// keep (the last of each key); nil when every key is unique, which it
// finds without allocating: by comparing the keys of a small object, by
// sorting the keys' hashes of a larger one.
func (t *transcoder) lastOfEachKey(b []byte, ms []member) []bool {
	key := func(i int) []byte { return b[ms[i].key:ms[i].keyEnd] }
	dup := false
	if len(ms) <= 16 {
		for i := 1; i < len(ms) && !dup; i++ {
			for j := range i {
				if ms[i].hash == ms[j].hash && bytes.Equal(key(i), key(j)) {
					dup = true
					break
				}
			}
		}
	} else {
		hs := t.hashes[:0]
		for _, m := range ms {
			hs = append(hs, m.hash)
		}
		slices.Sort(hs)
		for i := 1; i < len(hs) && !dup; i++ {
			dup = hs[i] == hs[i-1] // or a collision: the exact pass below sorts it out
		}
		t.hashes = hs[:0]
	}
	if !dup {
		return nil
	}
	keep := make([]bool, len(ms))
	last := make(map[string]struct{}, len(ms))
	cuts := false
	for i := len(ms) - 1; i >= 0; i-- {
		k := string(key(i))
		if _, ok := last[k]; !ok {
			last[k] = struct{}{}
			keep[i] = true
		} else {
			cuts = true
		}
	}
	if !cuts {
		return nil // two keys' hashes collided
	}
	return keep
}

func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// cut drops the members not kept, moving the rest down in place.
func cut(b []byte, ms []member, keep []bool) ([]byte, int) {
	w, n := ms[0].start, 0
	for i, m := range ms {
		end := len(b)
		if i+1 < len(ms) {
			end = ms[i+1].start
		}
		if keep[i] {
			w += copy(b[w:], b[m.start:end])
			n++
		}
	}
	return b[:w], n
}

func (t *transcoder) array(b []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, t.fail("nested too deep")
	}
	t.pos++ // [
	t.ws()
	if t.pos < len(t.src) && t.src[t.pos] == ']' {
		t.pos++
		return AppendNil(b), nil
	}
	head := len(b)
	b = AppendList(b, 0)
	n, small := 0, true
	for {
		at := len(b)
		var err error
		if b, err = t.value(b, depth); err != nil {
			return b, err
		}
		small = small && len(b)-at == 2 && b[at] == tagSmallInt
		n++
		t.ws()
		if t.pos >= len(t.src) {
			return b, t.fail("unexpected end")
		}
		if t.src[t.pos] == ',' {
			t.pos++
			t.ws()
			continue
		}
		if t.src[t.pos] != ']' {
			return b, t.fail("want ',' or ']'")
		}
		t.pos++
		break
	}
	if small && n < 1<<16 {
		// term_to_binary writes a list of bytes as a string
		b[head] = tagString
		binary.BigEndian.PutUint16(b[head+1:], uint16(n))
		for i := range n {
			b[head+3+i] = b[head+5+2*i+1]
		}
		return b[:head+3+n], nil
	}
	binary.BigEndian.PutUint32(b[head+1:], uint32(n))
	return AppendNil(b), nil
}

// str appends the string at t.pos, unescaped, as a binary.
func (t *transcoder) str(b []byte) ([]byte, error) {
	t.pos++ // "
	b = append(b, tagBinary, 0, 0, 0, 0)
	head := len(b)
	for {
		i := t.pos
		for i < len(t.src) && t.src[i] != '"' && t.src[i] != '\\' && t.src[i] >= 0x20 {
			i++
		}
		b = append(b, t.src[t.pos:i]...)
		t.pos = i
		if i >= len(t.src) {
			return b, t.fail("unterminated string")
		}
		switch t.src[i] {
		case '"':
			t.pos++
			binary.BigEndian.PutUint32(b[head-4:], uint32(len(b)-head))
			return b, nil
		case '\\':
		default:
			return b, t.fail("control character in a string")
		}
		if i+1 >= len(t.src) {
			return b, t.fail("unterminated string")
		}
		t.pos = i + 2
		switch e := t.src[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := t.hex4()
			if !ok {
				return b, t.fail("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if t.pos+1 < len(t.src) && t.src[t.pos] == '\\' && t.src[t.pos+1] == 'u' {
					t.pos += 2
					r2, ok = t.hex4()
				}
				r = utf16.DecodeRune(r, r2)
				if !ok || r == utf8.RuneError {
					return b, t.fail("lone surrogate")
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return b, t.fail("bad escape")
		}
	}
}

func (t *transcoder) hex4() (rune, bool) {
	if t.pos+4 > len(t.src) {
		return 0, false
	}
	var r rune
	for _, c := range t.src[t.pos : t.pos+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	t.pos += 4
	return r, true
}

// number appends the number at t.pos: an integer when it has neither a
// fraction nor an exponent (of any size, as jiffy), else a double. One
// pass checks it and reads the usual number whole (fabric_bench's docs
// are mostly numbers: this was a fifth of a bulk write's CPU); big
// integers and floats beyond the fast path are read again by math/big
// and strconv.
func (t *transcoder) number(b []byte) ([]byte, error) {
	src, start := t.src, t.pos
	i := start
	neg := src[i] == '-'
	if neg {
		i++
	}
	digits := i
	var m uint64
	nd := 0 // significant digits in m
	for ; i < len(src) && src[i] >= '0' && src[i] <= '9'; i++ {
		if nd < 19 {
			m = m*10 + uint64(src[i]-'0')
			if m != 0 {
				nd++
			}
		} else {
			nd++
		}
	}
	if i == digits || src[digits] == '0' && i-digits > 1 {
		t.pos = i
		return b, t.fail("bad number")
	}
	integer, exp := true, 0
	if i < len(src) && src[i] == '.' {
		integer = false
		i++
		f := i
		for ; i < len(src) && src[i] >= '0' && src[i] <= '9'; i++ {
			if nd < 19 {
				m = m*10 + uint64(src[i]-'0')
				if m != 0 {
					nd++
				}
				exp--
			} else {
				nd++
			}
		}
		if i == f {
			t.pos = i
			return b, t.fail("bad number")
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		integer = false
		i++
		eneg := false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			eneg = src[i] == '-'
			i++
		}
		e0, e := i, 0
		for ; i < len(src) && src[i] >= '0' && src[i] <= '9'; i++ {
			if e < 100000 {
				e = e*10 + int(src[i]-'0')
			}
		}
		if i == e0 {
			t.pos = i
			return b, t.fail("bad number")
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	t.pos = i
	if integer {
		if nd <= 18 {
			n := int64(m)
			if neg {
				n = -n
			}
			return AppendInt(b, n), nil
		}
		n, ok := new(big.Int).SetString(string(src[start:i]), 10)
		if !ok {
			return b, t.fail("bad number")
		}
		return AppendBigInt(b, n), nil
	}
	if nd <= 15 {
		// Clinger's fast path: m and the power of ten are exact doubles,
		// so one multiplication or division rounds correctly
		f, ok := float64(m), true
		switch {
		case m == 0:
		case exp >= 0 && exp < len(pow10):
			f *= pow10[exp]
		case exp < 0 && -exp < len(pow10):
			f /= pow10[-exp]
		default:
			ok = false
		}
		if ok {
			if neg {
				f = -f
			}
			return AppendFloat(b, f), nil
		}
	}
	f, err := strconv.ParseFloat(string(src[start:i]), 64)
	if err != nil {
		return b, t.fail("number out of range")
	}
	return AppendFloat(b, f), nil
}

// pow10 are the powers of ten a double holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
