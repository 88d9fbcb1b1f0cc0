package revtree

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	pb "github.com/settee/settee/proto"
)

// rv parses a rev or panics; for test tables.
func rv(s string) Rev {
	r, err := ParseRev(s)
	if err != nil {
		panic(err)
	}
	return r
}

// revs parses "3-c 2-b 1-a".
func revs(s string) []Rev {
	var out []Rev
	for _, f := range strings.Fields(s) {
		out = append(out, rv(f))
	}
	return out
}

// build makes a tree by AddPath from path specs, newest first: "3-c 2-b 1-a".
// A leaf written "3-c*" is deleted. Every leaf gets a body; seq counts up.
func build(t testing.TB, specs ...string) *pb.FullDocInfo {
	t.Helper()
	info := &pb.FullDocInfo{Id: "doc"}
	for i, s := range specs {
		f := strings.Fields(s)
		del := strings.HasSuffix(f[0], "*")
		f[0] = strings.TrimSuffix(f[0], "*")
		if _, added := AddPath(info, revs(strings.Join(f, " ")), del, true, uint64(i+1)); !added {
			t.Fatalf("build: path %q not added", s)
		}
	}
	Refresh(info)
	return info
}

// node is a hand-made node: rev, parent rev ("" = root), flags.
type node struct {
	rev, parent string
	del, body   bool
}

// raw builds the node slice directly, in the given order, without AddPath.
func raw(ns ...node) *pb.FullDocInfo {
	info := &pb.FullDocInfo{Id: "doc"}
	idx := map[string]int{}
	for i, n := range ns {
		idx[n.rev] = i
	}
	for _, n := range ns {
		r := rv(n.rev)
		p := int32(-1)
		if n.parent != "" {
			p = int32(idx[n.parent])
		}
		info.Nodes = append(info.Nodes, &pb.RevNode{Pos: r.Pos, Hash: r.Hash, Parent: p, Deleted: n.del, HasBody: n.body})
	}
	return info
}

// dump renders the tree independently of slice order: one sorted line per
// node, "rev<parent" ("rev<" for a root), plus " del" and " body" flags.
func dump(info *pb.FullDocInfo) []string {
	var out []string
	for _, n := range info.GetNodes() {
		s := fmt.Sprintf("%d-%s<", n.Pos, n.Hash)
		if n.Parent >= 0 {
			p := info.Nodes[n.Parent]
			s += fmt.Sprintf("%d-%s", p.Pos, p.Hash)
		}
		if n.Deleted {
			s += " del"
		}
		if n.HasBody {
			s += " body"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// checkInvariants verifies what every tree must satisfy: revs unique,
// parents in range, child.Pos == parent.Pos+1, no cycles.
func checkInvariants(t testing.TB, info *pb.FullDocInfo) {
	t.Helper()
	seen := map[Rev]bool{}
	nodes := info.GetNodes()
	for i, n := range nodes {
		r := revOf(n)
		if seen[r] {
			t.Fatalf("duplicate rev %v in %v", r, dump(info))
		}
		seen[r] = true
		if n.Parent < -1 || int(n.Parent) >= len(nodes) || int(n.Parent) == i {
			t.Fatalf("node %v: bad parent %d", r, n.Parent)
		}
		if n.Parent >= 0 && nodes[n.Parent].Pos+1 != n.Pos {
			t.Fatalf("node %v: parent %v is not one generation older", r, revOf(nodes[n.Parent]))
		}
		steps := 0
		for k := i; k >= 0; k = int(nodes[k].Parent) {
			if steps++; steps > len(nodes) {
				t.Fatalf("cycle through %v", r)
			}
		}
	}
}

func revStrings(rs []Rev) []string {
	if rs == nil {
		return nil
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

func leafStrings(ls []Leaf) []string {
	if ls == nil {
		return nil
	}
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Rev.String()
		if l.Deleted {
			out[i] += "*"
		}
	}
	return out
}

func words(s string) []string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil
	}
	return f
}
