package bench

import (
	"bytes"
	"encoding/json"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mediumKeys are body(medium)'s fields in fabric_bench's order.
var mediumKeys = []string{"_id", "random_val", "index", "blob1", "guid", "isActive", "name", "company", "about",
	"extra", "registered", "latitude", "longitude", "tags", "array_ints", "array_floats", "blob2"}

// topKeys returns the keys of a JSON object in document order.
func topKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestDocGenShapes(t *testing.T) {
	largeKeys := slices.Clone(mediumKeys)
	for i := 1; i <= 32; i++ {
		largeKeys = append(largeKeys, big.NewInt(int64(i)).String())
	}
	smallKeys := []string{"_id", "random_val", "worker_id", "foo", "bar", "baz", "blah", "num1", "num2", "biz", "zab", "mtime", "ctime", "bool"}
	hex := regexp.MustCompile(`^[0-9A-F]+$`)
	for _, c := range []struct {
		size     string
		keys     []string
		min, max int // bytes, for id "100000"
	}{
		{DocSmall, smallKeys, 330, 380},
		// DESIGN.md quotes ≈14.7 KB; fabric_bench's medium doc encodes to
		// 14,554 bytes with a 6-digit id and a 16-digit random_val.
		{DocMedium, mediumKeys, 14400, 15000},
		// "mostly incompressible, should be about ~128KB or so": medium + 32 × 4096.
		{DocLarge, largeKeys, 145000, 147000},
	} {
		t.Run(c.size, func(t *testing.T) {
			g, err := newDocGen(c.size, 7)
			if err != nil {
				t.Fatal(err)
			}
			doc := g.appendDoc(nil, []byte("100000"), "")
			t.Logf("%s doc: %d bytes (bound %d)", c.size, len(doc), g.docLen(6))
			if !json.Valid(doc) {
				t.Fatalf("invalid JSON: %.300s", doc)
			}
			if len(doc) < c.min || len(doc) > c.max {
				t.Errorf("size %d, want %d..%d", len(doc), c.min, c.max)
			}
			if len(doc) > g.docLen(6) {
				t.Errorf("size %d above docLen %d", len(doc), g.docLen(6))
			}
			if keys := topKeys(t, doc); !slices.Equal(keys, c.keys) {
				t.Errorf("keys %v\nwant %v", keys, c.keys)
			}
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(doc))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Fatal(err)
			}
			if m["_id"] != "100000" {
				t.Errorf("_id %v", m["_id"])
			}
			rv, err := m["random_val"].(json.Number).Int64()
			if err != nil || rv < 1 || rv > 1<<50 {
				t.Errorf("random_val %v", m["random_val"])
			}
			if c.size == DocSmall {
				return
			}
			for _, k := range []string{"blob1", "blob2"} {
				if s, _ := m[k].(string); len(s) != 1024 || !hex.MatchString(s) {
					t.Errorf("%s: %d chars, want 1024 upper-case hex", k, len(s))
				}
			}
			if !bytes.Contains(doc, []byte(`"array_floats":[1.0,2.0,3.0,`)) || !bytes.Contains(doc, []byte(`999.0,1000.0]`)) {
				t.Error("array_floats not written as jiffy writes floats")
			}
			if !bytes.Contains(doc, []byte(`"array_ints":[1,2,3,`)) || !bytes.Contains(doc, []byte(`"latitude":16.091562,"longitude":-83.309904`)) {
				t.Error("array_ints or coordinates differ")
			}
			if s, _ := m["about"].(string); !strings.HasSuffix(s, "cupidatat.\r\n") {
				t.Errorf("about does not end with CR LF: %q", s)
			}
			if tags, _ := m["tags"].([]any); len(tags) != 15 {
				t.Errorf("%d tags, want 15", len(tags))
			}
			if c.size == DocLarge {
				for i := 1; i <= 32; i++ {
					if s, _ := m[big.NewInt(int64(i)).String()].(string); len(s) != 4096 || !hex.MatchString(s) {
						t.Fatalf("field %d: %d chars, want 4096 hex", i, len(s))
					}
				}
			}
		})
	}
}

func TestDocGenRandomFieldsDiffer(t *testing.T) {
	g, _ := newDocGen(DocMedium, 1)
	a := g.appendDoc(nil, []byte("1"), "")
	b := g.appendDoc(nil, []byte("1"), "")
	if bytes.Equal(a, b) {
		t.Error("two docs are identical: random_val and blobs must differ")
	}
	withRev := g.appendDoc(nil, []byte("1"), "3-abc")
	if !bytes.HasPrefix(withRev, []byte(`{"_id":"1","_rev":"3-abc","random_val":`)) || !json.Valid(withRev) {
		t.Errorf("doc with rev: %.80s", withRev)
	}
}

func TestRandomID(t *testing.T) {
	g, _ := newDocGen(DocSmall, 1)
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	seen := map[string]bool{}
	for range 1000 {
		id := g.randomID()
		x, ok := new(big.Int).SetString(string(id), 10)
		if !ok || x.Sign() <= 0 || x.Cmp(limit) > 0 {
			t.Fatalf("id %s outside [1, 2^128]", id)
		}
		if seen[string(id)] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[string(id)] = true
	}
}

func BenchmarkAppendDocMedium(b *testing.B) {
	g, _ := newDocGen(DocMedium, 1)
	buf := make([]byte, 0, 16<<10)
	id := []byte("12345")
	b.SetBytes(int64(len(g.appendDoc(nil, id, ""))))
	b.ReportAllocs()
	for b.Loop() {
		buf = g.appendDoc(buf[:0], id, "")
	}
}
