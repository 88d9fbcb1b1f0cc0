package revtree

import (
	"cmp"
	"encoding/hex"
	"strconv"
	"strings"
)

// CompareParsed orders rev strings as Erlang orders CouchDB's parsed revs,
// {Pos, Id}: by position, then by the id's bytes, hex-decoded when it is
// 32 hex digits (couch_doc:parse_rev), else as written. It is the order of
// the revs in CouchDB's purge infos, which keep whatever a request named.
func CompareParsed(a, b string) int {
	pa, ia := parsedKey(a)
	pb, ib := parsedKey(b)
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	return strings.Compare(ia, ib)
}

func parsedKey(r string) (int, string) {
	p, id, _ := strings.Cut(r, "-")
	pos, _ := strconv.Atoi(p)
	if len(id) == 32 {
		if d, err := hex.DecodeString(id); err == nil {
			return pos, string(d)
		}
	}
	return pos, id
}
