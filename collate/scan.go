package collate

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects, as docjson.MaxDepth
// bounds a document's: the walk recurses, and no key settee accepts is
// deeper.
const maxDepth = 512

var errSyntax = errors.New("collate: invalid JSON")

// kind is a JSON value's type, numbered in collation order.
type kind int

const (
	kNull kind = iota
	kFalse
	kTrue
	kNumber
	kString
	kArray
	kObject
	kInvalid
)

// scanner walks one JSON text without building it. It does no allocation
// except to unescape strings that contain escapes.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the kind of the next value, after white space.
func (s *scanner) peek() kind {
	s.ws()
	if s.i >= len(s.b) {
		return kInvalid
	}
	switch c := s.b[s.i]; {
	case c == 'n':
		return kNull
	case c == 'f':
		return kFalse
	case c == 't':
		return kTrue
	case c == '-' || c >= '0' && c <= '9':
		return kNumber
	case c == '"':
		return kString
	case c == '[':
		return kArray
	case c == '{':
		return kObject
	}
	return kInvalid
}

func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errSyntax
	}
	s.i += len(word)
	return nil
}

// number returns the literal of the number at s.i (already peeked) and
// whether it is an integer literal (no fraction, no exponent): CouchDB's
// JSON decoder makes integers exact (bignums) and the rest doubles.
func (s *scanner) number() (lit []byte, isInt bool, err error) {
	start := s.i
	isInt = true
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return nil, false, errSyntax
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if d := s.digits(); d == 0 {
		return nil, false, errSyntax
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		isInt = false
		if s.digits() == 0 {
			return nil, false, errSyntax
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		isInt = false
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return nil, false, errSyntax
		}
	}
	return s.b[start:s.i], isInt, nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// str returns the contents of the string at s.i (already peeked),
// unescaped. Without escapes it is a slice of the input; with escapes it
// is appended to buf. Lone surrogates become U+FFFD, as in encoding/json.
func (s *scanner) str(buf []byte) (out, newBuf []byte, err error) {
	s.i++ // the quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			out = s.b[start:s.i]
			s.i++
			return out, buf, nil
		case c == '\\':
			return s.strEscaped(start, buf)
		case c < 0x20:
			return nil, buf, errSyntax
		}
		s.i++
	}
	return nil, buf, errSyntax
}

func (s *scanner) strEscaped(start int, buf []byte) (out, newBuf []byte, err error) {
	n := len(buf)
	buf = append(buf, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return buf[n:], buf, nil
		case c < 0x20:
			return nil, buf, errSyntax
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			return nil, buf, errSyntax
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, buf, errSyntax
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if save := s.i; s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					s.i += 2
					if r2, ok = s.hex4(); !ok {
						return nil, buf, errSyntax
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						s.i = save // the second escape stands alone
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, buf, errSyntax
		}
	}
	return nil, buf, errSyntax
}

func (s *scanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// next consumes a ',' between elements or the closing delimiter: it
// reports whether another element follows.
func (s *scanner) next(closer byte) (bool, error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errSyntax
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, nil
	case closer:
		s.i++
		return false, nil
	}
	return false, errSyntax
}

// open consumes '[' or '{' and reports whether the container has an
// element.
func (s *scanner) open(closer byte) bool {
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closer {
		s.i++
		return false
	}
	return true
}

// colon consumes the ':' after an object's key.
func (s *scanner) colon() error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return errSyntax
	}
	s.i++
	return nil
}

// end checks that only white space follows the value.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return fmt.Errorf("%w: data after the value at offset %d", errSyntax, s.i)
	}
	return nil
}
