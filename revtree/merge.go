package revtree

import (
	pb "github.com/settee/settee/proto"
)

// validPath reports whether path is newest first, with consecutive
// generations down to a generation >= 1 and no empty hash.
func validPath(path []Rev) bool {
	if len(path) == 0 || path[0].Pos < uint64(len(path)) {
		return false
	}
	for i, r := range path {
		if r.Pos != path[0].Pos-uint64(i) {
			return false
		}
	}
	return true
}

// matchFrom returns the smallest k >= from such that path[k] is in the tree,
// with its node index, or (len(path), -1). One pass over the tree: path
// generations are consecutive, so a node can only be path[top-node.Pos].
func matchFrom(nodes []*pb.RevNode, path []Rev, from int) (int, int) {
	best, bestNode := len(path), -1
	top := path[0].Pos
	lo, hi := path[len(path)-1].Pos, path[from].Pos
	for i, n := range nodes {
		if n.Pos < lo || n.Pos > hi {
			continue
		}
		k := int(top - n.Pos)
		if k < best && n.Hash == path[k].Hash {
			best, bestNode = k, i
			if k == from {
				break
			}
		}
	}
	return best, bestNode
}

// appendChain appends path[lo:hi] (newest first) as a linear chain, oldest
// first, whose oldest node hangs under parent (-1 for a new root). All nodes
// come from one allocation; they have no body. It returns the index of the
// newest new node.
func appendChain(info *pb.FullDocInfo, path []Rev, lo, hi, parent int) int {
	block := make([]pb.RevNode, hi-lo)
	for k := hi - 1; k >= lo; k-- {
		n := &block[hi-1-k]
		n.Pos, n.Hash, n.Parent = path[k].Pos, path[k].Hash, int32(parent)
		parent = len(info.Nodes)
		info.Nodes = append(info.Nodes, n)
	}
	return parent
}

// isAncestorOrSelf reports whether a is b or one of b's ancestors.
func isAncestorOrSelf(nodes []*pb.RevNode, a, b int) bool {
	steps := 0
	for k := b; k >= 0 && steps <= len(nodes); k = parentOf(nodes, k) {
		if k == a {
			return true
		}
		steps++
	}
	return false
}

// AddPath merges path (newest first, consecutive generations, like
// _revisions) ending in a new leaf into the tree, as couch_key_tree:merge
// does for a new_edits=false update:
//
//   - If the leaf rev is already anywhere in the tree, nothing changes and
//     AddPath returns its index and false: CouchDB ignores a known rev.
//   - The newest path rev already in the tree is where the path attaches; the
//     newer revs become a chain below it (a linear extension when that rev
//     was a leaf, a new branch otherwise). No rev in common: a new root.
//   - Older path revs are checked against the tree's ancestry above the
//     attach point; where the tree stops at a root (it was stemmed, or it is
//     a foreign branch merged earlier) and the path goes on, the root is
//     extended backward with the path's older revs, and joined to the tree
//     that already holds one of them, if any. A path that disagrees with the
//     tree's ancestry stops there: the tree wins.
//
// The last point goes beyond couch_key_tree, which merges a path into the
// first tree it overlaps only: a path spanning two roots there leaves a rev
// in both trees (a stale duplicate leaf, later cleaned by stem's
// repair_tree). Here a rev is never duplicated and the roots are joined.
//
// The leaf gets deleted, hasBody and seq; ancestors added here have no body.
// The caller then runs Stem and Refresh. An invalid path (empty, generations
// not consecutive, a generation 0, an empty hash) returns (-1, false).
func AddPath(info *pb.FullDocInfo, path []Rev, deleted, hasBody bool, seq uint64) (idx int, added bool) {
	if info == nil || !validPath(path) {
		return -1, false
	}
	at, atNode := matchFrom(info.Nodes, path, 0)
	if at == 0 {
		return atNode, false
	}
	info.Nodes = growNodes(info.Nodes, at)
	leaf := appendChain(info, path, 0, at, atNode)
	ln := info.Nodes[leaf]
	ln.Deleted, ln.HasBody, ln.Seq = deleted, hasBody, seq

	// Reconcile the path's older revs with the ancestry above the attach
	// point. cur is path[j-1]'s node.
	cur, j := atNode, at+1
	for cur >= 0 && j < len(path) {
		if p := parentOf(info.Nodes, cur); p >= 0 {
			n := info.Nodes[p]
			if n.Pos != path[j].Pos || n.Hash != path[j].Hash {
				break // conflicting ancestry: keep the tree's
			}
			cur, j = p, j+1
			continue
		}
		// cur is a root and the path knows its parent: extend backward.
		k, m := matchFrom(info.Nodes, path, j)
		if m >= 0 && isAncestorOrSelf(info.Nodes, cur, m) {
			break // corrupt generations: never build a cycle
		}
		if k > j {
			newest := appendChain(info, path, j, k, m)
			info.Nodes[cur].Parent = int32(newest)
		} else {
			info.Nodes[cur].Parent = int32(m)
		}
		cur, j = m, k+1
	}
	return leaf, true
}

func growNodes(nodes []*pb.RevNode, n int) []*pb.RevNode {
	if cap(nodes)-len(nodes) >= n {
		return nodes
	}
	out := make([]*pb.RevNode, len(nodes), len(nodes)+n+len(nodes)/4)
	copy(out, nodes)
	return out
}

// Stem applies _revs_limit the way couch_key_tree:stem does: a rev is kept
// when some leaf descending from it is fewer than limit generations below it
// (so every leaf keeps its newest limit revs, and an ancestor shared with a
// shorter branch survives even on a longer one). Leaves are always kept;
// limit < 1 counts as 1. Kept revs whose parent went become roots. The node
// slice is compacted in place (relative order kept, parents re-indexed) and
// the removed revs are returned in their old slice order, nil when nothing
// was removed.
func Stem(info *pb.FullDocInfo, limit int) []Rev {
	nodes := info.GetNodes()
	n := len(nodes)
	if limit < 1 {
		limit = 1
	}
	if n <= limit {
		return nil // no chain can be longer than the tree
	}
	var bbuf [stackNodes]bool
	var ibuf [stackNodes]int32
	var hasChild []bool
	var dist []int32
	if n <= stackNodes {
		hasChild, dist = bbuf[:n], ibuf[:n]
	} else {
		hasChild, dist = make([]bool, n), make([]int32, n)
	}
	markChildren(nodes, hasChild)
	lim := int32(min(limit, n+1))
	for i := range dist {
		dist[i] = lim
	}
	// dist[k] = generations from k down to its nearest leaf, capped at lim.
	for i, c := range hasChild {
		if c {
			continue
		}
		for k, d := i, int32(0); k >= 0 && d < lim && dist[k] > d; k, d = parentOf(nodes, k), d+1 {
			dist[k] = d
		}
	}
	removed := 0
	for _, d := range dist {
		if d >= lim {
			removed++
		}
	}
	if removed == 0 {
		return nil
	}
	// Reuse dist as the old -> new index map (-1 = removed).
	w := int32(0)
	for i, d := range dist {
		if d >= lim {
			dist[i] = -1
		} else {
			dist[i] = w
			w++
		}
	}
	out := make([]Rev, 0, removed)
	w = 0
	for i, nd := range nodes {
		if dist[i] < 0 {
			out = append(out, revOf(nd))
			continue
		}
		if p := parentOf(nodes, i); p >= 0 {
			nd.Parent = dist[p] // -1 when the parent was removed
		} else {
			nd.Parent = -1
		}
		nodes[w] = nd
		w++
	}
	clear(nodes[w:])
	info.Nodes = nodes[:w]
	return out
}
