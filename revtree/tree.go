package revtree

import (
	"slices"

	pb "github.com/settee/settee/proto"
)

// A tree is info.Nodes: Parent indexes into the same slice, -1 for a root.
// Nodes are not required to be in any order (AddPath appends, Stem keeps
// relative order). Every walk below is bounded by len(nodes) steps and treats
// an out-of-range parent as "no parent", so a corrupt record cannot hang or
// crash a reader.

// stackNodes is how many nodes the per-call scratch buffers cover without a
// heap allocation; most documents have far fewer.
const stackNodes = 128

// Leaf is a leaf of the rev tree (a rev without children).
type Leaf struct {
	Rev     Rev
	Deleted bool
	Index   int // index into info.Nodes
	HasBody bool
}

// RevInfo is one entry of _revs_info.
type RevInfo struct {
	Rev    Rev
	Status string // "available", "deleted" or "missing"
}

// Statuses of RevInfo.
const (
	StatusAvailable = "available"
	StatusDeleted   = "deleted"
	StatusMissing   = "missing"
)

func revOf(n *pb.RevNode) Rev { return Rev{Pos: n.Pos, Hash: n.Hash} }

func leafOf(nodes []*pb.RevNode, i int) Leaf {
	n := nodes[i]
	return Leaf{Rev: revOf(n), Deleted: n.Deleted, Index: i, HasBody: n.HasBody}
}

// parentOf returns the parent index of node i, or -1.
func parentOf(nodes []*pb.RevNode, i int) int {
	p := int(nodes[i].Parent)
	if p < 0 || p >= len(nodes) || p == i {
		return -1
	}
	return p
}

// markChildren sets hasChild[i] for every node that is some node's parent.
func markChildren(nodes []*pb.RevNode, hasChild []bool) {
	for i := range nodes {
		if p := parentOf(nodes, i); p >= 0 {
			hasChild[p] = true
		}
	}
}

// CompareLeaves orders leaves the way couch_doc:to_doc_info_path does,
// winner first: not deleted before deleted, then higher pos, then higher hash
// (byte-wise string compare). It returns <0 when a sorts before b.
func CompareLeaves(a, b Leaf) int {
	if a.Deleted != b.Deleted {
		if !a.Deleted {
			return -1
		}
		return 1
	}
	if a.Rev.Pos != b.Rev.Pos {
		if a.Rev.Pos > b.Rev.Pos {
			return -1
		}
		return 1
	}
	switch {
	case a.Rev.Hash > b.Rev.Hash:
		return -1
	case a.Rev.Hash < b.Rev.Hash:
		return 1
	}
	return 0
}

// Leaves returns every leaf, winner first (see CompareLeaves).
func Leaves(info *pb.FullDocInfo) []Leaf {
	nodes := info.GetNodes()
	n := len(nodes)
	if n == 0 {
		return nil
	}
	var buf [stackNodes]bool
	var hasChild []bool
	if n <= len(buf) {
		hasChild = buf[:n]
	} else {
		hasChild = make([]bool, n)
	}
	markChildren(nodes, hasChild)
	count := 0
	for _, c := range hasChild {
		if !c {
			count++
		}
	}
	out := make([]Leaf, 0, count)
	for i, c := range hasChild {
		if !c {
			out = append(out, leafOf(nodes, i))
		}
	}
	if len(out) > 1 {
		slices.SortFunc(out, CompareLeaves)
	}
	return out
}

// Winner returns the winning leaf (CouchDB's deterministic choice), false
// for an empty tree. It does not allocate for trees up to 128 nodes.
func Winner(info *pb.FullDocInfo) (Leaf, bool) {
	nodes := info.GetNodes()
	n := len(nodes)
	if n == 0 {
		return Leaf{}, false
	}
	var buf [stackNodes]bool
	var hasChild []bool
	if n <= len(buf) {
		hasChild = buf[:n]
	} else {
		hasChild = make([]bool, n)
	}
	markChildren(nodes, hasChild)
	var best Leaf
	found := false
	for i, c := range hasChild {
		if c {
			continue
		}
		l := leafOf(nodes, i)
		if !found || CompareLeaves(l, best) < 0 {
			best, found = l, true
		}
	}
	return best, found
}

// Conflicts returns the non-deleted leaves other than the winner, in
// CouchDB's _conflicts order (higher pos first, then higher hash). It is
// empty when the winner is deleted, since then every leaf is deleted.
func Conflicts(info *pb.FullDocInfo) []Rev {
	return otherLeaves(info, false)
}

// DeletedConflicts returns the deleted leaves other than the winner, in
// CouchDB's _deleted_conflicts order.
func DeletedConflicts(info *pb.FullDocInfo) []Rev {
	return otherLeaves(info, true)
}

