package shard

import (
	"encoding/binary"
	"errors"
	"strconv"

	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
)

// The by-id and by-seq records hold a FullDocInfo in a compact binary form
// rather than as protobuf: a doc edited n times carries n revisions, and
// every edit rewrites its tree, so the tree's size is multiplied by the
// edits in what badger writes, keeps until compaction and then reclaims.
// Protobuf spends about 46 bytes on a revision (the hash as 32 hex
// characters, a 10-byte varint for a root's parent -1, field tags); this
// form spends 21 for a revision of a linear history: a flags byte, the
// parent, the hash as 16 bytes, the seq, and the position only where it
// is not the parent's plus one. Decoding allocates the nodes, their hashes
// and the winner in four allocations instead of two per node.
//
//	record  = 0x01 uvarint(len id) id uvarint(seq) flags uvarint(winner) uvarint(n) node*n
//	flags   = bit 0: deleted; bit 1: the winner is a string (uvarint(len) bytes),
//	          otherwise winner is 1 + the index of the node it names (0: "")
//	node    = nflags uvarint(parent+1) [uvarint(pos)] hash [uvarint(seq)] [uvarint(body_size)]
//	nflags  = bit 0 deleted, 1 has_body, 2 hash is 16 raw bytes (else uvarint(len) bytes),
//	          3 pos present (roots, and any node whose parent is not before it),
//	          4 seq present (non-zero), 5 body_size present (non-zero)
//
// Records written before this form are protobuf; a protobuf FullDocInfo
// never starts with a byte below 8 (field number 0), so the first byte
// tells them apart and both are read.

const infoCodecV1 = 0x01

const (
	infoDeleted      = 1 << 0
	infoWinnerString = 1 << 1

	nodeDeleted  = 1 << 0
	nodeHasBody  = 1 << 1
	nodeHash16   = 1 << 2
	nodePos      = 1 << 3
	nodeSeq      = 1 << 4
	nodeBodySize = 1 << 5
)

var errBadInfo = errors.New("shard: malformed doc info record")

// encodeInfo appends info's record to dst.
func encodeInfo(dst []byte, info *pb.FullDocInfo) []byte {
	nodes := info.Nodes
	dst = append(dst, infoCodecV1)
	dst = binary.AppendUvarint(dst, uint64(len(info.Id)))
	dst = append(dst, info.Id...)
	dst = binary.AppendUvarint(dst, info.Seq)
	winner := winnerIndex(info)
	var flags byte
	if info.Deleted {
		flags |= infoDeleted
	}
	if winner < 0 {
		flags |= infoWinnerString
	}
	dst = append(dst, flags)
	if winner < 0 {
		dst = binary.AppendUvarint(dst, uint64(len(info.Winner)))
		dst = append(dst, info.Winner...)
	} else {
		dst = binary.AppendUvarint(dst, uint64(winner))
	}
	dst = binary.AppendUvarint(dst, uint64(len(nodes)))
	for i, nd := range nodes {
		var nf byte
		if nd.Deleted {
			nf |= nodeDeleted
		}
		if nd.HasBody {
			nf |= nodeHasBody
		}
		if isHex32(nd.Hash) {
			nf |= nodeHash16
		}
		p := int(nd.Parent)
		if p < -1 || p >= len(nodes) {
			p = -1 // a dangling parent reads as a root, as revtree treats it
		}
		if p < 0 || p >= i || nodes[p].Pos+1 != nd.Pos {
			nf |= nodePos
		}
		if nd.Seq != 0 {
			nf |= nodeSeq
		}
		if nd.BodySize != 0 {
			nf |= nodeBodySize
		}
		dst = append(dst, nf)
		dst = binary.AppendUvarint(dst, uint64(p+1))
		if nf&nodePos != 0 {
			dst = binary.AppendUvarint(dst, nd.Pos)
		}
		if nf&nodeHash16 != 0 {
			for j := 0; j < 32; j += 2 {
				dst = append(dst, unhex(nd.Hash[j])<<4|unhex(nd.Hash[j+1]))
			}
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(nd.Hash)))
			dst = append(dst, nd.Hash...)
		}
		if nf&nodeSeq != 0 {
			dst = binary.AppendUvarint(dst, nd.Seq)
		}
		if nf&nodeBodySize != 0 {
			dst = binary.AppendUvarint(dst, uint64(nd.BodySize))
		}
	}
	return dst
}

