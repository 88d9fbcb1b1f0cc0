package revtree

import (
	"regexp"
	"testing"
)

func TestNewRevHash(t *testing.T) {
	type in struct {
		deleted bool
		parent  *Rev
		body    string
		atts    []string
	}
	p1 := &Rev{1, "967a00dff5e02add41819138abb3284d"}
	base := in{parent: p1, body: `{"a":1}`, atts: []string{"md5-abc", "md5-def"}}
	hash := func(x in) string { return NewRevHash(x.deleted, x.parent, []byte(x.body), x.atts) }

	t.Run("golden", func(t *testing.T) {
		// Rev ids must never change across versions or nodes: these are
		// frozen. If this fails, the encoding changed; revert it.
		golden := []struct {
			name string
			in   in
			want string
		}{
			{"new doc", in{body: `{"a":1}`}, "a61176c3380b9463a2687af591cfdada"},
			{"edit with atts", base, "264b7a6428bdead64e15a3ee54a50e8e"},
			{"deletion", in{deleted: true, parent: p1, body: `{}`}, "068499c88dfacdec773b7a7b9a62291f"},
		}
		for _, g := range golden {
			if got := hash(g.in); got != g.want {
				t.Errorf("%s: NewRevHash = %s, want %s", g.name, got, g.want)
			}
		}
	})

	t.Run("format and determinism", func(t *testing.T) {
		h := hash(base)
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(h) {
			t.Fatalf("hash %q is not 32 lowercase hex chars", h)
		}
		p := *p1 // equal value, different pointer
		if h2 := NewRevHash(false, &p, []byte(`{"a":1}`), []string{"md5-abc", "md5-def"}); h2 != h {
			t.Fatalf("same inputs, different hash: %s vs %s", h, h2)
		}
	})

	t.Run("nil and empty are the same", func(t *testing.T) {
		if NewRevHash(false, nil, nil, nil) != NewRevHash(false, nil, []byte{}, []string{}) {
			t.Fatal("nil and empty body/atts hash differently")
		}
	})

	// Each variant changes one input (or moves bytes between inputs); all
	// must hash differently from the base and from each other.
	variants := []struct {
		name string
		in   in
	}{
		{"base", base},
		{"deleted", in{deleted: true, parent: p1, body: base.body, atts: base.atts}},
		{"no parent", in{body: base.body, atts: base.atts}},
		{"parent pos", in{parent: &Rev{2, p1.Hash}, body: base.body, atts: base.atts}},
		{"parent hash", in{parent: &Rev{1, "967a00dff5e02add41819138abb3284e"}, body: base.body, atts: base.atts}},
		{"body", in{parent: p1, body: `{"a":2}`, atts: base.atts}},
		{"body whitespace", in{parent: p1, body: `{"a": 1}`, atts: base.atts}},
		{"no atts", in{parent: p1, body: base.body}},
		{"one att", in{parent: p1, body: base.body, atts: []string{"md5-abc"}}},
		{"att order", in{parent: p1, body: base.body, atts: []string{"md5-def", "md5-abc"}}},
		{"att digest", in{parent: p1, body: base.body, atts: []string{"md5-abc", "md5-deg"}}},
		{"atts joined", in{parent: p1, body: base.body, atts: []string{"md5-abcmd5-def"}}},
		{"att moved into body", in{parent: p1, body: base.body + "md5-def", atts: []string{"md5-abc"}}},
		{"empty att", in{parent: p1, body: base.body, atts: []string{"md5-abc", "md5-def", ""}}},
		{"parent hash moved to body", in{parent: &Rev{1, ""}, body: p1.Hash + base.body, atts: base.atts}},
		{"empty body", in{parent: p1, atts: base.atts}},
		{"pos 1 no parent vs parent 0", in{parent: &Rev{0, ""}, body: base.body, atts: base.atts}},
	}
	seen := map[string]string{}
	for _, v := range variants {
		t.Run("sensitive/"+v.name, func(t *testing.T) {
			h := hash(v.in)
			if other, dup := seen[h]; dup {
				t.Fatalf("%q and %q hash the same: %s", v.name, other, h)
			}
			seen[h] = v.name
		})
	}

	t.Run("allocations", func(t *testing.T) {
		body := []byte(`{"a":1}`)
		if n := testing.AllocsPerRun(100, func() { _ = NewRevHash(false, p1, body, base.atts) }); n > 1 {
			t.Fatalf("NewRevHash allocs = %v, want <= 1", n)
		}
	})
}

func BenchmarkNewRevHash(b *testing.B) {
	body := make([]byte, 14700) // fabric_bench's doc size
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	p := &Rev{3, "967a00dff5e02add41819138abb3284d"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		NewRevHash(false, p, body, nil)
	}
}
