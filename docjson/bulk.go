package docjson

import "bytes"

// BulkDocs is a _bulk_docs request body split into its parts.
type BulkDocs struct {
	// Docs holds the raw bytes of each element of the docs array, in order,
	// without surrounding whitespace. They alias the input. Each is valid
	// JSON but may be any value: give each to ParseDoc, which reports a
	// non-object as ErrNotObject.
	Docs [][]byte
	// NewEdits is the new_edits member, true when absent.
	NewEdits    bool
	HasNewEdits bool
	// AllOrNothing is true only for "all_or_nothing": true.
	AllOrNothing bool
	// W is the w member (write quorum), valid only if HasW: CouchDB uses it
	// instead of the w query parameter when it is an integer.
	W    int
	HasW bool
}

// ParseBulkDocs validates a _bulk_docs request body in one pass and returns
// its parts without decoding the documents. Errors, in CouchDB's order:
// invalid JSON (ErrInvalidJSON), not an object (ErrBodyNotObject), no docs
// member (ErrMissingDocs), docs not an array (ErrDocsNotArray), new_edits
// present but not a boolean (ErrBadNewEdits). Other members are ignored; of a
// member given twice the last counts.
func ParseBulkDocs(b []byte) (BulkDocs, error) {
	bd := BulkDocs{NewEdits: true}
	n := len(b)
	s := scanner{b: b}
	i := SkipWS(b, 0)
	if i >= n || b[i] != '{' {
		if s.whole() < 0 {
			return BulkDocs{}, s.err()
		}
		return BulkDocs{}, errOf(ErrBodyNotObject, BadRequest)
	}
	s.depth = 1
	s.stack[0] = 1
	hasDocs, docsArray, badNewEdits := false, false, false
	i = SkipWS(b, i+1)
	if i < n && b[i] == '}' {
		i++
	} else {
		for {
			if i >= n || b[i] != '"' {
				s.fail(i, "expecting a string key")
				return BulkDocs{}, s.err()
			}
			ks := i
			if i = s.str(i); i < 0 {
				return BulkDocs{}, s.err()
			}
			key := b[ks+1 : i-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				key = unescape(nil, key)
			}
			i = SkipWS(b, i)
			if i >= n || b[i] != ':' {
				s.fail(i, "expecting ':' after object key")
				return BulkDocs{}, s.err()
			}
			vs := SkipWS(b, i+1)
			switch string(key) {
			case "docs":
				hasDocs = true
				docsArray = vs < n && b[vs] == '['
				if docsArray {
					bd.Docs = bd.Docs[:0]
					i = s.docs(vs, &bd.Docs)
				} else {
					i = s.value(vs)
				}
			case "new_edits":
				i = s.value(vs)
				bd.HasNewEdits = true
				switch {
				case i < 0:
				case string(b[vs:i]) == "true":
					bd.NewEdits, badNewEdits = true, false
				case string(b[vs:i]) == "false":
					bd.NewEdits, badNewEdits = false, false
				default:
					bd.NewEdits, badNewEdits = true, true
				}
			case "all_or_nothing":
				i = s.value(vs)
				bd.AllOrNothing = i >= 0 && string(b[vs:i]) == "true"
			case "w":
				i = s.value(vs)
				if i >= 0 {
					bd.W, bd.HasW = parseInt(b[vs:i])
				}
			default:
				i = s.value(vs)
			}
			if i < 0 {
				return BulkDocs{}, s.err()
			}
			i = SkipWS(b, i)
			if i < n && b[i] == ',' {
				i = SkipWS(b, i+1)
				continue
			}
			if i < n && b[i] == '}' {
				i++
				break
			}
			s.fail(i, "invalid character, expecting ',' or '}'")
			return BulkDocs{}, s.err()
		}
	}
	if j := SkipWS(b, i); j != n {
		s.fail(j, "data after the JSON value")
		return BulkDocs{}, s.err()
	}
	switch {
	case !hasDocs:
		return BulkDocs{}, errOf(ErrMissingDocs, BadRequest)
	case !docsArray:
		return BulkDocs{}, errOf(ErrDocsNotArray, BadRequest)
	case badNewEdits:
		return BulkDocs{}, errOf(ErrBadNewEdits, BadRequest)
	}
	if bd.Docs == nil {
		bd.Docs = [][]byte{}
	}
	return bd, nil
}

// docs scans the array at b[i] == '[' and appends the span of each element.
func (s *scanner) docs(i int, docs *[][]byte) int {
	b := s.b
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	if s.depth >= MaxDepth {
		return s.fail(i, "nesting too deep")
	}
	s.stack[s.depth>>6] &^= 1 << (s.depth & 63)
	s.depth++ // the docs array; elements are scanned one level deeper
	for {
		e := s.value(i)
		if e < 0 {
			return -1
		}
		*docs = append(*docs, b[i:e:e])
		i = SkipWS(b, e)
		if i < len(b) && b[i] == ',' {
			i = SkipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			s.depth--
			return i + 1
		}
		return s.fail(i, "invalid character, expecting ',' or ']'")
	}
}

// parseInt parses a JSON number token that is an integer fitting an int.
func parseInt(t []byte) (int, bool) {
	neg := len(t) > 0 && t[0] == '-'
	if neg {
		t = t[1:]
	}
	if len(t) == 0 || len(t) > 18 {
		return 0, false
	}
	v := 0
	for _, c := range t {
		if c-'0' >= 10 {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}
