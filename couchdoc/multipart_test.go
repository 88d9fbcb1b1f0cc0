package couchdoc

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// related assembles a multipart/related body from JSON and parts.
func related(boundary, js string, parts ...string) []byte {
	b := RelatedHead(nil, boundary)
	b = append(b, js...)
	for i, p := range parts {
		b = AttPartHead(b, boundary, "att"+string(rune('a'+i)), "text/plain", "", len(p))
		b = append(b, p...)
	}
	return RelatedTail(b, boundary)
}

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return buf.Bytes()
}

func readAtts(t *testing.T, body []byte, boundary string) ([]byte, [][]byte, error) {
	t.Helper()
	r, err := ReadRelated(bytes.NewReader(body), boundary, 1<<20)
	if err != nil {
		return nil, nil, err
	}
	d, err := docjson.ParseDoc(r.JSON)
	if err != nil {
		t.Fatalf("json part: %v", err)
	}
	return d.Attachments, r.Parts, nil
}

func TestRelatedRoundTrip(t *testing.T) {
	js := `{"_id":"x","_attachments":{"b.txt":{"follows":true,"content_type":"text/plain","length":5},` +
		`"a.bin":{"follows":true,"content_type":"application/octet-stream","length":3,"digest":"` + Digest([]byte("xyz")) + `"},` +
		`"old":{"stub":true,"revpos":1}}}`
	body := related("BOUND", js, "hello", "xyz")
	raw, parts, err := readAtts(t, body, "BOUND")
	if err != nil {
		t.Fatal(err)
	}
	atts, err := ParseAttachmentsFollows(raw, parts)
	if err != nil {
		t.Fatal(err)
	}
	// in the JSON's order: b.txt took the first part, and text is stored gzipped
	if len(atts) != 3 || atts[1].Name != "a.bin" || string(atts[1].Data) != "xyz" || atts[1].Encoding != "" {
		t.Fatalf("atts %v", atts)
	}
	if atts[0].Name != "b.txt" || atts[0].Encoding != "gzip" || atts[0].Length != 5 {
		t.Fatalf("b.txt %v", atts[0])
	}
	if id, err := Identity(&pb.AttMeta{Encoding: atts[0].Encoding}, atts[0].Data); err != nil || string(id) != "hello" {
		t.Fatalf("b.txt data %q %v", id, err)
	}
	if !atts[2].Stub {
		t.Fatalf("stub %v", atts[2])
	}
}

