package collate

import (
	"bytes"
	"fmt"
	"sync"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// Tags of the encoding, in collation order; tagEnd closes an array or an
// object and sorts before any element, so that a prefix sorts first.
const (
	tagEnd    byte = 0x00
	tagNull   byte = 0x02
	tagFalse  byte = 0x03
	tagTrue   byte = 0x04
	tagNeg    byte = 0x10
	tagZero   byte = 0x11
	tagPos    byte = 0x12
	tagString byte = 0x20
	tagArray  byte = 0x30
	tagObject byte = 0x40
)

// state is what one comparison or encoding needs: a collator (x/text's
// is not safe for concurrent use and is large, so they are pooled, not
// made per call) and buffers for unescaped strings and sort keys.
type state struct {
	c      *collate.Collator
	keyBuf collate.Buffer
	sa, sb []byte
}

var states = sync.Pool{New: func() any {
	// The root collation at its defaults is ICU's ucol_open(""), which
	// couch_ejson_compare uses: tertiary strength, non-ignorable
	// punctuation and spaces, lower case first, no numeric ordering.
	return &state{c: collate.New(language.Und)}
}}

func getState() *state { return states.Get().(*state) }

func putState(st *state) {
	if cap(st.sa) > 64<<10 || cap(st.sb) > 64<<10 {
		st.sa, st.sb = nil, nil // don't pin a huge key's buffers
	}
	st.keyBuf.Reset()
	states.Put(st)
}

// Compare compares two JSON values (raw JSON text, valid) in CouchDB's view collation:
// null < false < true < numbers < strings < arrays < objects; numbers by value;
// strings by the Unicode Collation Algorithm as CouchDB's ICU does (couch_ejson_compare);
// arrays element by element then length; objects key/value pairs in order, then length.
//
// It returns -1, 0 or 1. Strings equal under the collation but different
// in bytes (e.g. "a" and "a\u0000", a control character being ignorable)
// compare 0, as in CouchDB, which then orders view rows by doc id. For
// invalid JSON the result is the bytes' order: AppendKey would fail on it.
// Safe for concurrent use.
func Compare(a, b []byte) int {
	st := getState()
	defer putState(st)
	sa, sb := scanner{b: a}, scanner{b: b}
	c, err := st.compare(&sa, &sb, 1)
	if err == nil && c == 0 {
		if sa.end() != nil || sb.end() != nil {
			err = errSyntax
		}
	}
	if err != nil {
		return bytes.Compare(a, b)
	}
	return c
}

func (st *state) compare(a, b *scanner, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("%w: nested deeper than %d", errSyntax, maxDepth)
	}
	ka, kb := a.peek(), b.peek()
	if ka == kInvalid || kb == kInvalid {
		return 0, errSyntax
	}
	if ka != kb {
		return cmpOrdered(int64(ka), int64(kb)), nil
	}
	switch ka {
	case kNull:
		return 0, firstErr(a.literal("null"), b.literal("null"))
	case kFalse:
		return 0, firstErr(a.literal("false"), b.literal("false"))
	case kTrue:
		return 0, firstErr(a.literal("true"), b.literal("true"))
	case kNumber:
		la, ia, err := a.number()
		if err != nil {
			return 0, err
		}
		lb, ib, err := b.number()
		if err != nil {
			return 0, err
		}
		return compareNumbers(la, ia, lb, ib), nil
	case kString:
		return st.compareStrings(a, b)
	case kArray:
		moreA, moreB := a.open(']'), b.open(']')
		for {
			if !moreA || !moreB {
				return cmpBool(moreA, moreB), nil
			}
			c, err := st.compare(a, b, depth+1)
			if err != nil || c != 0 {
				return c, err
			}
			var errA, errB error
			moreA, errA = a.next(']')
			moreB, errB = b.next(']')
			if err := firstErr(errA, errB); err != nil {
				return 0, err
			}
		}
	default: // kObject
		moreA, moreB := a.open('}'), b.open('}')
		for {
			if !moreA || !moreB {
				return cmpBool(moreA, moreB), nil
			}
			if a.peek() != kString || b.peek() != kString {
				return 0, errSyntax
			}
			c, err := st.compareStrings(a, b)
			if err != nil || c != 0 {
				return c, err
			}
			if err := firstErr(a.colon(), b.colon()); err != nil {
				return 0, err
			}
			if c, err := st.compare(a, b, depth+1); err != nil || c != 0 {
				return c, err
			}
			var errA, errB error
			moreA, errA = a.next('}')
			moreB, errB = b.next('}')
			if err := firstErr(errA, errB); err != nil {
				return 0, err
			}
		}
	}
}

