package mango

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
)

// CouchDB names an index it is not given a name for (and its design doc)
// after the SHA-1 of term_to_binary({Def, lists:usort(Opts)}): the
// request's "index" as jiffy decoded it and its validated options. The
// same name on settee needs the same bytes, so this is Erlang's external
// term format for those terms, as OTP 25 writes it (CouchDB 3.5.2 here
// runs on OTP 25.2.3: atoms as ATOM_EXT; OTP 26 writes them as
// SMALL_ATOM_UTF8_EXT and so derives other names).

// atom is an Erlang atom in a term to encode.
type atom string

// tuple is an Erlang tuple.
type tuple []any

// etf is term_to_binary(T) for the EJSON terms of decoded JSON (Object,
// []any, string, json.Number, bool, nil) plus atom and tuple.
func etf(t any) []byte {
	return appendETF([]byte{131}, t)
}

func appendETF(b []byte, t any) []byte {
	switch t := t.(type) {
	case nil:
		return appendAtom(b, "null")
	case bool:
		return appendAtom(b, strconv.FormatBool(t))
	case atom:
		return appendAtom(b, string(t))
	case string:
		b = append(b, 109) // BINARY_EXT
		b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
		return append(b, t...)
	case json.Number:
		if i, ok := isInt(t); ok {
			return appendInt(b, i)
		}
		f, _ := t.Float64()
		b = append(b, 70) // NEW_FLOAT_EXT
		return binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	case tuple:
		if len(t) < 256 {
			b = append(b, 104, byte(len(t))) // SMALL_TUPLE_EXT
		} else {
			b = append(b, 105) // LARGE_TUPLE_EXT
			b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
		}
		for _, e := range t {
			b = appendETF(b, e)
		}
		return b
	case Object:
		// EJSON {Proplist}: a 1-tuple of a list of {Key, Value}
		l := make([]any, len(t))
		for i, m := range t {
			l[i] = tuple{m.Key, m.Value}
		}
		return appendETF(append(b, 104, 1), l)
	case []any:
		if len(t) == 0 {
			return append(b, 106) // NIL_EXT
		}
		if s, ok := byteList(t); ok {
			b = append(b, 107) // STRING_EXT: a list of small integers
			b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
			return append(b, s...)
		}
		b = append(b, 108) // LIST_EXT
		b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
		for _, e := range t {
			b = appendETF(b, e)
		}
		return append(b, 106)
	}
	return appendAtom(b, "undefined")
}

func appendAtom(b []byte, a string) []byte {
	b = append(b, 100) // ATOM_EXT
	b = binary.BigEndian.AppendUint16(b, uint16(len(a)))
	return append(b, a...)
}

// byteList reports a list all of whose elements are integers 0..255 (and
// fewer than 65536 of them), which term_to_binary writes as a string.
func byteList(l []any) ([]byte, bool) {
	if len(l) >= 1<<16 {
		return nil, false
	}
	s := make([]byte, len(l))
	for i, e := range l {
		n, ok := isInt(e)
		if !ok || n.Sign() < 0 || n.Cmp(big.NewInt(255)) > 0 {
			return nil, false
		}
		s[i] = byte(n.Int64())
	}
	return s, true
}

func appendInt(b []byte, n *big.Int) []byte {
	if n.Sign() >= 0 && n.Cmp(big.NewInt(255)) <= 0 {
		return append(b, 97, byte(n.Int64())) // SMALL_INTEGER_EXT
	}
	if n.IsInt64() && n.Int64() >= math.MinInt32 && n.Int64() <= math.MaxInt32 {
		b = append(b, 98) // INTEGER_EXT
		return binary.BigEndian.AppendUint32(b, uint32(int32(n.Int64())))
	}
	mag := new(big.Int).Abs(n).Bytes() // big-endian
	sign := byte(0)
	if n.Sign() < 0 {
		sign = 1
	}
	if len(mag) < 256 {
		b = append(b, 110, byte(len(mag)), sign) // SMALL_BIG_EXT
	} else {
		b = append(b, 111) // LARGE_BIG_EXT
		b = binary.BigEndian.AppendUint32(b, uint32(len(mag)))
		b = append(b, sign)
	}
	for i := len(mag) - 1; i >= 0; i-- { // little-endian digits
		b = append(b, mag[i])
	}
	return b
}