func TestRelatedGzipPart(t *testing.T) {
	z := gz(t, "hello hello hello")
	js := `{"_attachments":{"t.txt":{"follows":true,"content_type":"text/plain","length":17,"encoding":"gzip","encoded_length":` +
		itoa(len(z)) + `,"digest":"` + Digest(z) + `","revpos":3}}}`
	b := RelatedHead(nil, "B")
	b = append(b, js...)
	b = AttPartHead(b, "B", "t.txt", "text/plain", "gzip", len(z))
	b = append(b, z...)
	b = RelatedTail(b, "B")
	raw, parts, err := readAtts(t, b, "B")
	if err != nil {
		t.Fatal(err)
	}
	atts, err := ParseAttachmentsFollows(raw, parts)
	if err != nil {
		t.Fatal(err)
	}
	a := atts[0]
	if !bytes.Equal(a.Data, z) || a.Encoding != "gzip" || a.Length != 17 || a.EncodedLength != uint64(len(z)) || a.Digest != Digest(z) || a.Revpos != 3 {
		t.Fatalf("stored as sent: %+v", a)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRelatedBadInput(t *testing.T) {
	follows := `{"_attachments":{"a":{"follows":true,"length":5}}}`
	cases := []struct {
		name  string
		body  []byte
		wkind error
	}{
		{"truncated", related("B", follows, "hello")[:60], ErrBadMultipart},
		{"no closing delimiter", bytes.TrimSuffix(related("B", follows, "hello"), []byte("--")), ErrBadMultipart},
		{"other boundary", related("C", follows, "hello"), ErrBadMultipart},
		{"empty", nil, ErrBadMultipart},
		{"not json first", append([]byte("--B\r\nContent-Type: text/plain\r\n\r\n{}"), "\r\n--B--"...), ErrNotJSONPart},
		{"json too large", related("B", `{"big":"`+strings.Repeat("x", 2<<20)+`"}`), ErrDocTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadRelated(bytes.NewReader(c.body), "B", 1<<20)
			if !errors.Is(err, c.wkind) {
				t.Fatalf("got %v, want %v", err, c.wkind)
			}
		})
	}
	// the body's own read errors are kept (a size limit is 413, not 400)
	errLimit := errors.New("too large")
	_, err := ReadRelated(io.MultiReader(bytes.NewReader(related("B", follows)[:20]), errReader{errLimit}), "B", 1<<20)
	if !errors.Is(err, errLimit) || errors.Is(err, ErrBadMultipart) {
		t.Fatalf("reader error: %v", err)
	}

	atts := []struct {
		name, js string
		parts    []string
		wcode    string
	}{
		{"missing part", `{"a":{"follows":true,"length":5},"b":{"follows":true}}`, []string{"hello"}, "bad_request"},
		{"extra part", `{"a":{"follows":true,"length":5}}`, []string{"hello", "more"}, "bad_request"},
		{"length mismatch", `{"a":{"follows":true,"length":4}}`, []string{"hello"}, "bad_request"},
		{"encoded length mismatch", `{"a":{"follows":true,"length":5,"encoding":"gzip","encoded_length":3}}`, []string{"hello"}, "bad_request"},
		{"not gzip", `{"a":{"follows":true,"length":5,"encoding":"gzip"}}`, []string{"hello"}, "bad_request"},
		{"unknown encoding", `{"a":{"follows":true,"encoding":"br"}}`, []string{"hello"}, "bad_request"},
		{"digest mismatch", `{"a":{"follows":true,"digest":"md5-AAAAAAAAAAAAAAAAAAAAAA=="}}`, []string{"hello"}, "content_md5_mismatch"},
		{"follows without multipart", `{"a":{"follows":true}}`, nil, "bad_request"},
	}
	for _, c := range atts {
		t.Run(c.name, func(t *testing.T) {
			var parts [][]byte
			for _, p := range c.parts {
				parts = append(parts, []byte(p))
			}
			var err error
			if c.parts == nil {
				_, err = ParseAttachments([]byte(c.js))
			} else {
				_, err = ParseAttachmentsFollows([]byte(c.js), parts)
			}
			if !errors.Is(err, ErrBadAttachment) || AttErrorCode(err) != c.wcode {
				t.Fatalf("got %v (%s), want %s", err, AttErrorCode(err), c.wcode)
			}
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestRelatedBoundary(t *testing.T) {
	for _, c := range []struct {
		ct, wb   string
		wok, err bool
	}{
		{"application/json", "", false, false},
		{`multipart/related; boundary="abc def"`, "abc def", true, false},
		{"multipart/related;boundary=x", "x", true, false},
		// CouchDB reads these as JSON bodies: its test is for the
		// lower-case prefix "multipart/related;"
		{"Multipart/Related;boundary=x", "", false, false},
		{"multipart/related", "", false, false},
		{"multipart/related; charset=utf-8", "", true, true},
		{"multipart/related; boundary=", "", true, true},
		{"multipart/related; boundary=\"unterminated", "", true, true},
	} {
		b, ok, err := RelatedBoundary(c.ct)
		if b != c.wb || ok != c.wok || (err != nil) != c.err {
			t.Errorf("%q: %q %v %v", c.ct, b, ok, err)
		}
	}
}

// TestInlineToFollows converts a fetched doc and checks that the
// multipart body built from it stores the same attachments as the JSON.
func TestInlineToFollows(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	doc := `{"_id":"d\"1","_rev":"2-abc","x":{"_attachments":1},"_attachments":{` +
		`"a.txt":{"content_type":"text/plain","revpos":2,"digest":"md5-gzipped==","data":"` + b64("hello world") + `"},` +
		`"s":{"content_type":"image/png","revpos":1,"digest":"md5-x","length":3,"stub":true},` +
		`"e":{"content_type":"application/octet-stream","revpos":2,"data":""}},"_revisions":{"start":2,"ids":["abc","def"]}}`
	fd, ok := InlineToFollows([]byte(doc))
	if !ok {
		t.Fatal("not converted")
	}
	if fd.ID != `d"1` || len(fd.Atts) != 2 || fd.DataLen != 11 || fd.Atts[0].Name != "a.txt" || fd.Atts[0].ContentType != "text/plain" {
		t.Fatalf("%+v", fd)
	}
	if !json.Valid(fd.JSON) || bytes.Contains(fd.JSON, []byte(`"data"`)) || bytes.Contains(fd.JSON, []byte("md5-gzipped")) {
		t.Fatalf("json %s", fd.JSON)
	}
	body := RelatedHead(nil, "B")
	body = append(body, fd.JSON...)
	for _, a := range fd.Atts {
		data, _ := base64.StdEncoding.DecodeString(string(a.B64))
		body = AttPartHead(body, "B", a.Name, a.ContentType, "", len(data))
		body = append(body, data...)
	}
	body = RelatedTail(body, "B")
	raw, parts, err := readAtts(t, body, "B")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAttachmentsFollows(raw, parts)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := docjson.ParseDoc([]byte(doc))
	want, err := ParseAttachments(d.Attachments)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Name != g.Name || w.Digest != g.Digest || w.Length != g.Length || w.Stub != g.Stub || w.Revpos != g.Revpos || !bytes.Equal(w.Data, g.Data) {
			t.Fatalf("att %d: %+v vs %+v", i, g, w)
		}
	}
	for _, bad := range []string{
		`{"_id":"x","_attachments":{"a":{"data":"aGVsbG8\/"}}}`, // escaped
		`{"_id":"x","_attachments":{"a":{"data":"aGVsbG8"}}}`,   // unpadded
		`{"_id":"x","_attachments":{"a":{"stub":true}}}`,        // nothing inline
		`{"_attachments":{"a":{"data":"aGk="}}}`,                // no id
		`{"_id":"x","_attachments":{"a":{"data":"aGk="}}`,       // cut short
		`[1]`,
	} {
		if _, ok := InlineToFollows([]byte(bad)); ok {
			t.Errorf("converted %s", bad)
		}
	}
}

// TestAttPartHeadNames: any attachment name survives the part headers.
func TestAttPartHeadNames(t *testing.T) {
	for _, name := range []string{"plain.txt", `quote"d`, `back\slash`, "näme ✓.txt", "line\nbreak"} {
		b := RelatedHead(nil, "B")
		b = append(b, "{}"...)
		b = AttPartHead(b, "B", name, "text/plain\r\nX-Injected: 1", "", 2)
		b = append(b, "hi"...)
		b = RelatedTail(b, "B")
		mr := multipart.NewReader(bytes.NewReader(b), "B")
		if _, err := mr.NextPart(); err != nil {
			t.Fatal(err)
		}
		p, err := mr.NextPart()
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if p.Header.Get("X-Injected") != "" {
			t.Fatalf("%q: header injected", name)
		}
		if name != "line\nbreak" && p.FileName() != name {
			t.Errorf("%q came back as %q", name, p.FileName())
		}
	}
}

func TestBase64Reader(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 100, 4097} {
		data := bytes.Repeat([]byte{0xfe, 1, 'x'}, n)[:n]
		enc := []byte(base64.StdEncoding.EncodeToString(data))
		for _, bufSize := range []int{1, 2, 3, 4, 7, 32 << 10} {
			var got []byte
			r := NewBase64Reader(enc)
			buf := make([]byte, bufSize)
			for {
				k, err := r.Read(buf)
				got = append(got, buf[:k]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("n=%d buf=%d: %v", n, bufSize, err)
				}
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("n=%d buf=%d: got %d bytes", n, bufSize, len(got))
			}
		}
	}
}
