package couchdoc

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// The walkers' benchmarks use the shapes their callers see: a _bulk_get
// answer of 2 KB documents (replicator's splitBulkGet), a _revs_diff answer
// (parseRevsDiff) and a document with inline attachments (InlineToFollows).

func bulkGetAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"results":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"doc%06d","docs":[{"ok":{"_id":"doc%06d","_rev":"1-967a00dff5e02add41819138abb3284d","_revisions":{"start":1,"ids":["967a00dff5e02add41819138abb3284d"]},"n":%d,"tags":["a","b\"c","d\\"],"nested":{"x":[1,2.5,-3e2,true,false,null],"s":"%s"}}}]}`,
			i, i, i, strings.Repeat("lorem ipsum dolor sit amet ", 64))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func revsDiffAnswer(n int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"doc%06d":{"missing":["2-7051cbe5c8faecd085a3fa619e6e6337","3-825cb35de44c433bfb2df415563a19de"],"possible_ancestors":["1-967a00dff5e02add41819138abb3284d"]}`, i)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

func inlineAttDoc() []byte {
	data := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("0123456789abcdef", 4096)))
	return []byte(`{"_id":"x","_rev":"2-7051cbe5c8faecd085a3fa619e6e6337","a":[1,{"b":"c"}],"_attachments":{` +
		`"one.bin":{"content_type":"application/octet-stream","revpos":1,"digest":"md5-x","length":65536,"data":"` + data + `"},` +
		`"two.txt":{"content_type":"text/plain","revpos":2,"digest":"md5-y","length":65536,"data":"` + data + `"}}}`)
}

// BenchmarkObjectAtBulkGet walks a _bulk_get answer as splitBulkGet does.
func BenchmarkObjectAtBulkGet(b *testing.B) {
	doc := bulkGetAnswer(200)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		docs := 0
		end := ObjectAt(doc, 0, func(_ []byte, vs int) int {
			return ArrayAt(doc, vs, func(rs int) int {
				return ObjectAt(doc, rs, func(k []byte, vs int) int {
					if string(k) != `"docs"` {
						return SkipValue(doc, vs)
					}
					return ArrayAt(doc, vs, func(ds int) int {
						return ObjectAt(doc, ds, func(_ []byte, vs int) int {
							docs++
							return SkipValue(doc, vs)
						})
					})
				})
			})
		})
		if end != len(doc) || docs != 200 {
			b.Fatal(end, docs)
		}
	}
}

// BenchmarkWalkObjectRevsDiff walks a _revs_diff answer as parseRevsDiff
// does.
func BenchmarkWalkObjectRevsDiff(b *testing.B) {
	doc := revsDiffAnswer(1000)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		ok := WalkObject(doc, 0, func(_ []byte, vs, _ int) bool {
			return WalkObject(doc, vs, func(_ []byte, vs, _ int) bool {
				return WalkArray(doc, vs, func(_, _ int) bool { n++; return true })
			})
		})
		if !ok || n != 3000 {
			b.Fatal(ok, n)
		}
	}
}

// BenchmarkSkipValue delimits a whole _bulk_get answer.
func BenchmarkSkipValue(b *testing.B) {
	doc := bulkGetAnswer(200)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if SkipValue(doc, 0) != len(doc) {
			b.Fatal("end")
		}
	}
}

func BenchmarkInlineToFollows(b *testing.B) {
	doc := inlineAttDoc()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if fd, ok := InlineToFollows(doc); !ok || len(fd.Atts) != 2 {
			b.Fatal(ok)
		}
	}
}
