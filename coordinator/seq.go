package coordinator

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"
)

// Pos is a position in one range's changes: a sequence of one copy. Copies
// number their changes independently, so a sequence means something only
// with the node whose copy gave it.
type Pos struct {
	Node string
	Seq  uint64
}

const (
	seqV1 = 1 // range, seq (single-node, before clustering)
	seqV2 = 2 // range, node, seq
)

// EncodeSeq packs per-range positions into CouchDB's opaque clustered form,
// "<sum>-<base64url payload>". Clients must treat it as opaque; the sum
// prefix only makes it readable.
func EncodeSeq(ranges []Range, pos []Pos) string {
	var e seqEncoder
	return e.encode(ranges, len(pos), func(i int) (string, uint64) { return pos[i].Node, pos[i].Seq })
}

// seqEncoder encodes clustered sequences into buffers it keeps, one
// string allocated per sequence: a _changes feed encodes one per row.
type seqEncoder struct {
	raw, out []byte
}

func (e *seqEncoder) encode(ranges []Range, n int, at func(int) (string, uint64)) string {
	var sum uint64
	e.raw = append(e.raw[:0], seqV2)
	for i, r := range ranges[:n] {
		node, seq := at(i)
		e.raw = binary.AppendUvarint(e.raw, uint64(r.Begin))
		e.raw = binary.AppendUvarint(e.raw, uint64(len(node)))
		e.raw = append(e.raw, node...)
		e.raw = binary.AppendUvarint(e.raw, seq)
		sum += seq
	}
	e.out = strconv.AppendUint(e.out[:0], sum, 10)
	e.out = append(e.out, '-')
	e.out = base64.RawURLEncoding.AppendEncode(e.out, e.raw)
	return string(e.out)
}

// encodeVec is EncodeSeq of the copies' nodes and seqs, without a []Pos.
func (e *seqEncoder) encodeVec(ranges []Range, nodes []string, seqs []uint64) string {
	return e.encode(ranges, len(seqs), func(i int) (string, uint64) { return nodes[i], seqs[i] })
}

// DecodeSeq unpacks since into per-range positions. "0", "" and plain 0
// mean the beginning; a plain integer is accepted for q=1 databases. A
// position without a node (v1) applies to whichever copy is read.
func DecodeSeq(ranges []Range, since string) ([]Pos, error) {
	out := make([]Pos, len(ranges))
	if since == "" || since == "0" {
		return out, nil
	}
	i := strings.IndexByte(since, '-')
	if i < 0 {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return nil, ErrBadSeq
		}
		if len(ranges) == 1 {
			out[0].Seq = n
		}
		return out, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(since[i+1:])
	if err != nil || len(b) < 2 || (b[0] != seqV1 && b[0] != seqV2) {
		return nil, ErrBadSeq
	}
	v := b[0]
	b = b[1:]
	next := func() (uint64, bool) {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return x, true
	}
	for len(b) > 0 {
		begin, ok := next()
		if !ok {
			return nil, ErrBadSeq
		}
		var node string
		if v == seqV2 {
			l, ok := next()
			if !ok || l > uint64(len(b)) {
				return nil, ErrBadSeq
			}
			node, b = string(b[:l]), b[l:]
		}
		s, ok := next()
		if !ok {
			return nil, ErrBadSeq
		}
		for j, r := range ranges {
			if uint64(r.Begin) == begin {
				out[j] = Pos{Node: node, Seq: s}
			}
		}
	}
	return out, nil
}

// Seqs is a vector of plain sequences, for callers that read one copy per
// range whose nodes they know.
func seqsAt(refs []string, seqs []uint64) []Pos {
	out := make([]Pos, len(seqs))
	for i := range seqs {
		out[i] = Pos{Node: refs[i], Seq: seqs[i]}
	}
	return out
}
