package docjson

import (
	"bytes"
	"unsafe"
)

// Doc is a document body split into CouchDB's special members and the rest.
type Doc struct {
	ID    string // _id, unescaped; valid only if HasID
	HasID bool
	// Rev is _rev, unescaped and not parsed further; valid only if HasRev.
	// As in CouchDB, a _rev that follows _revisions is ignored: when
	// Revisions is set it is the authority on the document's revision.
	Rev    string
	HasRev bool
	// Deleted is true only for "_deleted": true.
	Deleted   bool
	Revisions *Revisions // _revisions, nil if absent
	// Attachments is the _attachments object as compact JSON, nil if absent.
	// It is not checked beyond being an object.
	Attachments    []byte
	HasAttachments bool
	// Access is the _access member as compact JSON, nil if absent. Nothing
	// uses it yet (per-document access control is future work).
	Access []byte
	// Body is the object without the special members, compact: insignificant
	// whitespace removed, everything else byte-identical to the input, in
	// input order. The _replication_* members of _replicator documents are
	// not special to CouchDB and stay in Body.
	Body []byte
}

// Revisions is the _revisions member: the revision ids from the newest
// (position Start) back towards the root.
type Revisions struct {
	Start uint64
	IDs   []string
}

type specialKind uint8

const (
	kNone specialKind = iota
	kID
	kRev
	kDeleted
	kRevisions
	kAttachments
	kAccess
	kIgnored // accepted and dropped
	kBad
)

// classify maps a decoded top-level key starting with '_' to its kind.
func classify(key []byte) specialKind {
	switch string(key) {
	case "_id":
		return kID
	case "_rev":
		return kRev
	case "_deleted":
		return kDeleted
	case "_revisions":
		return kRevisions
	case "_attachments":
		return kAttachments
	case "_access":
		return kAccess
	case "_revs_info", "_local_seq", "_conflicts", "_deleted_conflicts":
		return kIgnored
	case "_replication_state", "_replication_state_time", "_replication_state_reason",
		"_replication_id", "_replication_stats":
		return kNone // part of the body in CouchDB
	}
	return kBad
}

// member is a special member found at the top level: the span of its key
// token and of its value in the input.
type member struct {
	kind   specialKind
	ks, ke int
	vs, ve int
}

// docBox holds a Doc together with the memory for its strings, so that a
// typical document costs one allocation besides its body.
type docBox struct {
	doc  Doc
	revs Revisions
	buf  [128]byte
}

