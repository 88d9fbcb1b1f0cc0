package views

import (
	"encoding/binary"
	"encoding/json"

	"github.com/settee/settee/collate"
	"github.com/settee/settee/shard"
)

// Record kinds under a copy's handle and the view kind byte 'v', then the
// index's 16-byte signature:
//
//	<handle> 'v' <sig> 'c'                         checkpoint (JSON)
//	<handle> 'v' <sig> 'r' <view u16> <key> <id> <n>  a row: uvarint(len key JSON) key JSON, value JSON
//	<handle> 'v' <sig> 'd' <docid>                  the doc's rows (back-index): the row key suffixes
//	<handle> 'v' <sig> 'a' <view u16> <row suffix>   a count bucket: uvarint rows from it to the next (counts.go)
//	<handle> 'v' <sig> 'g' <view u16> <row suffix>   a bucket's reduction, kept once a query computed it (reductions.go)
//
// <key> and <id> are collate.AppendKey encodings (self-delimiting, byte
// order = CouchDB's collation of [key, docid]), <n> a uvarint telling a
// doc's equal emits apart. So a range of a view is one badger key range,
// in order; the handle prefix makes the index go with its copy (a drop of
// the database or of the copy drops it), and the signature with its
// design doc (view cleanup drops one prefix).
const (
	kindView       = 'v'
	subCheckpoint  = 'c'
	subRow         = 'r'
	subDoc         = 'd'
	subAnchor      = 'a'
	subReduction   = 'g'
	indexPrefixLen = 4 + 1 + 16
)

// indexPrefix is every key of one index of one copy.
func indexPrefix(handle uint32, sig [16]byte) []byte {
	b := append(shard.Prefix(handle), kindView)
	return append(b, sig[:]...)
}

// ViewsPrefix is every index of a copy.
func ViewsPrefix(handle uint32) []byte { return append(shard.Prefix(handle), kindView) }

type keyspace struct{ p []byte }

func (k keyspace) sub(c byte, extra int) []byte {
	b := make([]byte, len(k.p)+1, len(k.p)+1+extra)
	copy(b, k.p)
	b[len(k.p)] = c
	return b
}

func (k keyspace) checkpoint() []byte { return k.sub(subCheckpoint, 0) }

// viewPrefix is every row of view v.
func (k keyspace) viewPrefix(v int) []byte {
	return binary.BigEndian.AppendUint16(k.sub(subRow, 2), uint16(v))
}

func (k keyspace) doc(id string) []byte { return append(k.sub(subDoc, len(id)), id...) }

// reductionPrefix is view v's bucket reductions (reductions.go).
func (k keyspace) reductionPrefix(v int) []byte {
	return binary.BigEndian.AppendUint16(k.sub(subReduction, 2), uint16(v))
}

// anchorPrefix is view v's count buckets (counts.go).
func (k keyspace) anchorPrefix(v int) []byte {
	return binary.BigEndian.AppendUint16(k.sub(subAnchor, 2), uint16(v))
}

// partitionKey is the prefix of a partitioned index's rows of partition p:
// the partition as a collated string, so that a partition's rows are one
// key range, in key order within it.
func partitionKey(p string) []byte {
	j, _ := json.Marshal(p)
	b, _ := collate.AppendKey(nil, j)
	return b
}

// PartitionBounds turns a query's collated bounds (start inclusive, end
// exclusive, nil for open) into those of partition p's rows in a
// partitioned index.
func PartitionBounds(p string, start, end []byte) ([]byte, []byte) {
	pk := partitionKey(p)
	s := append(append([]byte(nil), pk...), start...)
	var e []byte
	if end == nil {
		e = append(append([]byte(nil), pk...), 0xff) // after every row of p: no tag is 0xff
	} else {
		e = append(append([]byte(nil), pk...), end...)
	}
	return s, e
}

// rowSuffix is a row's key after the view prefix: key, doc id, emit
// number; a partitioned index's rows have their partition's key first.
func rowSuffix(partition []byte, key []byte, id string, n int) ([]byte, error) {
	b, err := collate.AppendKey(append(make([]byte, 0, len(partition)+len(key)+len(id)+8), partition...), key)
	if err != nil {
		return nil, err
	}
	idJSON, _ := json.Marshal(id)
	if b, err = collate.AppendKey(b, idJSON); err != nil {
		return nil, err
	}
	return binary.AppendUvarint(b, uint64(n)), nil
}

// rowValue is a row's value record: the key's JSON and the doc id (the
// row key's encodings are not decodable) and the value's JSON.
func rowValue(key []byte, id string, value []byte) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 4+len(key)+len(id)+len(value)), uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return append(b, value...)
}

func splitRowValue(v []byte) (key []byte, id string, value []byte, ok bool) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return nil, "", nil, false
	}
	key, v = v[w:w+int(n)], v[w+int(n):]
	n, w = binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return nil, "", nil, false
	}
	return key, string(v[w : w+int(n)]), v[w+int(n):], true
}

// backIndex encodes a doc's rows: each as view (u16), row suffix and the
// row's bytes (what the index's sizes count).
type backRow struct {
	view   int
	suffix []byte
	size   uint64
}

func encodeBack(rows []backRow) []byte {
	var b []byte
	for _, r := range rows {
		b = binary.BigEndian.AppendUint16(b, uint16(r.view))
		b = binary.AppendUvarint(b, uint64(len(r.suffix)))
		b = append(b, r.suffix...)
		b = binary.AppendUvarint(b, r.size)
	}
	return b
}

func decodeBack(b []byte) []backRow {
	var out []backRow
	for len(b) >= 3 {
		v := int(binary.BigEndian.Uint16(b))
		n, w := binary.Uvarint(b[2:])
		if w <= 0 || uint64(len(b)-2-w) < n {
			return out
		}
		s := 2 + w
		r := backRow{view: v, suffix: b[s : s+int(n)]}
		b = b[s+int(n):]
		size, w := binary.Uvarint(b)
		if w <= 0 {
			return out
		}
		r.size = size
		b = b[w:]
		out = append(out, r)
	}
	return out
}
