package cdeflate

import (
	"encoding/binary"
	"math/bits"
)

// matchLen is the length of the common prefix of a and b, len(a) at most;
// b is at least as long as a.
func matchLen(a, b []byte) int {
	n := 0
	for len(a)-n >= 8 {
		x := binary.LittleEndian.Uint64(a[n:]) ^ binary.LittleEndian.Uint64(b[n:])
		if x != 0 {
			return n + bits.TrailingZeros64(x)>>3
		}
		n += 8
	}
	for ; n < len(a); n++ {
		if a[n] != b[n] {
			break
		}
	}
	return n
}
