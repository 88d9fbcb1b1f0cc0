package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// randomInfo grows a rev tree the way the shard does: edits, replicated
// branches with odd hashes, deletions, stemming.
func randomInfo(r *rand.Rand) *pb.FullDocInfo {
	info := &pb.FullDocInfo{Id: fmt.Sprintf("doc-%d", r.IntN(1000))}
	var seq uint64
	for range r.IntN(60) + 1 {
		seq++
		var path []revtree.Rev
		leaves := revtree.Leaves(info)
		if len(leaves) > 0 && r.IntN(4) > 0 {
			l := leaves[r.IntN(len(leaves))].Rev
			h := revtree.NewRevHash(false, &l, fmt.Appendf(nil, "%d", seq), nil)
			path = []revtree.Rev{{Pos: l.Pos + 1, Hash: h}, l}
		} else {
			pos := uint64(r.IntN(5) + 1)
			for i := range r.IntN(3) + 1 {
				h := fmt.Sprintf("%x", r.Uint64())
				if r.IntN(2) == 0 {
					h = revtree.NewRevHash(false, nil, fmt.Appendf(nil, "%d-%d", seq, i), nil)
				}
				path = append(path, revtree.Rev{Pos: pos + 3 - uint64(i), Hash: h})
			}
		}
		li, _ := revtree.AddPath(info, path, r.IntN(5) == 0, true, seq)
		if li >= 0 {
			info.Nodes[li].BodySize = uint32(r.IntN(20000))
		}
		if r.IntN(10) == 0 {
			revtree.Stem(info, r.IntN(8)+1)
		}
		if r.IntN(8) == 0 && len(info.Nodes) > 0 {
			info.Nodes[r.IntN(len(info.Nodes))].HasBody = false
		}
	}
	revtree.Refresh(info)
	info.Seq = seq
	return info
}

func TestInfoCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var protoBytes, codecBytes int
	for i := range 2000 {
		info := randomInfo(r)
		if i%7 == 0 {
			info.Winner = "not-a-node" // kept as a string
		}
		b := encodeInfo(nil, info)
		got := &pb.FullDocInfo{}
		if err := decodeInfo(b, got); err != nil {
			t.Fatalf("decode %v: %v", info, err)
		}
		if !proto.Equal(got, info) {
			t.Fatalf("round trip:\n got %v\nwant %v", got, info)
		}
		// records written as protobuf read the same
		pbb, _ := proto.Marshal(info)
		old := &pb.FullDocInfo{}
		if err := decodeInfo(pbb, old); err != nil || !proto.Equal(old, info) {
			t.Fatalf("protobuf record: %v %v", old, err)
		}
		protoBytes += len(pbb)
		codecBytes += len(b)
	}
	t.Logf("2000 random trees: protobuf %d bytes, compact form %d", protoBytes, codecBytes)
}

// TestInfoCodecSize pins the size of a linear history: the case that
// dominates a database edited many times.
func TestInfoCodecSize(t *testing.T) {
	info := &pb.FullDocInfo{Id: "doc00000001"}
	var parent *revtree.Rev
	for i := range 101 {
		r := revtree.Rev{Pos: uint64(i + 1), Hash: revtree.NewRevHash(false, parent, fmt.Appendf(nil, "%d", i), nil)}
		path := []revtree.Rev{r}
		if parent != nil {
			path = append(path, *parent)
		}
		li, _ := revtree.AddPath(info, path, false, true, uint64(100000+i*2000))
		info.Nodes[li].BodySize = 320
		parent = &r
	}
	compactInfo(info, DefaultRevsLimit)
	revtree.Refresh(info)
	info.Seq = 300000
	pbb, _ := proto.Marshal(info)
	b := encodeInfo(nil, info)
	t.Logf("101 revisions: protobuf %d bytes, compact form %d (%.1f per revision)", len(pbb), len(b), float64(len(b))/101)
	if len(b) > 101*22+40 {
		t.Errorf("compact form of 101 revisions is %d bytes, want at most %d", len(b), 101*22+40)
	}
}

func TestInfoCodecRejectsTruncation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		b := encodeInfo(nil, randomInfo(r))
		for n := 1; n < len(b); n++ {
			if err := decodeInfo(b[:n], &pb.FullDocInfo{}); err == nil {
				t.Fatalf("%d of %d bytes decoded without error", n, len(b))
			}
		}
	}
}

// FuzzDecodeInfo: any bytes decode without panicking, and what decodes
// encodes back to a record that decodes the same (a protobuf record, which
// may carry unknown fields and out-of-range parents, to one that encodes
// the same).
func FuzzDecodeInfo(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		f.Add(encodeInfo(nil, randomInfo(r)))
	}
	f.Add([]byte{infoCodecV1})
	f.Add([]byte{infoCodecV1, 1, 'a', 1, 0, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		info := &pb.FullDocInfo{}
		light := &pb.FullDocInfo{}
		lerr := decodeWinner(b, light)
		if err := decodeInfo(b, info); err != nil {
			return
		}
		// the light decoder agrees on what it reads of a valid record
		if lerr != nil || light.Id != info.Id || light.Seq != info.Seq || light.Deleted != info.Deleted || light.Winner != info.Winner {
			t.Fatalf("decodeWinner = %v, %v; decodeInfo %v", light, lerr, info)
		}
		enc := encodeInfo(nil, info)
		again := &pb.FullDocInfo{}
		if err := decodeInfo(enc, again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v (%v)", err, info)
		}
		if len(b) == 0 || b[0] != infoCodecV1 {
			if enc2 := encodeInfo(nil, again); string(enc2) != string(enc) {
				t.Fatalf("protobuf record %v encodes unstably", info)
			}
			return
		}
		if !proto.Equal(again, info) {
			t.Fatalf("re-encoded record differs:\n got %v\nwant %v", again, info)
		}
	})
}