// ParseDoc validates that b is exactly one JSON value (see Valid) and an
// object, and splits it into the special members CouchDB knows and the
// compact Body, following CouchDB's couch_doc:transfer_fields:
//
//   - _id must be a string (ErrIDNotString). It is not validated further
//     (empty, leading underscore, length): that is the caller's job.
//   - _rev must be a string (ErrBadRev); its format is not checked.
//   - _deleted must be true or false, _revisions and _attachments must be
//     objects (else ErrBadSpecialMember); _revisions needs an integer start
//     and ids, an array of strings where a 32-character id is hexadecimal
//     (ErrBadRevisions).
//   - _revs_info, _local_seq, _conflicts and _deleted_conflicts are dropped.
//   - any other top-level key starting with '_' is ErrBadSpecialMember,
//     except the _replication_* members, which stay in Body.
//
// A key that occurs more than once counts with its last occurrence, like
// CouchDB's decoder; Body keeps duplicate non-special keys as they are.
// Invalid JSON is reported before a non-object, which is reported before a
// bad member. The returned Doc does not share memory with b.
func ParseDoc(b []byte) (*Doc, error) {
	n := len(b)
	i := SkipWS(b, 0)
	if i >= n || b[i] != '{' {
		s := scanner{b: b}
		if s.whole() < 0 {
			return nil, s.err()
		}
		return nil, errOf(ErrNotObject, BadRequest)
	}
	s := scanner{b: b, emit: true}
	s.out = make([]byte, 1, n)
	s.out[0] = '{'
	s.depth = 1
	s.stack[0] = 1

	// The last occurrence of each kind of special member (the first for
	// kBad), so that memory and work stay bounded however many there are.
	var specials [kBad + 1]member
	var seen uint16
	kept := 0
	i = SkipWS(b, i+1)
	if i < n && b[i] == '}' {
		i++
	} else {
		for {
			if i >= n || b[i] != '"' {
				s.fail(i, "expecting a string key")
				return nil, s.err()
			}
			ks := i
			if i = s.str(i); i < 0 {
				return nil, s.err()
			}
			ke := i
			kind := kNone
			// A key that decodes to "_..." starts with '_' or an escape.
			if raw := b[ks+1 : ke-1]; len(raw) > 0 && (raw[0] == '_' || raw[0] == '\\') {
				if bytes.IndexByte(raw, '\\') >= 0 {
					raw = unescape(nil, raw)
				}
				if raw[0] == '_' {
					kind = classify(raw)
				}
			}
			outLen := len(s.out)
			if kind == kNone && kept > 0 {
				s.out = append(s.out, ',')
			}
			s.cp = ks
			i = s.ws(i)
			if i >= n || b[i] != ':' {
				s.fail(i, "expecting ':' after object key")
				return nil, s.err()
			}
			vs := s.ws(i + 1)
			if i = s.value(vs); i < 0 {
				return nil, s.err()
			}
			if kind == kNone {
				s.out = append(s.out, b[s.cp:i]...)
				kept++
			} else {
				s.out = s.out[:outLen]
				if bit := uint16(1) << kind; kind != kIgnored && (kind != kBad || seen&bit == 0) {
					specials[kind] = member{kind: kind, ks: ks, ke: ke, vs: vs, ve: i}
					seen |= bit
				}
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
			return nil, s.err()
		}
	}
	if j := SkipWS(b, i); j != n {
		s.fail(j, "data after the JSON value")
		return nil, s.err()
	}
	s.out = append(s.out, '}')

	box := new(docBox)
	d := &box.doc
	d.Body = s.out
	if seen != 0 {
		// In input order, as CouchDB checks them.
		var order [kBad + 1]member
		list := order[:0]
		for k := range specials {
			if seen&(1<<k) != 0 {
				m := specials[k]
				x := len(list)
				list = append(list, m)
				for ; x > 0 && list[x-1].ks > m.ks; x-- {
					list[x] = list[x-1]
				}
				list[x] = m
			}
		}
		if err := box.transfer(b, list); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// transfer checks and stores the special members, given in input order, as
// CouchDB's transfer_fields does.
func (box *docBox) transfer(b []byte, specials []member) *Error {
	d := &box.doc
	// Room for the strings is taken from box.buf when it fits.
	need := 0
	for _, m := range specials {
		if m.kind == kID || m.kind == kRev || m.kind == kRevisions {
			need += m.ve - m.vs
		}
	}
	a := box.buf[:0]
	if need > len(box.buf) {
		a = make([]byte, 0, need)
	}
	for _, m := range specials {
		v := b[m.vs:m.ve]
		switch m.kind {
		case kID:
			if v[0] != '"' {
				return errOf(ErrIDNotString, IllegalDocID)
			}
			d.ID, a = arenaString(a, v)
			d.HasID = true
		case kRev:
			if d.Revisions != nil {
				continue // CouchDB ignores a _rev that follows _revisions
			}
			// CouchDB parses it here (parse_rev): "" is no rev either
			if v[0] != '"' || len(v) == 2 {
				return errOf(ErrBadRev, BadRequest)
			}
			d.Rev, a = arenaString(a, v)
			d.HasRev = true
		case kDeleted:
			switch v[0] {
			case 't':
				d.Deleted = true
			case 'f':
				d.Deleted = false
			default:
				return badSpecial("_deleted")
			}
		case kRevisions:
			if v[0] != '{' {
				return badSpecial("_revisions")
			}
			var err *Error
			if a, err = box.revisions(v, a); err != nil {
				return err
			}
		case kAttachments:
			if v[0] != '{' {
				return badSpecial("_attachments")
			}
			d.Attachments, _ = Compact(make([]byte, 0, len(v)), v)
			d.HasAttachments = true
		case kAccess:
			d.Access, _ = Compact(make([]byte, 0, len(v)), v)
		case kBad:
			return badSpecial(string(unescape(nil, b[m.ks+1:m.ke-1])))
		}
	}
	return nil
}

// arenaString decodes the valid string token tok into the free capacity of
// a and returns it as a string sharing a's memory. a is only ever appended
// to, within its capacity, so the bytes behind a returned string never
// change.
func arenaString(a, tok []byte) (string, []byte) {
	start := len(a)
	a = unescape(a, tok[1:len(tok)-1])
	if len(a) == start {
		return "", a
	}
	return unsafe.String(&a[start], len(a)-start), a
}

// revisions parses the valid JSON object v as _revisions. v was validated
// with the rest of the document, so it is walked, not scanned again.
func (box *docBox) revisions(v, a []byte) ([]byte, *Error) {
	var start, ids []byte
	Object(v, 0, func(k []byte, vs int) int {
		ve := SkipValue(v, vs)
		key := k[1 : len(k)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = unescape(nil, key)
		}
		switch string(key) {
		case "start":
			start = v[vs:ve]
		case "ids":
			ids = v[vs:ve]
		}
		return ve
	})
	pos, ok := parseStart(start)
	if !ok {
		return a, newErr(ErrBadRevisions, DocValidation, "_revisions.start isn't an integer.")
	}
	if len(ids) == 0 || ids[0] != '[' {
		return a, newErr(ErrBadRevisions, DocValidation, "_revisions.ids isn't a array.")
	}
	list := make([]string, 0, len(ids)/35+1)
	var bad *Error
	Array(ids, 0, func(vs int) int {
		if ids[vs] != '"' {
			bad = newErr(ErrBadRevisions, DocValidation, "RevId isn't a string")
			return -1
		}
		ve := SkipString(ids, vs)
		var id string
		id, a = arenaString(a, ids[vs:ve])
		if len(id) == 32 && !isHex(id) {
			bad = newErr(ErrBadRevisions, DocValidation, "RevId isn't a valid hexadecimal")
			return -1
		}
		list = append(list, id)
		return ve
	})
	if bad != nil {
		return a, bad
	}
	box.revs = Revisions{Start: pos, IDs: list}
	box.doc.Revisions = &box.revs
	return a, nil
}

// parseStart parses a JSON number token that is an integer in the Erlang
// sense (no fraction, no exponent) and fits a uint64. "-0" is 0.
func parseStart(t []byte) (uint64, bool) {
	if len(t) == 0 {
		return 0, false
	}
	if t[0] == '-' {
		return 0, string(t) == "-0"
	}
	var v uint64
	for _, c := range t {
		if c-'0' >= 10 {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c-'0' >= 10 && c|0x20-'a' >= 6 {
			return false
		}
	}
	return true
}
