package reduce

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Values are held as the Erlang terms CouchDB's jiffy decodes JSON to,
// because the builtins are defined on those terms (their arithmetic,
// their term order, their error messages print them):
//
//	null, true, false   atom
//	integer             int64, or *big.Int beyond int64 (exact, as Erlang's bignums)
//	other numbers       float64
//	string              binary (the unescaped bytes)
//	array               list ([]any)
//	object              object (members in order)
//	_stats accumulator  stats ({Sum, Count, Min, Max, Sumsqr})
type (
	atom   string
	binary string
	object []prop
	prop   struct {
		k binary
		v any
	}
	stats [5]any
)

var errSyntax = errors.New("invalid JSON")

// parse decodes one JSON text into terms.
func parse(b []byte) (any, error) {
	p := parser{b: b}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, errSyntax
	}
	return v, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > 512 {
		return nil, errSyntax
	}
	p.ws()
	if p.i >= len(p.b) {
		return nil, errSyntax
	}
	switch c := p.b[p.i]; {
	case c == 'n':
		return p.word("null", atom("null"))
	case c == 't':
		return p.word("true", atom("true"))
	case c == 'f':
		return p.word("false", atom("false"))
	case c == '"':
		s, err := p.str()
		return binary(s), err
	case c == '[':
		p.i++
		l := []any{}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return l, nil
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
			p.ws()
			if p.i >= len(p.b) {
				return nil, errSyntax
			}
			p.i++
			switch p.b[p.i-1] {
			case ',':
			case ']':
				return l, nil
			default:
				return nil, errSyntax
			}
		}
	case c == '{':
		p.i++
		o := object{}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return o, nil
		}
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, errSyntax
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, errSyntax
			}
			p.i++
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			o = append(o, prop{binary(k), v})
			p.ws()
			if p.i >= len(p.b) {
				return nil, errSyntax
			}
			p.i++
			switch p.b[p.i-1] {
			case ',':
			case '}':
				return o, nil
			default:
				return nil, errSyntax
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, errSyntax
}

func (p *parser) word(w string, v any) (any, error) {
	if !bytes.HasPrefix(p.b[p.i:], []byte(w)) {
		return nil, errSyntax
	}
	p.i += len(w)
	return v, nil
}

func (p *parser) number() (any, error) {
	start := p.i
	isInt := true
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, errSyntax
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		isInt = false
		if digits() == 0 {
			return nil, errSyntax
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		isInt = false
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, errSyntax
		}
	}
	lit := string(p.b[start:p.i])
	if isInt {
		if v, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return v, nil
		}
		z, _ := new(big.Int).SetString(lit, 10)
		return z, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: %s is out of the double range", errSyntax, lit)
	}
	return f, nil
}

func (p *parser) str() (string, error) {
	p.i++
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != '"' && p.b[p.i] != '\\' && p.b[p.i] >= 0x20 {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '"' {
		p.i++
		return string(p.b[start : p.i-1]), nil
	}
	var sb strings.Builder
	sb.Write(p.b[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '"':
			return sb.String(), nil
		case c < 0x20:
			return "", errSyntax
		case c != '\\':
			sb.WriteByte(c)
			continue
		}
		if p.i >= len(p.b) {
			return "", errSyntax
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", errSyntax
			}
			if utf16.IsSurrogate(r) {
				save := p.i
				r2 := rune(0)
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					p.i += 2
					r2, _ = p.hex4()
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
				} else {
					p.i = save
					r = utf8.RuneError
				}
			}
			sb.WriteRune(r)
		default:
			return "", errSyntax
		}
	}
	return "", errSyntax
}

func (p *parser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}

// encode appends the JSON CouchDB (jiffy) prints for v.
func encode(dst []byte, v any) []byte {
	switch v := v.(type) {
	case atom:
		return append(dst, v...)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case *big.Int:
		return v.Append(dst, 10)
	case float64:
		return appendFloat(dst, v)
	case binary:
		return appendString(dst, string(v))
	case []any:
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = encode(dst, x)
		}
		return append(dst, ']')
	case object:
		dst = append(dst, '{')
		for i, m := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, string(m.k))
			dst = append(dst, ':')
			dst = encode(dst, m.v)
		}
		return append(dst, '}')
	case stats:
		return encode(dst, v.pack())
	}
	panic(fmt.Sprintf("reduce: no JSON for %T", v))
}

// appendFloat prints a double as CouchDB does: the shortest digits that
// read back as the same double, in plain notation with at least one
// decimal ("100.0", "0.0001") unless the scientific one is strictly
// shorter ("1.2e6", "1.0e-5", "1.0e15") or the double is 2^53 or more
// in magnitude (Erlang's float_to_list(F, [short]), as mango.FormatFloat:
// CouchDB 3.5.2's _sum of 0.5 and 9007199254740992 is
// 9.007199254740992e15, not 9007199254740992.0).
func appendFloat(dst []byte, f float64) []byte {
	fixed := strconv.AppendFloat(nil, f, 'f', -1, 64)
	if !bytes.ContainsRune(fixed, '.') {
		fixed = append(fixed, ".0"...)
	}
	e := strconv.AppendFloat(nil, f, 'e', -1, 64) // d[.ddd]e±XX
	i := bytes.IndexByte(e, 'e')
	sci := append([]byte(nil), e[:i]...)
	if !bytes.ContainsRune(sci, '.') {
		sci = append(sci, ".0"...)
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	sci = append(sci, 'e')
	sci = strconv.AppendInt(sci, int64(exp), 10)
	if len(sci) < len(fixed) || math.Abs(f) >= 1<<53 {
		return append(dst, sci...)
	}
	return append(dst, fixed...)
}

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c < 0x20:
			dst = fmt.Appendf(dst, `\u%04x`, c)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, *big.Int, float64:
		return true
	}
	return false
}