func (st *state) compareStrings(a, b *scanner) (int, error) {
	var x, y []byte
	var err error
	if x, st.sa, err = a.str(st.sa[:0]); err != nil {
		return 0, err
	}
	if y, st.sb, err = b.str(st.sb[:0]); err != nil {
		return 0, err
	}
	return st.compareText(x, y), nil
}

// compareText compares two unescaped strings.
func (st *state) compareText(x, y []byte) int {
	if bytes.Equal(x, y) {
		return 0
	}
	return st.c.Compare(x, y)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func compareBytes(a, b []byte) int { return bytes.Compare(a, b) }

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// AppendKey appends an order-preserving binary encoding of the JSON value key to dst:
// bytes.Compare(AppendKey(nil,a), AppendKey(nil,b)) has the sign of Compare(a,b)
// (0 only when Compare is 0). It need not be decodable (the index stores the JSON too),
// but it is self-delimiting so that a suffix (e.g. a doc id) can follow it, and
// an array's encoding without its final tagEnd byte is a prefix of the
// encoding of every array that starts with the same elements (see
// AppendArrayPrefix). The format is in the package doc. On invalid JSON
// it returns dst unchanged and an error. Safe for concurrent use.
func AppendKey(dst []byte, key []byte) ([]byte, error) {
	st := getState()
	defer putState(st)
	s := scanner{b: key}
	n := len(dst)
	out, err := st.appendValue(dst, &s, 1)
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return dst[:n], fmt.Errorf("collate: key %.40q: %w", key, err)
	}
	return out, nil
}

// AppendArrayPrefix appends the encoding of the array made of the first n
// elements of the JSON array key (all of it if it has fewer), as AppendKey
// would encode that shorter array: the group key of group_level=n. A key
// that is not an array is encoded whole, as CouchDB groups it at any
// level.
func AppendArrayPrefix(dst []byte, key []byte, n int) ([]byte, error) {
	st := getState()
	defer putState(st)
	s := scanner{b: key}
	start := len(dst)
	if s.peek() != kArray {
		return AppendKey(dst, key)
	}
	dst = append(dst, tagArray)
	var err error
	for more, i := s.open(']'), 0; more && i < n; i++ {
		if dst, err = st.appendValue(dst, &s, 2); err != nil {
			break
		}
		if more, err = s.next(']'); err != nil {
			break
		}
	}
	if err != nil {
		return dst[:start], fmt.Errorf("collate: key %.40q: %w", key, err)
	}
	return append(dst, tagEnd), nil
}

func (st *state) appendValue(dst []byte, s *scanner, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, fmt.Errorf("%w: nested deeper than %d", errSyntax, maxDepth)
	}
	switch s.peek() {
	case kNull:
		return append(dst, tagNull), s.literal("null")
	case kFalse:
		return append(dst, tagFalse), s.literal("false")
	case kTrue:
		return append(dst, tagTrue), s.literal("true")
	case kNumber:
		lit, isInt, err := s.number()
		if err != nil {
			return dst, err
		}
		return appendNumber(dst, lit, isInt), nil
	case kString:
		return st.appendString(dst, s)
	case kArray:
		dst = append(dst, tagArray)
		for more := s.open(']'); more; {
			var err error
			if dst, err = st.appendValue(dst, s, depth+1); err != nil {
				return dst, err
			}
			if more, err = s.next(']'); err != nil {
				return dst, err
			}
		}
		return append(dst, tagEnd), nil
	case kObject:
		dst = append(dst, tagObject)
		for more := s.open('}'); more; {
			if s.peek() != kString {
				return dst, errSyntax
			}
			var err error
			if dst, err = st.appendString(dst, s); err != nil {
				return dst, err
			}
			if err = s.colon(); err != nil {
				return dst, err
			}
			if dst, err = st.appendValue(dst, s, depth+1); err != nil {
				return dst, err
			}
			if more, err = s.next('}'); err != nil {
				return dst, err
			}
		}
		return append(dst, tagEnd), nil
	}
	return dst, errSyntax
}

// appendString appends tagString and the string's collation sort key,
// each 0x00 written 0x00 0xFF and ended by 0x00 0x01, which sorts before
// any byte of a longer key: so the key is self-delimiting and a string
// whose key is a prefix of another's sorts first.
func (st *state) appendString(dst []byte, s *scanner) ([]byte, error) {
	x, sa, err := s.str(st.sa[:0])
	st.sa = sa
	if err != nil {
		return dst, err
	}
	dst = append(dst, tagString)
	st.keyBuf.Reset()
	for _, c := range st.c.Key(&st.keyBuf, x) {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1), nil
}
