// Package etf writes Erlang's external term format for the terms CouchDB
// hashes: a revision id is the md5 of term_to_binary of a list holding
// the doc's body as EJSON, so settee needs those bytes to give an edit
// the revision CouchDB gives it.
//
// The encoding is OTP 25's with {minor_version, 1}, the option CouchDB
// passes: latin-1 atoms as ATOM_EXT, floats as NEW_FLOAT_EXT, integers
// as SMALL_INTEGER_EXT, INTEGER_EXT or the big forms, a list of small
// integers (0..255, fewer than 65,536) as STRING_EXT. The EJSON is what
// jiffy decodes JSON to with dedupe_keys (CouchDB's json_decode): an
// object is {[{Key, Value}, ...]} with only the last of duplicate keys,
// at that last key's place; strings are binaries; integers stay
// integers of any size and any number with a fraction or an exponent is
// a double.
package etf

import (
	"encoding/binary"
	"math"
	"math/big"
)

// Tags of the external term format.
const (
	Version       = 131
	tagNewFloat   = 70
	tagSmallInt   = 97
	tagInt        = 98
	tagAtom       = 100
	tagSmallTuple = 104
	tagLargeTuple = 105
	tagNil        = 106
	tagString     = 107
	tagList       = 108
	tagBinary     = 109
	tagSmallBig   = 110
	tagLargeBig   = 111
)

// AppendAtom appends a latin-1 atom (CouchDB's true, false and null).
func AppendAtom(b []byte, a string) []byte {
	b = append(b, tagAtom)
	b = binary.BigEndian.AppendUint16(b, uint16(len(a)))
	return append(b, a...)
}

// AppendBool appends the atom true or false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return AppendAtom(b, "true")
	}
	return AppendAtom(b, "false")
}

// AppendBinary appends an Erlang binary.
func AppendBinary(b []byte, s []byte) []byte {
	b = append(b, tagBinary)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendBinaryString appends an Erlang binary of s's bytes.
func AppendBinaryString(b []byte, s string) []byte {
	b = append(b, tagBinary)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendInt appends an integer.
func AppendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= 255:
		return append(b, tagSmallInt, byte(n))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		b = append(b, tagInt)
		return binary.BigEndian.AppendUint32(b, uint32(int32(n)))
	}
	neg := n < 0
	u := uint64(n)
	if neg {
		u = -u
	}
	var digits [8]byte
	k := 0
	for ; u > 0; u >>= 8 {
		digits[k] = byte(u)
		k++
	}
	return appendBig(b, neg, digits[:k])
}

// AppendBigInt appends an integer of any size.
func AppendBigInt(b []byte, n *big.Int) []byte {
	if n.IsInt64() {
		return AppendInt(b, n.Int64())
	}
	mag := new(big.Int).Abs(n).Bytes() // big-endian
	le := make([]byte, len(mag))
	for i, d := range mag {
		le[len(mag)-1-i] = d
	}
	return appendBig(b, n.Sign() < 0, le)
}

// appendBig appends a big integer from its little-endian magnitude.
func appendBig(b []byte, neg bool, le []byte) []byte {
	sign := byte(0)
	if neg {
		sign = 1
	}
	if len(le) < 256 {
		b = append(b, tagSmallBig, byte(len(le)), sign)
	} else {
		b = append(b, tagLargeBig)
		b = binary.BigEndian.AppendUint32(b, uint32(len(le)))
		b = append(b, sign)
	}
	return append(b, le...)
}

// AppendFloat appends a double (NEW_FLOAT_EXT: -0.0 keeps its sign).
func AppendFloat(b []byte, f float64) []byte {
	b = append(b, tagNewFloat)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(f))
}

// AppendTuple appends the header of a tuple of n elements; the elements
// follow.
func AppendTuple(b []byte, n int) []byte {
	if n < 256 {
		return append(b, tagSmallTuple, byte(n))
	}
	b = append(b, tagLargeTuple)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// AppendList appends the header of a proper list of n > 0 elements; the
// elements follow, then AppendNil. The empty list is AppendNil alone. A
// list of small integers is a string in term_to_binary: AppendList does
// not check for that (AppendJSON does).
func AppendList(b []byte, n int) []byte {
	b = append(b, tagList)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// AppendByteList appends a proper list of integers 0..255, which
// term_to_binary writes as a string (fewer than 65,536 of them, and at
// least one: the empty list is AppendNil).
func AppendByteList(b []byte, s []byte) []byte {
	b = append(b, tagString)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// AppendNil appends the empty list (and a proper list's tail).
func AppendNil(b []byte) []byte { return append(b, tagNil) }