func otherLeaves(info *pb.FullDocInfo, deleted bool) []Rev {
	leaves := Leaves(info)
	if len(leaves) < 2 {
		return nil
	}
	count := 0
	for _, l := range leaves[1:] {
		if l.Deleted == deleted {
			count++
		}
	}
	if count == 0 {
		return nil
	}
	out := make([]Rev, 0, count)
	for _, l := range leaves[1:] {
		if l.Deleted == deleted {
			out = append(out, l.Rev)
		}
	}
	return out
}

// Find returns the index of rev r in the tree, or -1.
func Find(info *pb.FullDocInfo, r Rev) int {
	for i, n := range info.GetNodes() {
		if n.Pos == r.Pos && n.Hash == r.Hash {
			return i
		}
	}
	return -1
}

// IsLeaf reports whether node idx exists and has no children.
func IsLeaf(info *pb.FullDocInfo, idx int) bool {
	nodes := info.GetNodes()
	if idx < 0 || idx >= len(nodes) {
		return false
	}
	for i := range nodes {
		if parentOf(nodes, i) == idx {
			return false
		}
	}
	return true
}

// pathLen counts the nodes from idx up to its root.
func pathLen(nodes []*pb.RevNode, idx int) int {
	n := 0
	for k := idx; k >= 0 && n < len(nodes); k = parentOf(nodes, k) {
		n++
	}
	return n
}

// Path returns the revs from node idx up to its root, newest first (the
// order of _revisions.ids). It returns nil for an index out of range.
func Path(info *pb.FullDocInfo, idx int) []Rev {
	nodes := info.GetNodes()
	if idx < 0 || idx >= len(nodes) {
		return nil
	}
	out := make([]Rev, 0, pathLen(nodes, idx))
	for k := idx; k >= 0 && len(out) < cap(out); k = parentOf(nodes, k) {
		out = append(out, revOf(nodes[k]))
	}
	return out
}

// RevsInfo returns _revs_info for node idx: every rev from idx up to its root
// with its status. As in couch_db, a rev known only by id (no body: added
// from _revisions, or a branch whose body compaction dropped) is "missing"
// even if it was a deletion; a deleted leaf is always "deleted"; the rest are
// "deleted" or "available" by their deleted flag.
func RevsInfo(info *pb.FullDocInfo, idx int) []RevInfo {
	nodes := info.GetNodes()
	if idx < 0 || idx >= len(nodes) {
		return nil
	}
	leaf := IsLeaf(info, idx)
	out := make([]RevInfo, 0, pathLen(nodes, idx))
	for k := idx; k >= 0 && len(out) < cap(out); k = parentOf(nodes, k) {
		n := nodes[k]
		st := StatusAvailable
		switch {
		case n.Deleted && (n.HasBody || (k == idx && leaf)):
			st = StatusDeleted
		case !n.HasBody:
			st = StatusMissing
		}
		out = append(out, RevInfo{Rev: revOf(n), Status: st})
	}
	return out
}

// Latest returns the leaves that descend from node idx (idx itself when it
// is a leaf), winner first: what ?latest=true answers for a rev. It returns
// nil for an index out of range.
func Latest(info *pb.FullDocInfo, idx int) []Leaf {
	nodes := info.GetNodes()
	n := len(nodes)
	if idx < 0 || idx >= n {
		return nil
	}
	var buf [stackNodes]bool
	var hasChild []bool
	if n <= len(buf) {
		hasChild = buf[:n]
	} else {
		hasChild = make([]bool, n)
	}
	markChildren(nodes, hasChild)
	var out []Leaf
	for i, c := range hasChild {
		if c {
			continue
		}
		steps := 0
		for k := i; k >= 0 && steps < n; k = parentOf(nodes, k) {
			if k == idx {
				out = append(out, leafOf(nodes, i))
				break
			}
			if nodes[k].Pos < nodes[idx].Pos {
				break // climbed past idx's generation
			}
			steps++
		}
	}
	if len(out) > 1 {
		slices.SortFunc(out, CompareLeaves)
	}
	return out
}

// Refresh recomputes info.Winner ("N-hash") and info.Deleted from the
// leaves; an empty tree gives "" and false. It allocates only when the
// winner changed.
func Refresh(info *pb.FullDocInfo) {
	if info == nil {
		return
	}
	w, ok := Winner(info)
	if !ok {
		info.Winner, info.Deleted = "", false
		return
	}
	info.Deleted = w.Deleted
	if !w.Rev.equalsString(info.Winner) {
		info.Winner = w.Rev.String()
	}
}
