package bench

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"

	"github.com/settee/settee/docjson"
)

// Document sizes, as fabric_bench names them.
const (
	DocSmall  = "small"
	DocMedium = "medium"
	DocLarge  = "large"
)

// The fields of fabric_bench's docs are built once into a template: literal
// JSON bytes with holes for what differs per doc. Filling a template is a few
// appends, with no reflection and no allocation once dst has grown.
type holeKind uint8

const (
	holeNone    holeKind = iota // lit only
	holeRandVal                 // rand:uniform(1 bsl 50)
	holeHex                     // hexbin(n): n upper-case hex chars of random bytes
)

type part struct {
	lit  []byte
	hole holeKind
	n    int // hex chars for holeHex
}

// docGen builds fabric_bench documents of one size. It is not safe for
// concurrent use (it owns a PRNG).
type docGen struct {
	parts []part
	rng   *rand.Rand
	// bodyLen is the exact length of what appendBody emits.
	bodyLen int
}

// newDocGen returns a generator for docs of the given size. Different seeds
// give different random fields; the shape never changes.
func newDocGen(size string, seed uint64) (*docGen, error) {
	var t tmpl
	switch size {
	case DocSmall:
		smallBody(&t)
	case DocMedium:
		mediumBody(&t)
	case DocLarge:
		// body(medium) ++ [{integer_to_binary(Field), hexbin(4096)} || Field <- lists:seq(1, 32)]
		mediumBody(&t)
		for i := 1; i <= 32; i++ {
			t.key(strconv.Itoa(i))
			t.hex(4096)
		}
	default:
		return nil, fmt.Errorf("%w: %q (want small, medium or large)", ErrDocSize, size)
	}
	t.lit("}")
	g := &docGen{parts: t.done(), rng: newPCG(seed)}
	for _, p := range g.parts {
		g.bodyLen += len(p.lit)
		switch p.hole {
		case holeRandVal:
			g.bodyLen += 16 // at most 2^50 = 1125899906842624
		case holeHex:
			g.bodyLen += p.n
		}
	}
	return g, nil
}

// docLen is an upper bound of appendDoc's output for an id of idLen bytes
// and no rev.
func (g *docGen) docLen(idLen int) int { return len(`{"_id":""`) + idLen + g.bodyLen }

// appendDoc appends one document {"_id":id[,"_rev":rev],<body>} to dst.
func (g *docGen) appendDoc(dst, id []byte, rev string) []byte {
	dst = append(dst, `{"_id":"`...)
	dst = append(dst, id...)
	dst = append(dst, '"')
	if rev != "" {
		dst = append(dst, `,"_rev":"`...)
		dst = append(dst, rev...)
		dst = append(dst, '"')
	}
	return g.appendBody(dst)
}

// appendBody appends the fields after _id (and _rev), starting with a comma
// and ending with the closing brace.
func (g *docGen) appendBody(dst []byte) []byte {
	for i := range g.parts {
		p := &g.parts[i]
		dst = append(dst, p.lit...)
		switch p.hole {
		case holeRandVal:
			dst = strconv.AppendUint(dst, g.rng.Uint64N(1<<50)+1, 10)
		case holeHex:
			dst = g.appendHex(dst, p.n)
		}
	}
	return dst
}

const hexDigits = "0123456789ABCDEF" // binary:encode_hex is upper case

// appendHex appends n hex chars of random bytes (n even), like
// binary:encode_hex(crypto:strong_rand_bytes(n div 2)).
func (g *docGen) appendHex(dst []byte, n int) []byte {
	for n > 0 {
		v := g.rng.Uint64()
		k := min(n, 16)
		for j := 0; j < k; j++ {
			dst = append(dst, hexDigits[v&0xf])
			v >>= 4
		}
		n -= k
	}
	return dst
}

// randomID returns the decimal id of fabric_bench's doc(random, _):
// rand:uniform(1 bsl 128), a number in [1, 2^128].
func (g *docGen) randomID() []byte {
	var x big.Int
	x.SetUint64(g.rng.Uint64())
	x.Lsh(&x, 64)
	x.Or(&x, new(big.Int).SetUint64(g.rng.Uint64()))
	x.Add(&x, big.NewInt(1))
	return x.Append(nil, 10)
}

// tmpl accumulates template parts. key adds `,"name":`: every body field
// follows _id, so each one starts with a comma.
type tmpl struct {
	parts []part
	cur   []byte
}

func (t *tmpl) lit(s string) { t.cur = append(t.cur, s...) }

func (t *tmpl) key(name string) {
	t.cur = append(t.cur, ',')
	t.cur = docjson.AppendString(t.cur, name)
	t.cur = append(t.cur, ':')
}

func (t *tmpl) str(s string) { t.cur = docjson.AppendString(t.cur, s) }

func (t *tmpl) hole(k holeKind, n int) {
	t.parts = append(t.parts, part{lit: t.cur, hole: k, n: n})
	t.cur = nil
}

func (t *tmpl) hex(n int) {
	t.lit(`"`)
	t.hole(holeHex, n)
	t.lit(`"`)
}

func (t *tmpl) done() []part {
	if len(t.cur) > 0 {
		t.parts = append(t.parts, part{lit: t.cur})
		t.cur = nil
	}
	return t.parts
}

