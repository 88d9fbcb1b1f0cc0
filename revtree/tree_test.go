package revtree

import (
	"fmt"
	"slices"
	"testing"

	pb "github.com/settee/settee/proto"
)

func TestLeavesWinnerConflicts(t *testing.T) {
	tests := []struct {
		name      string
		info      *pb.FullDocInfo
		leaves    string // expected Leaves order, deleted marked "*"
		conflicts string
		deleted   string // deleted conflicts
	}{
		{
			name: "empty tree",
			info: &pb.FullDocInfo{},
		},
		{
			name:   "single rev",
			info:   build(t, "1-a"),
			leaves: "1-a",
		},
		{
			name:   "linear history",
			info:   build(t, "3-c 2-b 1-a"),
			leaves: "3-c",
		},
		{
			name:      "same generation: higher hash wins",
			info:      build(t, "2-b 1-a", "2-c 1-a", "2-a 1-a"),
			leaves:    "2-c 2-b 2-a",
			conflicts: "2-b 2-a",
		},
		{
			name:      "longer branch beats higher hash",
			info:      build(t, "2-z 1-a", "3-b 2-b 1-a"),
			leaves:    "3-b 2-z",
			conflicts: "2-z",
		},
		{
			name: "hash compares as strings, not numbers",
			// "9" > "10" byte-wise; CouchDB compares binaries the same way.
			info:      build(t, "2-10 1-a", "2-9 1-a"),
			leaves:    "2-9 2-10",
			conflicts: "2-10",
		},
		{
			name:    "deleted longer branch loses to live shorter one",
			info:    build(t, "2-x 1-a", "4-d* 3-c 2-b 1-a"),
			leaves:  "2-x 4-d*",
			deleted: "4-d",
		},
		{
			name:   "all deleted: highest pos wins, no conflicts",
			info:   build(t, "2-x* 1-a", "3-c* 2-b 1-a"),
			leaves: "3-c* 2-x*",
			// the winner is deleted; the other deleted leaf is a deleted conflict
			deleted: "2-x",
		},
		{
			name:      "conflicts order: pos desc then hash desc, deleted apart",
			info:      build(t, "2-m 1-a", "3-a 2-q 1-a", "2-z* 1-a", "2-n 1-a", "3-k* 2-p 1-a", "4-w 3-w 2-w 1-a"),
			leaves:    "4-w 3-a 2-n 2-m 3-k* 2-z*",
			conflicts: "3-a 2-n 2-m",
			deleted:   "3-k 2-z",
		},
		{
			name: "several roots (stemmed, foreign branch)",
			info: raw(
				node{rev: "5-e", body: true},
				node{rev: "3-c"},
				node{rev: "4-d", parent: "3-c", body: true},
			),
			leaves:    "5-e 4-d",
			conflicts: "4-d",
		},
		{
			name: "nodes out of order in the slice",
			info: raw(
				node{rev: "3-c", parent: "2-b", body: true},
				node{rev: "2-z", parent: "1-a", body: true, del: true},
				node{rev: "2-b", parent: "1-a"},
				node{rev: "1-a"},
			),
			leaves: "3-c 2-z*",
			// 2-z is deleted
			deleted: "2-z",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Leaves(tc.info)
			if !slices.Equal(leafStrings(got), words(tc.leaves)) {
				t.Fatalf("Leaves = %v, want %v", leafStrings(got), words(tc.leaves))
			}
			for _, l := range got {
				n := tc.info.Nodes[l.Index]
				if revOf(n) != l.Rev || n.Deleted != l.Deleted || n.HasBody != l.HasBody {
					t.Fatalf("leaf %+v does not match node %d", l, l.Index)
				}
				if !IsLeaf(tc.info, l.Index) {
					t.Fatalf("IsLeaf(%d) = false for leaf %v", l.Index, l.Rev)
				}
			}
			w, ok := Winner(tc.info)
			if ok != (len(got) > 0) {
				t.Fatalf("Winner ok = %v", ok)
			}
			if ok && w != got[0] {
				t.Fatalf("Winner = %+v, Leaves[0] = %+v", w, got[0])
			}
			if c := revStrings(Conflicts(tc.info)); !slices.Equal(c, words(tc.conflicts)) {
				t.Fatalf("Conflicts = %v, want %v", c, words(tc.conflicts))
			}
			if c := revStrings(DeletedConflicts(tc.info)); !slices.Equal(c, words(tc.deleted)) {
				t.Fatalf("DeletedConflicts = %v, want %v", c, words(tc.deleted))
			}
			Refresh(tc.info)
			if ok {
				if tc.info.Winner != w.Rev.String() || tc.info.Deleted != w.Deleted {
					t.Fatalf("Refresh: winner %q deleted %v, want %v", tc.info.Winner, tc.info.Deleted, w)
				}
			} else if tc.info.Winner != "" || tc.info.Deleted {
				t.Fatalf("Refresh on empty tree: %q %v", tc.info.Winner, tc.info.Deleted)
			}
		})
	}
}

