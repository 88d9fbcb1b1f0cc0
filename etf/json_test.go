package etf

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAppendJSON checks terms byte for byte against what
// term_to_binary(jiffy:decode(JSON, [dedupe_keys]), [{minor_version, 1}])
// gives on OTP 25 (revtree's tests check the md5s of such terms against
// CouchDB's revisions). The terms were printed by the erts and jiffy of
// the CouchDB 3.5.2 kit (unpacked by ../shared/couchdb/start.sh):
//
//	cd /var/tmp/settee-couchdb-3.5.2/couchdb && E=$(ls -d erts-*) &&
//	ROOTDIR=$PWD BINDIR=$PWD/$E/bin EMU=beam PROGNAME=erl $E/bin/erlexec \
//	  -boot $PWD/releases/start_clean -noshell -pa $PWD/lib/jiffy-*/ebin -eval \
//	  'io:format("~s~n", [binary:encode_hex(term_to_binary(jiffy:decode(<<"{\"a\":1}">>, [dedupe_keys]), [{minor_version,1}]))]), halt().'
func TestAppendJSON(t *testing.T) {
	cases := []struct{ json, term string }{
		{`{}`, "6801 6a"},
		{`{"a":1}`, "6801 6c00000001 6802 6d00000001 61 6101 6a"},
		{`[]`, "6a"},
		{`[1,2,3]`, "6b0003 010203"},
		{`[1,256]`, "6c00000002 6101 6200000100 6a"},
		{`[1,"a"]`, "6c00000002 6101 6d0000000161 6a"},
		{`[[1]]`, "6c00000001 6b000101 6a"},
		{`true`, "64000474727565"},
		{`false`, "640005 66616c7365"},
		{`null`, "640004 6e756c6c"},
		{`-1`, "62ffffffff"},
		{`-0`, "6100"},
		{`2147483648`, "6e0400 00000080"},
		{`-2147483649`, "6e0401 01000080"},
		{`-9223372036854775808`, "6e0801 0000000000000080"},
		{`18446744073709551616`, "6e0900 000000000000000001"},
		{`1.0`, "46 3ff0000000000000"},
		{`-0.0`, "46 8000000000000000"},
		{`1e2`, "46 4059000000000000"},
		{`1E-400`, "46 0000000000000000"},
		{`"\u00e9\ud83d\ude00"`, "6d00000006 c3a9 f09f9880"},
		{`"a\"\\\/\b\f\n\r\t"`, "6d00000009 61225c2f080c0a0d09"},
		{`{"a":1,"a":2}`, "6801 6c00000001 6802 6d0000000161 6102 6a"},
		{`{"a":2,"b":3,"a":1}`, "6801 6c00000002 6802 6d0000000162 6103 6802 6d0000000161 6101 6a"},
		{` { "a" : [ ] } `, "6801 6c00000001 6802 6d0000000161 6a 6a"},
	}
	for _, c := range cases {
		got, err := AppendJSON(nil, []byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		want, _ := hex.DecodeString(strings.ReplaceAll(c.term, " ", ""))
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.json, got, want)
		}
		if ref, err := reference(nil, []byte(c.json)); err != nil || !bytes.Equal(ref, want) {
			t.Errorf("%s: the reference encoder gives %x, %v", c.json, ref, err)
		}
	}
}

func TestAppendJSONErrors(t *testing.T) {
	for _, s := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `"abc`, `"\x"`, `"\u12"`,
		`"\ud800"`, `"\udc00\ud800"`, `"a` + "\n" + `b"`, `01`, `1.`, `.5`, `1e`, `-`, `1e400`, `tru`, `nul`, `{} {}`, `{1:2}`} {
		if out, err := AppendJSON([]byte("keep"), []byte(s)); !errors.Is(err, ErrJSON) || string(out) != "keep" {
			t.Errorf("%q: %q, %v; want ErrJSON and dst as it was", s, out, err)
		}
	}
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if _, err := AppendJSON(nil, []byte(deep)); !errors.Is(err, ErrJSON) {
		t.Errorf("%d levels: %v", maxDepth+1, err)
	}
}