// smallBody is fabric_bench's body(small).
func smallBody(t *tmpl) {
	t.key("random_val")
	t.hole(holeRandVal, 0)
	t.key("worker_id")
	t.lit("72")
	for _, kv := range [][2]string{
		{"foo", "1209809812904880912"},
		{"bar", "asdfasdf"},
		{"baz", "eeefffwww"},
		{"blah", "lkqjwelkrjlqwejkrklqwjeklrjkl lkjasdflk jaslkdfj "},
		{"num1", "123555123"},
		{"num2", "90812091289054"},
		{"biz", ",zmxncv lkjaf qwerlkj"},
		{"zab", "zooooooob"},
		{"mtime", "1453234712345"},
		{"ctime", "1453234712345"},
	} {
		t.key(kv[0])
		t.str(kv[1])
	}
	t.key("bool")
	t.lit("false")
}

// mediumBody is fabric_bench's body(medium) ("from a random json generator
// with a few tweaks"). Floats are written as jiffy writes them (1.0, not 1).
func mediumBody(t *tmpl) {
	t.key("random_val")
	t.hole(holeRandVal, 0)
	t.key("index")
	t.lit("0")
	t.key("blob1")
	t.hex(1024)
	t.key("guid")
	t.str("f9b39716-285a-4e9c-8574-790f42b9631e")
	t.key("isActive")
	t.lit("true")
	t.key("name")
	t.str("Abc Def Xyz")
	t.key("company")
	t.str("FOOCORPINCLLC")
	t.key("about")
	t.str("Ad aute anim eiusmod consequat ullamco excepteur cupidatat. Sunt consectetur tempor culpa incididunt voluptate enim dolore ex ullamco occaecat irure consectetur anim. Incididunt sint do non exercitation culpa cupidatat.\r\n")
	t.key("extra")
	t.str("Sit proident labore aliquip do duis irure eu esse quis dolore non qui anim minim. Commodo et pariatur Lorem commodo ea consequat. Excepteur tempor commodo voluptate sunt anim id est occaecat nostrud culpa magna dolor aliqua incididunt. Qui nisi occaecat qui velit minim do occaecat.\r\nExercitation amet ut ut et et elit consequat ex ea eiusmod incididunt. Incididunt laborum magna sit qui ex qui ullamco fugiat reprehenderit qui. Consequat nulla sit duis minim esse velit sint et officia officia. Cillum dolore occaecat tempor dolore reprehenderit id culpa consequat sint. Est quis velit pariatur Lorem Lorem. Eiusmod veniam ex reprehenderit nulla non veniam.\r\n")
	t.key("registered")
	t.str("2016-06-05T12:41:48 +04:00")
	t.key("latitude")
	t.lit("16.091562")
	t.key("longitude")
	t.lit("-83.309904")
	t.key("tags")
	for i, tag := range []string{
		"esse irure eiusmod ad reprehenderit commodo Lorem fugiat nulla esse velit pariatur dolore et exercitation",
		"consequat elit laboris labore laboris Lorem non enim non cillum eiusmod quis nisi culpa proident",
		"esse cillum ex in incididunt adipisicing qui esse eiusmod consectetur tempor labore consequat excepteur incididunt",
		"occaecat occaecat non reprehenderit reprehenderit nulla mollit et minim velit fugiat elit occaecat cillum ad",
		"fugiat aliqua esse non pariatur reprehenderit ea culpa non ex culpa et exercitation commodo aute",
		"elit magna voluptate fugiat voluptate aliquip officia dolore non laboris velit amet excepteur tempor veniam",
		"officia mollit nulla cupidatat occaecat Lorem mollit magna consectetur dolor qui eiusmod commodo eiusmod sit",
		"aliquip magna dolore commodo qui amet ipsum cupidatat cillum eu veniam voluptate ipsum sint reprehenderit",
		"ea elit id labore mollit magna non commodo magna culpa amet id amet duis do",
		"proident deserunt id fugiat sunt ipsum sit aute aute eu ex consectetur proident consequat ea",
		"est do consequat aute reprehenderit ea et do magna adipisicing tempor laboris duis aliquip aute",
		"cupidatat ad occaecat et do Lorem sint duis dolore irure magna quis excepteur ex tempor",
		"et nisi pariatur deserunt quis Lorem laborum dolore magna qui ex quis ea ea anim",
		"do laboris magna aliqua est laborum reprehenderit ut eiusmod do qui irure Lorem dolore dolor",
		"quis in commodo ex pariatur adipisicing eu ad nulla exercitation irure elit nisi excepteur id",
	} {
		if i == 0 {
			t.lit("[")
		} else {
			t.lit(",")
		}
		t.str(tag)
	}
	t.lit("]")
	t.key("array_ints") // [I || I <- lists:seq(1, 1000)]
	for i := 1; i <= 1000; i++ {
		if i == 1 {
			t.lit("[")
		} else {
			t.lit(",")
		}
		t.cur = strconv.AppendInt(t.cur, int64(i), 10)
	}
	t.lit("]")
	t.key("array_floats") // [float(I) || I <- lists:seq(1, 1000)]
	for i := 1; i <= 1000; i++ {
		if i == 1 {
			t.lit("[")
		} else {
			t.lit(",")
		}
		t.cur = strconv.AppendInt(t.cur, int64(i), 10)
		t.lit(".0")
	}
	t.lit("]")
	t.key("blob2")
	t.hex(1024)
}

// newPCG returns a seeded PRNG (fast, not for secrets: the random fields
// only need to be incompressible).
func newPCG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
