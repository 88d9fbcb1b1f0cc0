package collate

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"unsafe"
)

// Number encoding (see the package doc): tagNeg, tagZero or tagPos, then
// for a non-zero value v = ±1.f × 2^E the biased exponent E and the bits
// of f in 7-bit groups, each byte g<<1|more; a negative value's bytes
// after the tag are inverted, so that a larger magnitude sorts first.

const expEscape = 0xFFFF

// appendNumber appends the encoding of the JSON number lit. Integer
// literals are exact (CouchDB's jiffy makes them bignums), the others
// doubles rounded as strtod does; a double literal beyond the float range
// is ±infinity, above every finite value.
func appendNumber(dst, lit []byte, isInt bool) []byte {
	neg := lit[0] == '-'
	if isInt {
		if u, ok := smallInt(lit); ok {
			if u == 0 {
				return append(dst, tagZero)
			}
			var m [8]byte
			binary.BigEndian.PutUint64(m[:], u)
			return appendMag(dst, neg, m[:], 0)
		}
		var z big.Int
		if _, ok := z.SetString(string(lit), 10); ok {
			if z.Sign() == 0 {
				return append(dst, tagZero)
			}
			return appendMag(dst, neg, z.Bytes(), 0)
		}
		// unreachable for a literal the scanner accepted: fall through as a double
	}
	f := parseFloat(lit)
	return appendFloat(dst, f)
}

func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, tagZero) // -0 == 0, as in Erlang
	}
	neg := f < 0
	if math.IsInf(f, 0) {
		tag := tagPos
		if neg {
			tag = tagNeg
		}
		n := len(dst) + 1
		dst = append(dst, tag, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0)
		if neg {
			invert(dst[n:])
		}
		return dst
	}
	b := math.Float64bits(f)
	exp := int(b>>52) & 0x7FF
	mant := b & (1<<52 - 1)
	e2 := -1074
	if exp != 0 {
		mant |= 1 << 52
		e2 = exp - 1075
	}
	var m [8]byte
	binary.BigEndian.PutUint64(m[:], mant)
	return appendMag(dst, neg, m[:], e2)
}

// appendMag appends the encoding of ±mag × 2^e2, mag a non-zero
// big-endian magnitude.
func appendMag(dst []byte, neg bool, mag []byte, e2 int) []byte {
	for mag[0] == 0 {
		mag = mag[1:]
	}
	tag := tagPos
	if neg {
		tag = tagNeg
	}
	dst = append(dst, tag)
	n := len(dst)
	l := 8*len(mag) - bits.LeadingZeros8(mag[0]) // bit length
	tz := 0                                      // trailing zero bits
	for i := len(mag) - 1; mag[i] == 0; i-- {
		tz += 8
	}
	tz += bits.TrailingZeros8(mag[len(mag)-1-tz/8])
	e := l - 1 + e2
	if e < expEscape-0x8000 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(e+0x8000))
	} else {
		dst = binary.BigEndian.AppendUint16(dst, expEscape)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e))
	}
	// The fraction: bits l-2 down to tz, 7 to a byte, the low bit set
	// when another byte follows. Its last group is non-zero, so one value
	// has one encoding; a power of two has the single byte 0.
	if l-2 < tz {
		dst = append(dst, 0)
	} else {
		var g byte
		k := 0
		for i := l - 2; i >= tz; i-- {
			bit := mag[len(mag)-1-i/8] >> (i % 8) & 1
			g = g<<1 | bit
			k++
			if k == 7 {
				more := byte(0)
				if i > tz {
					more = 1
				}
				dst = append(dst, g<<1|more)
				g, k = 0, 0
			}
		}
		if k > 0 {
			dst = append(dst, g<<(8-k))
		}
	}
	if neg {
		invert(dst[n:])
	}
	return dst
}

func invert(b []byte) {
	for i := range b {
		b[i] = ^b[i]
	}
}

// compareNumbers compares two number literals by value; the common cases
// (both small integers, both doubles) avoid the encoding.
func compareNumbers(a []byte, aInt bool, b []byte, bInt bool) int {
	if aInt && bInt {
		x, ok1 := smallInt(a)
		y, ok2 := smallInt(b)
		if ok1 && ok2 {
			return cmpOrdered(signed(a, x), signed(b, y))
		}
	}
	if !aInt && !bInt {
		return cmpOrdered(parseFloat(a), parseFloat(b))
	}
	var ab, bb [32]byte
	return compareBytes(appendNumber(ab[:0], a, aInt), appendNumber(bb[:0], b, bInt))
}

// smallInt returns the magnitude of an integer literal of at most 18
// digits (so that it fits an int64 with its sign).
func smallInt(lit []byte) (uint64, bool) {
	if lit[0] == '-' {
		lit = lit[1:]
	}
	if len(lit) > 18 {
		return 0, false
	}
	var u uint64
	for _, c := range lit {
		u = u*10 + uint64(c-'0')
	}
	return u, true
}

func signed(lit []byte, u uint64) int64 {
	if lit[0] == '-' {
		return -int64(u)
	}
	return int64(u)
}

// parseFloat parses a valid JSON number literal, rounding as strtod does;
// out of range it is ±Inf or ±0, as wanted. The string shares lit's
// memory, which strconv does not keep (its error is dropped): parsing is
// on every comparison of doubles and must not allocate.
func parseFloat(lit []byte) float64 {
	f, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(lit), len(lit)), 64)
	return f
}

func cmpOrdered[T int64 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
