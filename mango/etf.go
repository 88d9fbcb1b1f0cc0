package mango

import (
	"encoding/json"
	"math/big"

	"github.com/settee/settee/etf"
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

// termToBinary is term_to_binary(T) for the EJSON terms of decoded JSON (Object,
// []any, string, json.Number, bool, nil) plus atom and tuple.
func termToBinary(t any) []byte {
	return appendETF([]byte{etf.Version}, t)
}

func appendETF(b []byte, t any) []byte {
	switch t := t.(type) {
	case nil:
		return etf.AppendAtom(b, "null")
	case bool:
		return etf.AppendBool(b, t)
	case atom:
		return etf.AppendAtom(b, string(t))
	case string:
		return etf.AppendBinaryString(b, t)
	case json.Number:
		if i, ok := isInt(t); ok {
			return etf.AppendBigInt(b, i)
		}
		f, _ := t.Float64()
		return etf.AppendFloat(b, f)
	case tuple:
		b = etf.AppendTuple(b, len(t))
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
		return appendETF(etf.AppendTuple(b, 1), l)
	case []any:
		if len(t) == 0 {
			return etf.AppendNil(b)
		}
		if s, ok := byteList(t); ok {
			return etf.AppendByteList(b, s)
		}
		b = etf.AppendList(b, len(t))
		for _, e := range t {
			b = appendETF(b, e)
		}
		return etf.AppendNil(b)
	}
	return etf.AppendAtom(b, "undefined")
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
