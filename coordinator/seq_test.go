package coordinator

import (
	"slices"
	"testing"
)

func TestSeqRoundTrip(t *testing.T) {
	rs := SplitRanges(4)
	ranges := make([]Range, len(rs))
	for i, r := range rs {
		ranges[i] = Range{Begin: r[0], End: r[1]}
	}
	tests := []struct {
		name string
		seqs []Pos
	}{
		{"zero", []Pos{{}, {}, {}, {}}},
		{"mixed", []Pos{{"a@h", 1}, {"b@h", 0}, {"", 300}, {"node3@10.0.0.3", 1 << 40}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := EncodeSeq(ranges, tc.seqs)
			got, err := DecodeSeq(ranges, s)
			if err != nil || !slices.Equal(got, tc.seqs) {
				t.Fatalf("DecodeSeq(%q) = %v, %v; want %v", s, got, err, tc.seqs)
			}
		})
	}
	for _, bad := range []string{"garbage", "1-!!!", "1-", "5-AQ"} {
		if _, err := DecodeSeq(ranges, bad); err == nil {
			t.Errorf("DecodeSeq(%q) accepted", bad)
		}
	}
}

func TestRangeOfMatchesSplit(t *testing.T) {
	rs := SplitRanges(3)
	ranges := make([]Range, len(rs))
	for i, r := range rs {
		ranges[i] = Range{Begin: r[0], End: r[1]}
	}
	if rs[2][1] != 0xffffffff || rs[0][0] != 0 {
		t.Fatalf("ranges do not cover the hash space: %v", rs)
	}
	for _, id := range []string{"", "a", "doc-1", "zzzz", "\x00"} {
		i := RangeOf(ranges, id)
		h := HashID(id)
		if h < ranges[i].Begin || h > ranges[i].End {
			t.Errorf("%q: hash %x not in range %d %+v", id, h, i, ranges[i])
		}
	}
}

func FuzzDecodeSeq(f *testing.F) {
	rs := SplitRanges(2)
	ranges := []Range{{Begin: rs[0][0], End: rs[0][1]}, {Begin: rs[1][0], End: rs[1][1]}}
	f.Add(EncodeSeq(ranges, []Pos{{"n1", 3}, {"n2", 9}}))
	f.Add("0")
	f.Add("now")
	f.Add("12-g1AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeSeq(ranges, s)
		if err != nil {
			return
		}
		if len(got) != len(ranges) {
			t.Fatalf("DecodeSeq(%q) gave %d seqs", s, len(got))
		}
		// a decoded vector re-encodes to one that decodes the same
		again, err := DecodeSeq(ranges, EncodeSeq(ranges, got))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("round trip of %v: %v %v", got, again, err)
		}
	})
}