// FuzzAppendJSON checks AppendJSON against reference, a second encoder
// built on encoding/json's tokens, for any JSON they both read as the
// same value; and that it never panics.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2,[3,"x"],{"b":null}]`, `{"a":1,"b":2,"a":3}`, `"\u00e9"`, `-12345678901234567890`,
		`1.5e300`, `{"":{"":[]}}`, `[true,false,null]`, `[255,256,-1,0]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, err := AppendJSON(nil, src)
		if !json.Valid(src) || !utf8.Valid(src) {
			return // encoding/json's view of such input is not CouchDB's
		}
		ref, rerr := reference(nil, src)
		switch {
		case err != nil && rerr == nil:
			if !strings.Contains(err.Error(), "surrogate") && !strings.Contains(err.Error(), "range") && !strings.Contains(err.Error(), "deep") {
				t.Fatalf("%q: %v, the reference encodes it", src, err)
			}
		case err == nil && rerr != nil:
			t.Fatalf("%q: the reference fails (%v)", src, rerr)
		case err == nil && !bytes.Equal(got, ref):
			t.Fatalf("%q:\n got %x\nwant %x", src, got, ref)
		}
	})
}

// reference encodes src through encoding/json's tokens, keeping member
// order and dropping earlier duplicates, and writes terms the way
// mango's etf.go does.
func reference(b []byte, src []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(src))
	d.UseNumber()
	v, err := refValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("more than one value")
	}
	return refTerm(b, v)
}

type refMember struct {
	key string
	val any
}

func refValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			var ms []refMember
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := refValue(d)
				if err != nil {
					return nil, err
				}
				ms = append(ms, refMember{k.(string), v})
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			// the last of each key, where it stands
			var out []refMember
			for i, m := range ms {
				later := false
				for _, n := range ms[i+1:] {
					later = later || n.key == m.key
				}
				if !later {
					out = append(out, m)
				}
			}
			return out, nil
		case '[':
			l := []any{}
			for d.More() {
				v, err := refValue(d)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
	}
	return tok, nil
}

func refTerm(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return AppendAtom(b, "null"), nil
	case bool:
		return AppendBool(b, v), nil
	case string:
		return AppendBinaryString(b, v), nil
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			n, ok := new(big.Int).SetString(s, 10)
			if !ok {
				return nil, errors.New("bad integer")
			}
			return AppendBigInt(b, n), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		return AppendFloat(b, f), nil
	case []refMember:
		b = AppendTuple(b, 1)
		if len(v) == 0 {
			return AppendNil(b), nil
		}
		b = AppendList(b, len(v))
		for _, m := range v {
			b = AppendTuple(b, 2)
			b = AppendBinaryString(b, m.key)
			var err error
			if b, err = refTerm(b, m.val); err != nil {
				return nil, err
			}
		}
		return AppendNil(b), nil
	case []any:
		if len(v) == 0 {
			return AppendNil(b), nil
		}
		bytesOnly := len(v) < 1<<16
		var s []byte
		for _, e := range v {
			n, ok := e.(json.Number)
			i, err := strconv.Atoi(string(n))
			if !ok || err != nil || i < 0 || i > 255 || strings.ContainsAny(string(n), ".eE") {
				bytesOnly = false
				break
			}
			s = append(s, byte(i))
		}
		if bytesOnly {
			b = append(b, tagString, byte(len(s)>>8), byte(len(s)))
			return append(b, s...), nil
		}
		b = AppendList(b, len(v))
		for _, e := range v {
			var err error
			if b, err = refTerm(b, e); err != nil {
				return nil, err
			}
		}
		return AppendNil(b), nil
	}
	return nil, errors.New("unknown token")
}

// TestFloats checks the fast path of number against strconv.
func TestFloats(t *testing.T) {
	for _, s := range []string{"1.0", "-0.0", "0.1", "16.091562", "-83.309904", "1e2", "1E22", "1e23", "2.5e-3", "1e-22", "1e-23",
		"123456789012345.6", "1234567890123456.7", "0.000000000000000000001", "9007199254740993.0", "5e-324", "1.7976931348623157e308",
		"0.30000000000000004", "1e+05", "0e400", "-0e-5", "3.14159265358979", "100000000000000000000000.0", "0.0000000000000000000000000001e28"} {
		want, _ := strconv.ParseFloat(s, 64)
		checkFloat(t, s, want)
	}
}

func checkFloat(t *testing.T, s string, want float64) {
	t.Helper()
	got, err := AppendJSON(nil, []byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if w := AppendFloat(nil, want); !bytes.Equal(got, w) {
		t.Fatalf("%s: %x, strconv %x", s, got, w)
	}
}

func FuzzExactFloat(f *testing.F) {
	f.Add(uint64(16091562), int8(-6), false)
	f.Fuzz(func(t *testing.T, m uint64, e int8, neg bool) {
		s := strconv.FormatUint(m, 10) + ".0e" + strconv.Itoa(int(e))
		if neg {
			s = "-" + s
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return
		}
		checkFloat(t, s, want)
	})
}
