package docjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// mediumDoc builds a document shaped like CouchDB fabric_bench's "medium"
// body (src/fabric/src/fabric_bench.erl) as jiffy encodes it: compact, floats
// written as 1.0, about 14.7 KB.
func mediumDoc(id int) []byte {
	r := rand.New(rand.NewPCG(uint64(id), 7))
	hexbin := func(n int) string {
		const digits = "0123456789ABCDEF"
		b := make([]byte, n)
		for i := range b {
			b[i] = digits[r.IntN(16)]
		}
		return string(b)
	}
	var b bytes.Buffer
	str := func(k, v string) { fmt.Fprintf(&b, `,"%s":"%s"`, k, v) }
	fmt.Fprintf(&b, `{"_id":"%d","random_val":%d,"index":0`, id, r.Uint64N(1<<50))
	str("blob1", hexbin(1024))
	str("guid", "f9b39716-285a-4e9c-8574-790f42b9631e")
	b.WriteString(`,"isActive":true`)
	str("name", "Abc Def Xyz")
	str("company", "FOOCORPINCLLC")
	str("about", `Ad aute anim eiusmod consequat ullamco excepteur cupidatat. Sunt consectetur tempor culpa incididunt voluptate enim dolore ex ullamco occaecat irure consectetur anim. Incididunt sint do non exercitation culpa cupidatat.\r\n`)
	str("extra", `Sit proident labore aliquip do duis irure eu esse quis dolore non qui anim minim. Commodo et pariatur Lorem commodo ea consequat. Excepteur tempor commodo voluptate sunt anim id est occaecat nostrud culpa magna dolor aliqua incididunt. Qui nisi occaecat qui velit minim do occaecat.\r\nExercitation amet ut ut et et elit consequat ex ea eiusmod incididunt. Incididunt laborum magna sit qui ex qui ullamco fugiat reprehenderit qui. Consequat nulla sit duis minim esse velit sint et officia officia. Cillum dolore occaecat tempor dolore reprehenderit id culpa consequat sint. Est quis velit pariatur Lorem Lorem. Eiusmod veniam ex reprehenderit nulla non veniam.\r\n`)
	str("registered", "2016-06-05T12:41:48 +04:00")
	b.WriteString(`,"latitude":16.091562,"longitude":-83.309904,"tags":[`)
	tags := []string{
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
	}
	for i, t := range tags {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s"`, t)
	}
	b.WriteString(`],"array_ints":[`)
	for i := 1; i <= 1000; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
	}
	b.WriteString(`],"array_floats":[`)
	for i := 1; i <= 1000; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i) + ".0")
	}
	b.WriteString(`]`)
	str("blob2", hexbin(1024))
	b.WriteByte('}')
	return b.Bytes()
}

func TestMediumDoc(t *testing.T) {
	doc := mediumDoc(1)
	if !json.Valid(doc) {
		t.Fatal("medium doc is not valid JSON")
	}
	if n := len(doc); n < 14000 || n > 15500 {
		t.Errorf("medium doc is %d bytes, want about 14.7 KB", n)
	}
	d, err := ParseDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "1" || len(d.Body) != len(doc)-len(`"_id":"1",`) {
		t.Errorf("ID %q, body %d bytes", d.ID, len(d.Body))
	}
}

func BenchmarkParseDoc(b *testing.B) {
	doc := mediumDoc(1)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDoc(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseDocIndented is the medium doc pretty-printed, so that Body
// has to be assembled from many pieces.
func BenchmarkParseDocIndented(b *testing.B) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, mediumDoc(1), "", "  "); err != nil {
		b.Fatal(err)
	}
	doc := buf.Bytes()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDoc(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValid(b *testing.B) {
	doc := mediumDoc(1)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkStdValid(b *testing.B) {
	doc := mediumDoc(1)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkStdUnmarshalMap(b *testing.B) {
	doc := mediumDoc(1)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func bulkBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"new_edits":true,"docs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mediumDoc(i))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// BenchmarkBulkDocs is the _bulk_docs write path: split a 1000-doc request,
// then parse every doc.
func BenchmarkBulkDocs(b *testing.B) {
	body := bulkBody(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		bd, err := ParseBulkDocs(body)
		if err != nil {
			b.Fatal(err)
		}
		for _, raw := range bd.Docs {
			if _, err := ParseDoc(raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkParseBulkDocs(b *testing.B) {
	body := bulkBody(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseBulkDocs(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := "Ad aute anim eiusmod consequat ullamco excepteur cupidatat.\r\n \"quoted\" \u00e9t\u00e9"
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

// BenchmarkParseDocRevisions is a replicated write (new_edits=false): the
// medium doc with a _revisions history of 100 ids.
func BenchmarkParseDocRevisions(b *testing.B) {
	var revs bytes.Buffer
	revs.WriteString(`{"_revisions":{"start":100,"ids":[`)
	for i := range 100 {
		if i > 0 {
			revs.WriteByte(',')
		}
		fmt.Fprintf(&revs, `"%032x"`, 1000003*(i+1))
	}
	revs.WriteString(`]},`)
	doc := append(revs.Bytes(), mediumDoc(1)[1:]...)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if d, err := ParseDoc(doc); err != nil || len(d.Revisions.IDs) != 100 {
			b.Fatal(err)
		}
	}
}

// changesRows is the results array of a _changes feed as settee writes it,
// 1000 rows: short strings and few bytes between them.
func changesRows() []byte {
	var b []byte
	b = append(b, '[')
	for i := 1; i <= 1000; i++ {
		if i > 1 {
			b = append(b, ",\n"...)
		}
		b = fmt.Appendf(b, `{"seq":"%d-g1AAAAFbeJzLYWBg4MhgTmHQTs5ILQ","id":"doc%08d","changes":[{"rev":"1-967a00dff5e02add41819138abb3284d"}]}`, i, i)
	}
	return append(b, ']')
}

// BenchmarkSkipValue delimits the medium doc (long runs of numbers) and a
// _changes results array (short strings close together), with SkipValue
// and with its byte-by-byte definition, which is what the 8-byte skip has
// to beat on both.
func BenchmarkSkipValue(b *testing.B) {
	for _, d := range []struct {
		name string
		doc  []byte
	}{{"medium", mediumDoc(1)}, {"changes", changesRows()}} {
		for _, f := range []struct {
			name string
			skip func([]byte, int) int
		}{{"SkipValue", SkipValue}, {"bytewise", skipValueBytewise}} {
			b.Run(d.name+"/"+f.name, func(b *testing.B) {
				b.SetBytes(int64(len(d.doc)))
				for b.Loop() {
					if f.skip(d.doc, 0) != len(d.doc) {
						b.Fatal("end")
					}
				}
			})
		}
	}
}