func TestCompareLeaves(t *testing.T) {
	l := func(s string, del bool) Leaf { return Leaf{Rev: rv(s), Deleted: del} }
	tests := []struct {
		name string
		a, b Leaf
		want int
	}{
		{"live beats deleted", l("1-a", false), l("9-z", true), -1},
		{"deleted loses", l("9-z", true), l("1-a", false), 1},
		{"higher pos", l("3-a", false), l("2-z", false), -1},
		{"lower pos", l("2-z", true), l("3-a", true), 1},
		{"higher hash", l("2-b", false), l("2-a", false), -1},
		{"lower hash", l("2-a", false), l("2-b", false), 1},
		{"equal", l("2-a", false), l("2-a", false), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompareLeaves(tc.a, tc.b); got != tc.want {
				t.Fatalf("CompareLeaves = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFindPathIsLeaf(t *testing.T) {
	info := build(t, "4-d 3-c 2-b 1-a", "3-x 2-b 1-a")
	tests := []struct {
		name   string
		rev    string
		found  bool
		leaf   bool
		path   string
		latest string
	}{
		{name: "leaf", rev: "4-d", found: true, leaf: true, path: "4-d 3-c 2-b 1-a", latest: "4-d"},
		{name: "other leaf", rev: "3-x", found: true, leaf: true, path: "3-x 2-b 1-a", latest: "3-x"},
		{name: "interior", rev: "3-c", found: true, path: "3-c 2-b 1-a", latest: "4-d"},
		{name: "branch point", rev: "2-b", found: true, path: "2-b 1-a", latest: "4-d 3-x"},
		{name: "root", rev: "1-a", found: true, path: "1-a", latest: "4-d 3-x"},
		{name: "unknown hash", rev: "3-q"},
		{name: "known hash wrong pos", rev: "2-c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := Find(info, rv(tc.rev))
			if (idx >= 0) != tc.found {
				t.Fatalf("Find(%s) = %d", tc.rev, idx)
			}
			if got := IsLeaf(info, idx); got != tc.leaf {
				t.Fatalf("IsLeaf = %v, want %v", got, tc.leaf)
			}
			if got := revStrings(Path(info, idx)); !slices.Equal(got, words(tc.path)) {
				t.Fatalf("Path = %v, want %v", got, words(tc.path))
			}
			if got := leafStrings(Latest(info, idx)); !slices.Equal(got, words(tc.latest)) {
				t.Fatalf("Latest = %v, want %v", got, words(tc.latest))
			}
		})
	}
	t.Run("nil info", func(t *testing.T) {
		if Find(nil, rv("1-a")) != -1 || IsLeaf(nil, 0) || Path(nil, 0) != nil || Latest(nil, 0) != nil || RevsInfo(nil, 0) != nil {
			t.Fatal("nil info must read as an empty tree")
		}
		if _, ok := Winner(nil); ok || Leaves(nil) != nil || Conflicts(nil) != nil {
			t.Fatal("nil info must read as an empty tree")
		}
		Refresh(nil) // no panic
	})
	t.Run("index out of range", func(t *testing.T) {
		for _, i := range []int{-1, len(info.Nodes), 1 << 30} {
			if IsLeaf(info, i) || Path(info, i) != nil || Latest(info, i) != nil || RevsInfo(info, i) != nil {
				t.Fatalf("index %d must give nothing", i)
			}
		}
	})
}

func TestLatest(t *testing.T) {
	tests := []struct {
		name   string
		info   *pb.FullDocInfo
		rev    string
		latest string
	}{
		{
			name:   "leaf is its own latest",
			info:   build(t, "2-b 1-a"),
			rev:    "2-b",
			latest: "2-b",
		},
		{
			name:   "ancestor gives every descendant leaf, winner first",
			info:   build(t, "3-c 2-b 1-a", "2-x* 1-a", "4-z 3-z 2-b 1-a"),
			rev:    "1-a",
			latest: "4-z 3-c 2-x*",
		},
		{
			name:   "sibling branches are not descendants",
			info:   build(t, "3-c 2-b 1-a", "3-y 2-x 1-a"),
			rev:    "2-x",
			latest: "3-y",
		},
		{
			name: "other roots are not descendants",
			info: raw(
				node{rev: "2-b"},
				node{rev: "3-c", parent: "2-b", body: true},
				node{rev: "4-q", body: true},
			),
			rev:    "2-b",
			latest: "3-c",
		},
		{
			name:   "deleted leaf",
			info:   build(t, "3-c* 2-b 1-a"),
			rev:    "2-b",
			latest: "3-c*",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := leafStrings(Latest(tc.info, Find(tc.info, rv(tc.rev))))
			if !slices.Equal(got, words(tc.latest)) {
				t.Fatalf("Latest(%s) = %v, want %v", tc.rev, got, words(tc.latest))
			}
		})
	}
}

func TestRevsInfo(t *testing.T) {
	type ri = []RevInfo
	r := func(s, st string) RevInfo { return RevInfo{Rev: rv(s), Status: st} }
	tests := []struct {
		name string
		info *pb.FullDocInfo
		rev  string
		want ri
	}{
		{
			name: "fresh edits: all bodies available",
			info: raw(
				node{rev: "1-a", body: true},
				node{rev: "2-b", parent: "1-a", body: true},
				node{rev: "3-c", parent: "2-b", body: true},
			),
			rev:  "3-c",
			want: ri{r("3-c", "available"), r("2-b", "available"), r("1-a", "available")},
		},
		{
			name: "replicated ancestors and compacted branches are missing",
			info: build(t, "3-c 2-b 1-a"),
			rev:  "3-c",
			want: ri{r("3-c", "available"), r("2-b", "missing"), r("1-a", "missing")},
		},
		{
			name: "deleted leaf",
			info: build(t, "3-c* 2-b 1-a"),
			rev:  "3-c",
			want: ri{r("3-c", "deleted"), r("2-b", "missing"), r("1-a", "missing")},
		},
		{
			name: "deleted leaf written without a body is still deleted",
			info: raw(
				node{rev: "1-a", body: true},
				node{rev: "2-b", parent: "1-a", del: true},
			),
			rev:  "2-b",
			want: ri{r("2-b", "deleted"), r("1-a", "available")},
		},
		{
			name: "deleted then recreated: the tombstone with a body is deleted",
			info: raw(
				node{rev: "1-a", body: true},
				node{rev: "2-b", parent: "1-a", body: true, del: true},
				node{rev: "3-c", parent: "2-b", body: true},
			),
			rev:  "3-c",
			want: ri{r("3-c", "available"), r("2-b", "deleted"), r("1-a", "available")},
		},
		{
			name: "compacted tombstone on a branch is missing (CouchDB: ?REV_MISSING)",
			info: raw(
				node{rev: "1-a"},
				node{rev: "2-b", parent: "1-a", del: true},
				node{rev: "3-c", parent: "2-b", body: true},
			),
			rev:  "3-c",
			want: ri{r("3-c", "available"), r("2-b", "missing"), r("1-a", "missing")},
		},
		{
			name: "interior rev asks for its own path only",
			info: raw(
				node{rev: "1-a", body: true},
				node{rev: "2-b", parent: "1-a", body: true},
				node{rev: "3-c", parent: "2-b", body: true},
			),
			rev:  "2-b",
			want: ri{r("2-b", "available"), r("1-a", "available")},
		},
		{
			name: "stemmed tree stops at its root",
			info: raw(
				node{rev: "7-g", body: false},
				node{rev: "8-h", parent: "7-g", body: true},
			),
			rev:  "8-h",
			want: ri{r("8-h", "available"), r("7-g", "missing")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RevsInfo(tc.info, Find(tc.info, rv(tc.rev)))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("RevsInfo = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRefresh(t *testing.T) {
	tests := []struct {
		name    string
		info    *pb.FullDocInfo
		winner  string
		deleted bool
	}{
		{name: "empty", info: &pb.FullDocInfo{Winner: "1-a", Deleted: true}},
		{name: "live", info: build(t, "2-b 1-a"), winner: "2-b"},
		{name: "deleted", info: build(t, "2-b* 1-a"), winner: "2-b", deleted: true},
		{name: "live conflict beats deletion", info: build(t, "3-c* 2-b 1-a", "2-x 1-a"), winner: "2-x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.info.Winner, tc.info.Deleted = "stale", !tc.deleted
			Refresh(tc.info)
			if tc.info.Winner != tc.winner || tc.info.Deleted != tc.deleted {
				t.Fatalf("Refresh: %q %v, want %q %v", tc.info.Winner, tc.info.Deleted, tc.winner, tc.deleted)
			}
		})
	}
}

func TestReadAllocs(t *testing.T) {
	info := build(t, "4-d 3-c 2-b 1-a", "3-x 2-b 1-a", "2-y* 1-a")
	if n := testing.AllocsPerRun(100, func() { _, _ = Winner(info) }); n != 0 {
		t.Errorf("Winner allocs = %v, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { Refresh(info) }); n != 0 {
		t.Errorf("Refresh (unchanged winner) allocs = %v, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Find(info, Rev{3, "x"}) }); n != 0 {
		t.Errorf("Find allocs = %v, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Leaves(info) }); n != 1 {
		t.Errorf("Leaves allocs = %v, want 1", n)
	}
}

// A corrupt record (a parent cycle, parents out of range) must not hang or
// crash readers.
func TestCorruptTreeDoesNotHang(t *testing.T) {
	info := &pb.FullDocInfo{Nodes: []*pb.RevNode{
		{Pos: 2, Hash: "a", Parent: 1},
		{Pos: 1, Hash: "b", Parent: 0},
		{Pos: 3, Hash: "c", Parent: 99},
		{Pos: 4, Hash: "d", Parent: 3},
		{Pos: 5, Hash: "e", Parent: -7},
	}}
	_ = Leaves(info)
	_, _ = Winner(info)
	for i := range info.Nodes {
		_ = Path(info, i)
		_ = RevsInfo(info, i)
		_ = Latest(info, i)
	}
	_ = Stem(info, 1)
	_, _ = AddPath(info, revs("3-b 2-a 1-b"), false, true, 1)
}

// Trees beyond the stack scratch buffers take the heap path.
func TestLargeTree(t *testing.T) {
	const n = 300
	long := make([]Rev, n)
	for i := range long {
		long[i] = Rev{uint64(n - i), fmt.Sprintf("h%d", n-i)}
	}
	info := &pb.FullDocInfo{}
	AddPath(info, long, false, true, 1)
	AddPath(info, []Rev{{11, "b11"}, {10, "b10"}, {9, "h9"}}, true, true, 2)
	AddPath(info, []Rev{{6, "c6"}, {5, "h5"}}, false, true, 3)
	checkInvariants(t, info)
	if got := leafStrings(Leaves(info)); !slices.Equal(got, words("300-h300 6-c6 11-b11*")) {
		t.Fatalf("Leaves = %v", got)
	}
	if w, _ := Winner(info); w.Rev != (Rev{300, "h300"}) {
		t.Fatalf("Winner = %v", w)
	}
	if got := leafStrings(Latest(info, Find(info, Rev{5, "h5"}))); !slices.Equal(got, words("300-h300 6-c6 11-b11*")) {
		t.Fatalf("Latest = %v", got)
	}
	if got := len(Path(info, Find(info, Rev{300, "h300"}))); got != n {
		t.Fatalf("len(Path) = %d", got)
	}
	removed := Stem(info, 100)
	checkInvariants(t, info)
	// 300-h300 keeps 201..300; 11-b11 keeps 1..11 with h9 and older; 6-c6 keeps h5..h1.
	if len(removed) != 300-100-9 {
		t.Fatalf("removed %d revs", len(removed))
	}
	if got := revStrings(Path(info, Find(info, Rev{300, "h300"}))); len(got) != 100 || got[99] != "201-h201" {
		t.Fatalf("stemmed path len %d ends %v", len(got), got[len(got)-1])
	}
}

// A tree whose generations are corrupt (a child older than its parent) must
// not make AddPath build a cycle or duplicate a rev.
func TestAddPathCorruptGenerations(t *testing.T) {
	info := &pb.FullDocInfo{Nodes: []*pb.RevNode{
		{Pos: 3, Hash: "c", Parent: -1},
		{Pos: 2, Hash: "b", Parent: 0},
	}}
	if _, added := AddPath(info, revs("4-d 3-c 2-b"), false, true, 1); !added {
		t.Fatal("not added")
	}
	if len(info.Nodes) != 3 || info.Nodes[0].Parent != -1 {
		t.Fatalf("tree %v", dump(info))
	}
}