// winnerIndex is 1 + the index of the node info.Winner names, 0 when it is
// empty, -1 when no node matches it (it is then stored as a string).
func winnerIndex(info *pb.FullDocInfo) int {
	w := info.Winner
	if w == "" {
		return 0
	}
	for i := len(info.Nodes) - 1; i >= 0; i-- {
		nd := info.Nodes[i]
		if len(w) == len(nd.Hash)+1+decLen(nd.Pos) && w[len(w)-len(nd.Hash):] == nd.Hash &&
			w[len(w)-len(nd.Hash)-1] == '-' && w[:len(w)-len(nd.Hash)-1] == strconv.FormatUint(nd.Pos, 10) {
			return i + 1
		}
	}
	return -1
}

func decLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// decodeInfo reads a record written by encodeInfo, or a protobuf
// FullDocInfo, into info.
func decodeInfo(b []byte, info *pb.FullDocInfo) error {
	if len(b) == 0 || b[0] != infoCodecV1 {
		return proto.Unmarshal(b, info)
	}
	d := infoDecoder{b: b[1:]}
	info.Id = string(d.bytes())
	info.Seq = d.uvarint()
	flags := d.byte()
	info.Deleted = flags&infoDeleted != 0
	var winner uint64
	if flags&infoWinnerString != 0 {
		info.Winner = string(d.bytes())
	} else {
		winner = d.uvarint()
	}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)/3) { // a node takes 3 bytes at least
		return errBadInfo
	}
	backing := make([]pb.RevNode, n)
	info.Nodes = make([]*pb.RevNode, n)
	hexes := make([]byte, 0, 32*n)
	type pending struct{ node, off, end int } // raw hashes, sliced below
	var raw []pending
	for i := range backing {
		nd := &backing[i]
		info.Nodes[i] = nd
		nf := d.byte()
		nd.Deleted = nf&nodeDeleted != 0
		nd.HasBody = nf&nodeHasBody != 0
		p := d.uvarint()
		if p > n {
			return errBadInfo
		}
		nd.Parent = int32(p) - 1
		switch {
		case nf&nodePos != 0:
			nd.Pos = d.uvarint()
		case nd.Parent >= 0 && int(nd.Parent) < i:
			nd.Pos = backing[nd.Parent].Pos + 1
		default:
			return errBadInfo
		}
		if nf&nodeHash16 != 0 {
			h := d.take(16)
			if h == nil {
				return errBadInfo
			}
			off := len(hexes)
			hexes = appendHex(hexes, h)
			raw = append(raw, pending{i, off, len(hexes)})
		} else {
			h := d.bytes()
			off := len(hexes)
			hexes = append(hexes, h...)
			raw = append(raw, pending{i, off, len(hexes)})
		}
		if nf&nodeSeq != 0 {
			nd.Seq = d.uvarint()
		}
		if nf&nodeBodySize != 0 {
			bs := d.uvarint()
			if bs > 1<<32-1 {
				return errBadInfo
			}
			nd.BodySize = uint32(bs)
		}
		if d.err != nil {
			return errBadInfo
		}
	}
	if len(d.b) != 0 || winner > n {
		return errBadInfo
	}
	all := string(hexes)
	for _, r := range raw {
		backing[r.node].Hash = all[r.off:r.end]
	}
	if winner > 0 {
		nd := &backing[winner-1]
		info.Winner = strconv.FormatUint(nd.Pos, 10) + "-" + nd.Hash
	}
	return nil
}

type infoDecoder struct {
	b   []byte
	err error
}

