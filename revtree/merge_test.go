package revtree

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	pb "github.com/settee/settee/proto"
)

func TestAddPath(t *testing.T) {
	tests := []struct {
		name    string
		info    *pb.FullDocInfo
		path    []Rev
		deleted bool
		added   bool
		invalid bool     // AddPath must refuse the path: idx -1
		want    []string // dump after; nil = tree unchanged
	}{
		{
			name:  "first rev of a new doc",
			info:  &pb.FullDocInfo{},
			path:  revs("1-a"),
			added: true,
			want:  []string{"1-a< body"},
		},
		{
			name:  "new doc replicated with its history",
			info:  &pb.FullDocInfo{},
			path:  revs("3-c 2-b 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a", "3-c<2-b body"},
		},
		{
			name:  "linear extension of the leaf",
			info:  build(t, "1-a"),
			path:  revs("2-b 1-a"),
			added: true,
			want:  []string{"1-a< body", "2-b<1-a body"},
		},
		{
			name:  "linear extension by several revs",
			info:  build(t, "2-b 1-a"),
			path:  revs("5-e 4-d 3-c 2-b 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a body", "3-c<2-b", "4-d<3-c", "5-e<4-d body"},
		},
		{
			name:    "deleting the leaf",
			info:    build(t, "2-b 1-a"),
			path:    revs("3-c 2-b"),
			deleted: true,
			added:   true,
			want:    []string{"1-a<", "2-b<1-a body", "3-c<2-b del body"},
		},
		{
			name:  "extending a deleted leaf (re-creation)",
			info:  build(t, "2-b* 1-a"),
			path:  revs("3-c 2-b"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a del body", "3-c<2-b body"},
		},
		{
			name:  "branch from an interior rev",
			info:  build(t, "3-c 2-b 1-a"),
			path:  revs("3-x 2-b 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a", "3-c<2-b body", "3-x<2-b body"},
		},
		{
			name:  "branch from the root",
			info:  build(t, "2-b 1-a"),
			path:  revs("3-y 2-x 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a body", "2-x<1-a", "3-y<2-x body"},
		},
		{
			name: "known leaf is ignored",
			info: build(t, "2-b 1-a"),
			path: revs("2-b 1-a"),
			// even with other flags: CouchDB keeps what it has
			deleted: true,
		},
		{
			name: "known interior rev is ignored",
			info: build(t, "3-c 2-b 1-a"),
			path: revs("2-b 1-a"),
		},
		{
			name: "known rev without history is ignored",
			info: build(t, "3-c 2-b 1-a"),
			path: revs("3-c"),
		},
		{
			name: "known leaf with a longer history than the stemmed tree is ignored",
			info: raw(node{rev: "3-c"}, node{rev: "4-d", parent: "3-c", body: true}),
			path: revs("4-d 3-c 2-b 1-a"),
		},
		{
			name:  "path shorter than the tree",
			info:  build(t, "3-c 2-b 1-a"),
			path:  revs("4-d 3-c"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a", "3-c<2-b body", "4-d<3-c body"},
		},
		{
			name:  "path overlapping a stemmed tree from inside",
			info:  raw(node{rev: "3-c"}, node{rev: "4-d", parent: "3-c", body: true}),
			path:  revs("5-e 4-d"),
			added: true,
			want:  []string{"3-c<", "4-d<3-c body", "5-e<4-d body"},
		},
		{
			name:  "path reaching below a stemmed root extends it backward",
			info:  raw(node{rev: "3-c"}, node{rev: "4-d", parent: "3-c", body: true}),
			path:  revs("5-e 4-d 3-c 2-b 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a", "3-c<2-b", "4-d<3-c body", "5-e<4-d body"},
		},
		{
			name:  "new branch below a stemmed root",
			info:  raw(node{rev: "3-c"}, node{rev: "4-d", parent: "3-c", body: true}),
			path:  revs("4-x 3-c 2-b"),
			added: true,
			want:  []string{"2-b<", "3-c<2-b", "4-d<3-c body", "4-x<3-c body"},
		},
		{
			name:  "no rev in common: a new root",
			info:  build(t, "2-b 1-a"),
			path:  revs("6-f 5-e"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a body", "5-e<", "6-f<5-e body"},
		},
		{
			name:  "single rev without history: a new root even above a leaf",
			info:  build(t, "3-c 2-b 1-a"),
			path:  revs("4-d"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a", "3-c<2-b body", "4-d< body"},
		},
		{
			name: "path joins a separate root to the main tree",
			info: raw(
				node{rev: "1-a"},
				node{rev: "2-b", parent: "1-a", body: true},
				node{rev: "4-d"},
				node{rev: "5-e", parent: "4-d", body: true},
			),
			path:  revs("6-f 5-e 4-d 3-c 2-b"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a body", "3-c<2-b", "4-d<3-c", "5-e<4-d body", "6-f<5-e body"},
		},
		{
			name: "path joins a root straight onto an existing rev",
			info: raw(
				node{rev: "1-a"},
				node{rev: "2-b", parent: "1-a", body: true},
				node{rev: "3-c"},
				node{rev: "4-d", parent: "3-c", body: true},
			),
			path:  revs("5-e 4-d 3-c 2-b 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a body", "3-c<2-b", "4-d<3-c body", "5-e<4-d body"},
		},
		{
			name: "path links several roots and extends the oldest",
			info: raw(
				node{rev: "2-b", body: true},
				node{rev: "4-d", body: true},
				node{rev: "6-f", body: true},
			),
			path:  revs("7-g 6-f 5-e 4-d 3-c 2-b 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a body", "3-c<2-b", "4-d<3-c body", "5-e<4-d", "6-f<5-e body", "7-g<6-f body"},
		},
		{
			name:  "conflicting ancestry: the tree's wins",
			info:  build(t, "3-c 2-b 1-a"),
			path:  revs("4-d 3-c 2-x 1-a"),
			added: true,
			want:  []string{"1-a<", "2-b<1-a", "3-c<2-b body", "4-d<3-c body"},
		},
		{name: "empty path", invalid: true, info: build(t, "1-a"), path: nil},
		{name: "gap in generations", invalid: true, info: build(t, "1-a"), path: revs("3-c 1-a")},
		{name: "oldest first", invalid: true, info: build(t, "1-a"), path: revs("1-a 2-b")},
		{name: "generation zero", invalid: true, info: build(t, "1-a"), path: []Rev{{1, "b"}, {0, "z"}}},
		// an empty hash is a rev like another (CouchDB stores "2-")
		{name: "empty hash", info: build(t, "1-a"), path: []Rev{{2, ""}, {1, "a"}}, added: true,
			want: []string{"1-a< body", "2-<1-a body"}},
		{name: "empty hash in history", info: build(t, "1-a"), path: []Rev{{3, "c"}, {2, ""}, {1, "a"}}, added: true,
			want: []string{"1-a< body", "2-<1-a", "3-c<2- body"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(tc.info)
			const seq = 42
			idx, added := AddPath(tc.info, tc.path, tc.deleted, true, seq)
			if added != tc.added {
				t.Fatalf("added = %v, want %v", added, tc.added)
			}
			checkInvariants(t, tc.info)
			if !added {
				if got := dump(tc.info); !slices.Equal(got, before) {
					t.Fatalf("tree changed:\n got %v\nwant %v", got, before)
				}
				want := -1
				if !tc.invalid {
					want = Find(tc.info, tc.path[0])
				}
				if idx != want {
					t.Fatalf("idx = %d, want %d", idx, want)
				}
				return
			}
			if got := dump(tc.info); !slices.Equal(got, tc.want) {
				t.Fatalf("tree:\n got %v\nwant %v", got, tc.want)
			}
			n := tc.info.Nodes[idx]
			if revOf(n) != tc.path[0] || n.Deleted != tc.deleted || !n.HasBody || n.Seq != seq {
				t.Fatalf("leaf node %v", n)
			}
			if !IsLeaf(tc.info, idx) {
				t.Fatal("added rev is not a leaf")
			}
		})
	}
	t.Run("nil info", func(t *testing.T) {
		if idx, added := AddPath(nil, revs("1-a"), false, true, 1); idx != -1 || added {
			t.Fatalf("AddPath(nil) = %d, %v", idx, added)
		}
	})
	t.Run("ancestors get no body, seq or deletion", func(t *testing.T) {
		info := &pb.FullDocInfo{}
		idx, _ := AddPath(info, revs("3-c 2-b 1-a"), true, false, 9)
		for i, n := range info.Nodes {
			if i == idx {
				if !n.Deleted || n.HasBody || n.Seq != 9 {
					t.Fatalf("leaf %v", n)
				}
				continue
			}
			if n.Deleted || n.HasBody || n.Seq != 0 {
				t.Fatalf("ancestor %v", n)
			}
		}
	})
}

func TestStem(t *testing.T) {
	tests := []struct {
		name    string
		info    *pb.FullDocInfo
		limit   int
		removed string
		want    []string // dump after; nil = unchanged
	}{
		{
			name:  "limit above the history",
			info:  build(t, "3-c 2-b 1-a"),
			limit: 5,
		},
		{
			name:  "limit equal to the history",
			info:  build(t, "3-c 2-b 1-a", "3-x 2-b 1-a"),
			limit: 3,
		},
		{
			name:    "linear history",
			info:    build(t, "4-d 3-c 2-b 1-a"),
			limit:   2,
			removed: "1-a 2-b",
			want:    []string{"3-c<", "4-d<3-c body"},
		},
		{
			name:    "limit 1 keeps only leaves",
			info:    build(t, "3-c 2-b 1-a", "3-x 2-b 1-a"),
			limit:   1,
			removed: "1-a 2-b",
			want:    []string{"3-c< body", "3-x< body"},
		},
		{
			name:    "limit 0 counts as 1",
			info:    build(t, "2-b 1-a"),
			limit:   0,
			removed: "1-a",
			want:    []string{"2-b< body"},
		},
		{
			name:    "negative limit counts as 1",
			info:    build(t, "2-b 1-a"),
			limit:   -3,
			removed: "1-a",
			want:    []string{"2-b< body"},
		},
		{
			name: "shared ancestor kept for the shorter branch",
			// CouchDB keeps a rev within limit of *some* leaf, so 4-d's
			// path keeps 3 revs here: 2-b stays for 3-x's sake.
			info:    build(t, "4-d 3-c 2-b 1-a", "3-x 2-b 1-a"),
			limit:   2,
			removed: "1-a",
			want:    []string{"2-b<", "3-c<2-b", "3-x<2-b body", "4-d<3-c body"},
		},
		{
			name:    "branch shorter than limit untouched, long one cut, new root",
			info:    build(t, "6-f 5-e 4-d 3-c 2-b 1-a", "2-x 1-a"),
			limit:   3,
			removed: "2-b 3-c",
			want:    []string{"1-a<", "2-x<1-a body", "4-d<", "5-e<4-d", "6-f<5-e body"},
		},
		{
			name:    "every branch cut to its own limit",
			info:    build(t, "5-e 4-d 3-c 2-b 1-a", "5-y 4-y 3-y 2-b 1-a", "4-z 3-z 2-z 1-a"),
			limit:   2,
			removed: "1-a 2-b 3-c 3-y 2-z",
			want:    []string{"3-z<", "4-d<", "4-y<", "4-z<3-z body", "5-e<4-d body", "5-y<4-y body"},
		},
		{
			name: "several roots stemmed independently",
			info: raw(
				node{rev: "3-c"},
				node{rev: "4-d", parent: "3-c"},
				node{rev: "5-e", parent: "4-d", body: true},
				node{rev: "9-i"},
				node{rev: "10-j", parent: "9-i", body: true},
			),
			limit:   2,
			removed: "3-c",
			want:    []string{"10-j<9-i body", "4-d<", "5-e<4-d body", "9-i<"},
		},
		{
			name: "nodes out of order in the slice",
			info: raw(
				node{rev: "4-d", parent: "3-c", body: true},
				node{rev: "3-x", parent: "2-b", body: true, del: true},
				node{rev: "3-c", parent: "2-b"},
				node{rev: "1-a"},
				node{rev: "2-b", parent: "1-a"},
			),
			limit:   2,
			removed: "1-a",
			want:    []string{"2-b<", "3-c<2-b", "3-x<2-b del body", "4-d<3-c body"},
		},
		{
			name:  "empty tree",
			info:  &pb.FullDocInfo{},
			limit: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(tc.info)
			leavesBefore := leafStrings(Leaves(tc.info))
			got := Stem(tc.info, tc.limit)
			checkInvariants(t, tc.info)
			if rs := revStrings(got); !slices.Equal(rs, words(tc.removed)) {
				t.Fatalf("removed = %v, want %v", rs, words(tc.removed))
			}
			want := tc.want
			if want == nil {
				want = before
			}
			if d := dump(tc.info); !slices.Equal(d, want) {
				t.Fatalf("tree:\n got %v\nwant %v", d, want)
			}
			if l := leafStrings(Leaves(tc.info)); !slices.Equal(l, leavesBefore) {
				t.Fatalf("leaves changed: %v -> %v", leavesBefore, l)
			}
			if len(got)+len(tc.info.Nodes) != len(before) {
				t.Fatalf("%d removed + %d kept != %d", len(got), len(tc.info.Nodes), len(before))
			}
		})
	}
	t.Run("no allocation when nothing is removed", func(t *testing.T) {
		info := build(t, "4-d 3-c 2-b 1-a", "3-x 2-b 1-a")
		if n := testing.AllocsPerRun(100, func() { _ = Stem(info, 3) }); n != 0 {
			t.Fatalf("Stem allocs = %v, want 0", n)
		}
	})
}

// TestRandomHistories merges random, randomly truncated paths of one
// consistent history (every rev has one true parent, as with content
// hashes), with random stemming in between, and checks the tree's
// invariants and CouchDB's merge properties after each step.
func TestRandomHistories(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			// universe: a random tree of revs; parent[r] is r's true parent.
			type urev struct {
				rev    Rev
				parent int
			}
			universe := []urev{{Rev{1, "r0"}, -1}}
			for i := 1; i < 40; i++ {
				p := rng.IntN(len(universe))
				universe = append(universe, urev{Rev{universe[p].rev.Pos + 1, fmt.Sprintf("r%d", i)}, p})
			}
			trueParent := map[Rev]Rev{}
			for _, u := range universe {
				if u.parent >= 0 {
					trueParent[u.rev] = universe[u.parent].rev
				}
			}
			info := &pb.FullDocInfo{}
			for step := 0; step < 30; step++ {
				if rng.IntN(5) == 0 {
					limit := 1 + rng.IntN(4)
					leaves := leafStrings(Leaves(info))
					n := len(info.Nodes)
					removed := Stem(info, limit)
					checkInvariants(t, info)
					if l := leafStrings(Leaves(info)); !slices.Equal(l, leaves) {
						t.Fatalf("stem changed leaves %v -> %v", leaves, l)
					}
					if len(removed)+len(info.Nodes) != n {
						t.Fatal("stem lost nodes")
					}
					for _, r := range removed {
						if Find(info, r) >= 0 {
							t.Fatalf("removed %v still in tree", r)
						}
					}
					// every kept rev is within limit of one of its leaves
					for i := range info.Nodes {
						ok := false
						for _, l := range Latest(info, i) {
							if l.Rev.Pos-info.Nodes[i].Pos < uint64(limit) {
								ok = true
							}
						}
						if !ok {
							t.Fatalf("rev %v kept beyond limit %d", revOf(info.Nodes[i]), limit)
						}
					}
					continue
				}
				u := universe[rng.IntN(len(universe))]
				var path []Rev
				for r, ok := u.rev, true; ok && len(path) < 1+rng.IntN(8); r, ok = trueParent[r] {
					path = append(path, r)
				}
				known := Find(info, path[0]) >= 0
				before := dump(info)
				idx, added := AddPath(info, path, rng.IntN(4) == 0, true, uint64(step))
				checkInvariants(t, info)
				if added == known {
					t.Fatalf("added = %v for a rev known = %v", added, known)
				}
				if !added && !slices.Equal(before, dump(info)) {
					t.Fatal("known rev changed the tree")
				}
				if idx < 0 || revOf(info.Nodes[idx]) != path[0] {
					t.Fatalf("idx %d does not hold %v", idx, path[0])
				}
				if added {
					// the whole path is now an ancestry in the tree
					got := Path(info, idx)
					if len(got) < len(path) || !slices.Equal(got[:len(path)], path) {
						t.Fatalf("Path(leaf) = %v, want prefix %v", got, path)
					}
				}
				// every parent link in the tree is a true one
				for _, n := range info.Nodes {
					if n.Parent >= 0 && revOf(info.Nodes[n.Parent]) != trueParent[revOf(n)] {
						t.Fatalf("%v has parent %v, truly %v", revOf(n), revOf(info.Nodes[n.Parent]), trueParent[revOf(n)])
					}
				}
			}
		})
	}
}

func BenchmarkAddPathEdit(b *testing.B) {
	base := build(b, "10-j 9-i 8-h 7-g 6-f 5-e 4-d 3-c 2-b 1-a")
	path := revs("11-k 10-j")
	b.ReportAllocs()
	for b.Loop() {
		info := &pb.FullDocInfo{Nodes: slices.Clip(base.Nodes)}
		AddPath(info, path, false, true, 1)
		Stem(info, 1000)
		Refresh(info)
	}
}

func BenchmarkWinner(b *testing.B) {
	info := build(b, "4-d 3-c 2-b 1-a", "3-x 2-b 1-a", "2-y* 1-a")
	b.ReportAllocs()
	for b.Loop() {
		Winner(info)
	}
}