// errBadarith is Erlang's badarith: a float sum beyond the double range
// crashes the reduce in CouchDB.
var errBadarith = errors.New("badarith")

func toFloat(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case *big.Int:
		f, _ := new(big.Float).SetInt(v).Float64()
		return f
	}
	return v.(float64)
}

func toBig(v any) *big.Int {
	if i, ok := v.(int64); ok {
		return big.NewInt(i)
	}
	return v.(*big.Int)
}

func norm(z *big.Int) any {
	if z.IsInt64() {
		return z.Int64()
	}
	return z
}

// add is Erlang's + on two numbers.
func add(a, b any) (any, error) {
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			s := x + y
			if (s > x) == (y > 0) {
				return s, nil
			}
			return new(big.Int).Add(big.NewInt(x), big.NewInt(y)), nil
		}
	}
	_, af := a.(float64)
	_, bf := b.(float64)
	if af || bf {
		s := toFloat(a) + toFloat(b)
		if math.IsInf(s, 0) || math.IsNaN(s) {
			return nil, errBadarith
		}
		return s, nil
	}
	return norm(new(big.Int).Add(toBig(a), toBig(b))), nil
}

// mul is Erlang's * on two numbers.
func mul(a, b any) (any, error) {
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			hi, lo := bits.Mul64(uint64(abs(x)), uint64(abs(y)))
			if hi == 0 && lo <= math.MaxInt64 && x != math.MinInt64 && y != math.MinInt64 {
				p := int64(lo)
				if (x < 0) != (y < 0) {
					p = -p
				}
				return p, nil
			}
		}
	}
	_, af := a.(float64)
	_, bf := b.(float64)
	if af || bf {
		p := toFloat(a) * toFloat(b)
		if math.IsInf(p, 0) || math.IsNaN(p) {
			return nil, errBadarith
		}
		return p, nil
	}
	return norm(new(big.Int).Mul(toBig(a), toBig(b))), nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// cmpNum compares two numbers by value, exactly (as Erlang does).
func cmpNum(a, b any) int {
	x, xok := a.(int64)
	y, yok := b.(int64)
	if xok && yok {
		return cmp3(x < y, x > y)
	}
	fa, aIsF := a.(float64)
	fb, bIsF := b.(float64)
	if aIsF && bIsF {
		return cmp3(fa < fb, fa > fb)
	}
	exact := func(v any) *big.Float {
		switch v := v.(type) {
		case float64:
			return new(big.Float).SetFloat64(v)
		default:
			return new(big.Float).SetInt(toBig(v))
		}
	}
	return exact(a).Cmp(exact(b))
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

// termOrder is the class of a term in Erlang's term order: number < atom
// < tuple < list < binary (objects are 1-tuples).
func termOrder(v any) int {
	switch v.(type) {
	case int64, *big.Int, float64:
		return 0
	case atom:
		return 1
	case stats, object:
		return 2
	case []any:
		return 3
	}
	return 4 // binary
}

// cmpTerm is Erlang's term order (for lists:sort of object members).
func cmpTerm(a, b any) int {
	oa, ob := termOrder(a), termOrder(b)
	if oa != ob {
		return cmp3(oa < ob, oa > ob)
	}
	switch a := a.(type) {
	case atom:
		return strings.Compare(string(a), string(b.(atom)))
	case binary:
		return strings.Compare(string(a), string(b.(binary)))
	case []any:
		return cmpList(a, b.([]any))
	case object:
		switch b := b.(type) {
		case object: // {List} vs {List}: the lists of {K, V} pairs
			for i := 0; i < len(a) && i < len(b); i++ {
				if c := strings.Compare(string(a[i].k), string(b[i].k)); c != 0 {
					return c
				}
				if c := cmpTerm(a[i].v, b[i].v); c != 0 {
					return c
				}
			}
			return cmp3(len(a) < len(b), len(a) > len(b))
		case stats:
			return -1 // size 1 < size 5
		}
	case stats:
		switch b := b.(type) {
		case object:
			return 1
		case stats:
			return cmpList(a[:], b[:])
		}
	}
	return cmpNum(a, b)
}

func cmpList(a, b []any) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := cmpTerm(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp3(len(a) < len(b), len(a) > len(b))
}

// sortProps is lists:sort on an object's members: by key, then value.
func sortProps(o object) object {
	s := append(object(nil), o...)
	sort.SliceStable(s, func(i, j int) bool {
		if c := strings.Compare(string(s[i].k), string(s[j].k)); c != 0 {
			return c < 0
		}
		return cmpTerm(s[i].v, s[j].v) < 0
	})
	return s
}