func (d *infoDecoder) uvarint() uint64 {
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = errBadInfo
		d.b = nil
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *infoDecoder) byte() byte {
	if len(d.b) == 0 {
		d.err = errBadInfo
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *infoDecoder) take(n int) []byte {
	if len(d.b) < n {
		d.err = errBadInfo
		d.b = nil
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *infoDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errBadInfo
		d.b = nil
		return nil
	}
	return d.take(int(n))
}

func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

const hexDigits = "0123456789abcdef"

func appendHex(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
	}
	return dst
}

// winnerRef is what an _all_docs row without its doc shows of a doc info
// record (id, deleted flag, winning rev), as slices of the record: valid
// while the record is, and read without building anything.
type winnerRef struct {
	id      []byte
	seq     uint64
	deleted bool
	// the winner: str when the record holds it as a string, else
	// pos-hash (hash in hex when hex16); none when the doc has no nodes
	str   []byte
	pos   uint64
	hash  []byte
	hex16 bool
	none  bool
}

// errNotV1 is a record in the older protobuf form, which readWinner does
// not walk (decodeWinner does).
var errNotV1 = errors.New("shard: doc info is not in the v1 form")

// readWinner walks a v1 doc info record for its winner. It walks the
// nodes for their positions but builds none of them (no rev tree, no
// hashes but the winner's): decodeInfo was a fifth of an _all_docs
// stream's CPU.
func readWinner(b []byte, w *winnerRef) error {
	if len(b) == 0 || b[0] != infoCodecV1 {
		return errNotV1
	}
	*w = winnerRef{}
	d := infoDecoder{b: b[1:]}
	w.id = d.bytes()
	w.seq = d.uvarint()
	flags := d.byte()
	w.deleted = flags&infoDeleted != 0
	if flags&infoWinnerString != 0 {
		w.str = d.bytes()
		if w.str == nil {
			w.str = []byte{}
		}
		return d.err
	}
	winner := d.uvarint()
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)/3) || winner > n {
		return errBadInfo
	}
	if winner == 0 {
		w.none = true
		return nil
	}
	var posBuf [32]uint64
	pos := posBuf[:0]
	for i := uint64(0); i < winner; i++ {
		nf := d.byte()
		p := d.uvarint()
		if p > n {
			return errBadInfo
		}
		parent := int(p) - 1
		var np uint64
		switch {
		case nf&nodePos != 0:
			np = d.uvarint()
		case parent >= 0 && parent < len(pos):
			np = pos[parent] + 1
		default:
			return errBadInfo
		}
		pos = append(pos, np)
		var hash []byte
		hex16 := nf&nodeHash16 != 0
		if hex16 {
			hash = d.take(16)
		} else {
			hash = d.bytes()
		}
		if nf&nodeSeq != 0 {
			d.uvarint()
		}
		if nf&nodeBodySize != 0 {
			d.uvarint()
		}
		if d.err != nil || (hex16 && hash == nil) {
			return errBadInfo
		}
		if i == winner-1 {
			w.pos, w.hash, w.hex16 = np, hash, hex16
		}
	}
	return nil
}

// appendRev appends the winning rev ("" when the doc has no nodes).
func (w *winnerRef) appendRev(dst []byte) []byte {
	switch {
	case w.str != nil:
		return append(dst, w.str...)
	case w.none:
		return dst
	}
	dst = strconv.AppendUint(dst, w.pos, 10)
	dst = append(dst, '-')
	if w.hex16 {
		return appendHex(dst, w.hash)
	}
	return append(dst, w.hash...)
}

// decodeWinner reads of a doc info record only what an _all_docs row
// without its doc shows: the id, seq, deleted flag and winning rev.
func decodeWinner(b []byte, info *pb.FullDocInfo) error {
	var w winnerRef
	switch err := readWinner(b, &w); err {
	case nil:
	case errNotV1:
		if err := proto.Unmarshal(b, info); err != nil {
			return err
		}
		info.Nodes = nil
		return nil
	default:
		return err
	}
	info.Id, info.Seq, info.Deleted = string(w.id), w.seq, w.deleted
	if !w.none {
		info.Winner = string(w.appendRev(make([]byte, 0, 24+2*len(w.hash))))
	}
	return nil
}
