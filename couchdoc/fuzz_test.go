package couchdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/settee/settee/docjson"
)

// FuzzReadRelated feeds arbitrary bodies and boundaries to the multipart
// reader and the follows matcher, as PUT /db/doc does: never a panic, and
// every failure is one of the errors the gateway answers 4xx for.
func FuzzReadRelated(f *testing.F) {
	seeds := []string{
		string(related("B", `{"_attachments":{"a":{"follows":true,"length":5}}}`, "hello")),
		string(related("B", `{"_attachments":{"a":{"follows":true},"b":{"follows":true,"length":1}}}`, "x", "y")),
		string(related("B", `{"_attachments":{"a":{"follows":true,"encoding":"gzip"}}}`, "\x1f\x8bxx")),
		string(related("B", `{"_attachments":{"a":{"stub":true}},"x":1}`)),
		string(related("B", `{"a":1}`, "extra")),
		"--B\r\nContent-Type: application/json\r\n\r\n{}\r\n--B",
		"--B\r\nContent-Type: text/plain\r\n\r\n{}\r\n--B--",
		"--B\nContent-Type: application/json\n\n{}\n--B--\n",
		"preamble\r\n--B\r\nContent-Type: application/json\r\n\r\n{}\r\n--B--\r\nepilogue",
		"--B\r\nContent-Type: application/json\r\nbroken header\r\n\r\n{}\r\n--B--",
		"",
	}
	for _, s := range seeds {
		f.Add([]byte(s), "B")
	}
	f.Add([]byte(seeds[0]), "")
	f.Add([]byte(seeds[0]), "a boundary much longer than the body has in it")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		if boundary == "" {
			boundary = "B"
		}
		r, err := ReadRelated(bytes.NewReader(body), boundary, 4096)
		if err != nil {
			if !errors.Is(err, ErrBadMultipart) && !errors.Is(err, ErrNotJSONPart) && !errors.Is(err, ErrDocTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(r.JSON) > 4096 {
			t.Fatalf("JSON part of %d bytes passed a 4096 limit", len(r.JSON))
		}
		d, err := docjson.ParseDoc(r.JSON)
		if err != nil || !d.HasAttachments {
			return
		}
		atts, err := ParseAttachmentsFollows(d.Attachments, r.Parts)
		if err != nil {
			if !errors.Is(err, ErrBadAttachment) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		for _, a := range atts {
			if !a.Stub && a.Digest != Digest(a.Data) {
				t.Fatalf("attachment %s stored with a digest not of its data", a.Name)
			}
		}
	})
}

// FuzzInlineToFollows: the converter never panics, and what it produces
// from valid JSON is valid JSON whose attachment entries no longer carry
// data.
func FuzzInlineToFollows(f *testing.F) {
	for _, s := range []string{
		`{"_id":"x","_attachments":{"a":{"content_type":"text/plain","data":"aGVsbG8="}}}`,
		`{"_id":"x","_rev":"1-a","_attachments":{"a":{"stub":true,"length":1},"b":{"data":"","revpos":1}},"y":[1,{"z":"\""}]}`,
		`{"_id":"x","_attachments":{"a":{"data":"aGVsbG8\/"}}}`,
		`{"_id":"x","_attachments":{"a":{"data":"aGk=","digest":"md5-x","encoding":"gzip"}}}`,
		`{ "_id" : "x" , "_attachments" : { "a" : { "data" : "aGk=" } } }`,
		`{"_id":"x","_attachments":{"a":{"data":"aGk="}`,
		`{"_id":1}`, `[]`, `"s"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		fd, ok := InlineToFollows(doc)
		if !ok {
			return
		}
		if json.Valid(doc) && !json.Valid(fd.JSON) {
			t.Fatalf("valid %s became invalid %s", doc, fd.JSON)
		}
		n := 0
		for _, a := range fd.Atts {
			if len(a.B64)%4 != 0 || a.Len != len(a.B64)/4*3-bytes.Count(a.B64, []byte("=")) {
				t.Fatalf("bad length for %q: %d", a.B64, a.Len)
			}
			n += a.Len
		}
		if n != fd.DataLen {
			t.Fatalf("DataLen %d, parts %d", fd.DataLen, n)
		}
	})
}

// FuzzWalk: on valid JSON the walker finds the same members and elements
// as encoding/json, and it never panics on anything.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,{"c":"\""}],"d":"\\"}`, `[1,"x",[],{}]`, `{}`, `[]`, `{"a":{"b":{"c":[[["\\\""]]]}}}`,
		`{"results":[{"id":"x","docs":[{"ok":{"_id":"x"}}]}]}`, ` { "a" : [ 1 , 2 ] } `, `{"a":tru}`, `[1,]`, `{"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var keys []string
		okObj := WalkObject(b, 0, func(key []byte, vs, ve int) bool {
			var k string
			if json.Unmarshal(key, &k) != nil {
				return false
			}
			keys = append(keys, k)
			return true
		})
		n := 0
		okArr := WalkArray(b, 0, func(vs, ve int) bool { n++; return true })
		// ObjectAt and ArrayAt, whose callers delimit the values, take
		// what WalkObject and WalkArray take, member for member
		var spans, spansAt [][2]int
		okAll := WalkObject(b, 0, func(_ []byte, vs, ve int) bool { spans = append(spans, [2]int{vs, ve}); return true })
		endAt := ObjectAt(b, 0, func(_ []byte, vs int) int {
			ve := SkipValue(b, vs)
			spansAt = append(spansAt, [2]int{vs, ve})
			return ve
		})
		if okAll != (endAt >= 0) || (okAll && fmt.Sprint(spans) != fmt.Sprint(spansAt)) {
			t.Fatalf("WalkObject %v %v, ObjectAt %d %v on %q", okAll, spans, endAt, spansAt, b)
		}
		na := 0
		if endArr := ArrayAt(b, 0, func(vs int) int { na++; return SkipValue(b, vs) }); okArr != (endArr >= 0) || (okArr && na != n) {
			t.Fatalf("WalkArray %v %d, ArrayAt %d %d on %q", okArr, n, endArr, na, b)
		}
		if !json.Valid(b) {
			return
		}
		var v any
		_ = json.Unmarshal(b, &v)
		switch x := v.(type) {
		case map[string]any:
			if !okObj {
				t.Fatalf("WalkObject failed on %s", b)
			}
			for _, k := range keys {
				if _, ok := x[k]; !ok {
					t.Fatalf("key %q not in %s", k, b)
				}
			}
		case []any:
			if !okArr || n != len(x) {
				t.Fatalf("WalkArray: %v, %d elements of %d in %s", okArr, n, len(x), b)
			}
		}
	})
}
