package httpgw_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// TestRevIDsAsCouchDB makes the same edits on settee and on a real
// CouchDB 3.5.2 and checks that every one gets the same revision:
// thousands of generated bodies (numbers of every kind, escapes and
// non-ASCII text, nesting, repeated keys, odd whitespace) created, edited
// and deleted through _bulk_docs, PUT and DELETE, and docs with
// attachments inline and uploaded on their own. Attachments are of types
// CouchDB stores as they are; the compressible ones, which it gzips with
// zlib, are TestCompressibleAttRevsAsCouchDB's.
func TestRevIDsAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	s := testserver.Start(t)
	sides := []*revSide{
		{name: "settee", url: s.URL, user: testserver.AdminUser, pw: testserver.AdminPassword},
		{name: "CouchDB", url: cs.URL, user: cs.User, pw: cs.Password},
	}
	for _, sd := range sides {
		sd.call(t, "PUT", "/revs", "", 201)
	}
	r := rand.New(rand.NewPCG(18, 2026))
	const n = 3000
	ids := make([]string, n)
	bodies := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("d%05d", i)
		bodies[i] = genBody(r)
	}

	// 1. created through _bulk_docs, 500 at a time
	revs := make([]string, n)
	for lo := 0; lo < n; lo += 500 {
		var b strings.Builder
		b.WriteString(`{"docs":[`)
		for i := lo; i < min(n, lo+500); i++ {
			if i > lo {
				b.WriteString(",")
			}
			b.WriteString(withMembers(bodies[i], `"_id":`+quote(ids[i])))
		}
		b.WriteString("]}")
		got := bulkRevs(t, sides, b.String())
		for k, rev := range got {
			revs[lo+k] = rev
		}
	}
	// 2. every doc edited: one in ten through PUT, the rest in bulk
	var edits []string
	var editIdx []int
	for i := range n {
		body := withMembers(genBody(r), `"_id":`+quote(ids[i]), `"_rev":`+quote(revs[i]))
		if i%10 == 0 {
			revs[i] = sameRev(t, sides, "PUT", "/revs/"+ids[i], body, "edit "+body)
			continue
		}
		edits, editIdx = append(edits, body), append(editIdx, i)
	}
	got := bulkRevs(t, sides, `{"docs":[`+strings.Join(edits, ",")+`]}`)
	for k, i := range editIdx {
		revs[i] = got[k]
	}
	// 3. deleted: by DELETE, by _deleted with a body, by _deleted alone;
	// then some recreated over their deletion
	for i := 0; i < n; i += 7 {
		switch i % 3 {
		case 0:
			revs[i] = sameRev(t, sides, "DELETE", "/revs/"+ids[i]+"?rev="+revs[i], "", "DELETE "+ids[i])
		case 1:
			body := withMembers(genBody(r), `"_rev":`+quote(revs[i]), `"_deleted":true`)
			revs[i] = sameRev(t, sides, "PUT", "/revs/"+ids[i], body, "delete "+body)
		default:
			body := `{"_rev":` + quote(revs[i]) + `,"_deleted":true}`
			revs[i] = sameRev(t, sides, "PUT", "/revs/"+ids[i], body, "delete "+body)
		}
	}
	for i := 0; i < n; i += 49 {
		body := genBody(r)
		sameRev(t, sides, "PUT", "/revs/"+ids[i], body, "recreate "+body)
	}
	// 4. attachments: inline (one to three, in the body's order), then a
	// second one uploaded on its own, then one removed
	types := []string{"application/octet-stream", "image/png", "application/pdf", "image/jpeg"}
	for i := range 60 {
		id := fmt.Sprintf("att%02d", i)
		var atts []string
		for k := range 1 + i%3 {
			data := make([]byte, r.IntN(3000))
			for j := range data {
				data[j] = byte(r.Uint32())
			}
			atts = append(atts, fmt.Sprintf(`%s:{"content_type":%s,"data":%q}`,
				quote(fmt.Sprintf("%c-%d.bin", 'z'-rune(r.IntN(26)), k)), quote(types[r.IntN(len(types))]), base64.StdEncoding.EncodeToString(data)))
		}
		body := withMembers(genBody(r), `"_attachments":{`+strings.Join(atts, ",")+`}`)
		rev := sameRev(t, sides, "PUT", "/revs/"+id, body, "attachments "+id)
		if i%2 == 0 {
			rev = sameRevRaw(t, sides, "PUT", "/revs/"+id+"/upload.png?rev="+rev, "image/png", []byte(fmt.Sprintf("png %d", i)), "upload to "+id)
		}
		if i%4 == 0 {
			sameRevRaw(t, sides, "DELETE", "/revs/"+id+"/upload.png?rev="+rev, "", nil, "remove from "+id)
		}
	}
}

type revSide struct {
	name, url, user, pw string
}

func (sd *revSide) do(t *testing.T, method, path, ctype string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, sd.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(sd.user, sd.pw)
	if ctype == "" {
		ctype = "application/json"
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", sd.name, method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", sd.name, method, path, err)
	}
	return resp.StatusCode, out
}

func (sd *revSide) call(t *testing.T, method, path, body string, want int) []byte {
	t.Helper()
	st, out := sd.do(t, method, path, "", []byte(body))
	if st != want {
		t.Fatalf("%s: %s %s: %d %s, want %d", sd.name, method, path, st, out, want)
	}
	return out
}

// bulkRevs posts the same _bulk_docs to both sides and checks that each
// doc got the same revision.
func bulkRevs(t *testing.T, sides []*revSide, body string) []string {
	t.Helper()
	var res [2][]struct{ ID, Rev, Error, Reason string }
	for k, sd := range sides {
		if err := json.Unmarshal(sd.call(t, "POST", "/revs/_bulk_docs", body, 201), &res[k]); err != nil {
			t.Fatal(err)
		}
	}
	if len(res[0]) != len(res[1]) {
		t.Fatalf("%d results on settee, %d on CouchDB", len(res[0]), len(res[1]))
	}
	var docs struct{ Docs []json.RawMessage }
	if err := json.Unmarshal([]byte(body), &docs); err != nil {
		t.Fatal(err)
	}
	revs := make([]string, len(res[0]))
	bad := 0
	for i := range res[0] {
		a, b := res[0][i], res[1][i]
		if a.Rev != b.Rev || a.Error != b.Error || a.Rev == "" {
			if bad++; bad <= 10 {
				t.Errorf("%s: settee %s%s, CouchDB %s%s; the doc: %s", a.ID, a.Rev, a.Error, b.Rev, b.Error, docs.Docs[i])
			}
		}
		revs[i] = a.Rev
	}
	if bad > 0 {
		t.Fatalf("%d of %d revisions differ", bad, len(revs))
	}
	return revs
}

func sameRev(t *testing.T, sides []*revSide, method, path, body, what string) string {
	t.Helper()
	return sameRevRaw(t, sides, method, path, "", []byte(body), what)
}

// sameRevRaw sends one request to both sides and checks the revisions
// their answers carry are the same.
func sameRevRaw(t *testing.T, sides []*revSide, method, path, ctype string, body []byte, what string) string {
	t.Helper()
	var revs [2]string
	for k, sd := range sides {
		st, out := sd.do(t, method, path, ctype, body)
		var res struct{ Rev string }
		if st/100 != 2 || json.Unmarshal(out, &res) != nil || res.Rev == "" {
			t.Fatalf("%s: %s: %d %s", sd.name, what, st, out)
		}
		revs[k] = res.Rev
	}
	if revs[0] != revs[1] {
		t.Fatalf("%s: settee %s, CouchDB %s", what, revs[0], revs[1])
	}
	return revs[0]
}

// withMembers puts members at the front of the JSON object obj.
func withMembers(obj string, members ...string) string {
	rest := strings.TrimSpace(obj)[1:]
	if strings.TrimSpace(rest) == "}" {
		return "{" + strings.Join(members, ",") + "}"
	}
	return "{" + strings.Join(members, ",") + "," + rest
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// genBody is a random doc body as a client might write it, with what
// decides a revision's bytes in CouchDB: integers of every size, floats in
// every notation, escapes, non-ASCII text, nesting, repeated keys and
// whitespace.
func genBody(r *rand.Rand) string {
	var b strings.Builder
	genObject(r, &b, 0, true)
	return b.String()
}

func genObject(r *rand.Rand, b *strings.Builder, depth int, top bool) {
	ws := func() {
		if r.IntN(8) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[r.IntN(4)])
		}
	}
	b.WriteString("{")
	ws()
	n := r.IntN(6)
	if depth > 2 {
		n = r.IntN(3)
	}
	var keys []string
	for i := range n {
		if i > 0 {
			b.WriteString(",")
			ws()
		}
		key := genString(r, 6)
		if len(keys) > 0 && r.IntN(12) == 0 {
			key = keys[r.IntN(len(keys))] // a repeated key
		}
		if top && strings.HasPrefix(key, "_") {
			key = "k" + key
		}
		keys = append(keys, key)
		b.WriteString(genQuoted(r, key))
		ws()
		b.WriteString(":")
		ws()
		genValue(r, b, depth+1)
		ws()
	}
	b.WriteString("}")
}

func genValue(r *rand.Rand, b *strings.Builder, depth int) {
	k := r.IntN(12)
	if depth > 4 && k >= 9 {
		k = r.IntN(9)
	}
	switch k {
	case 0:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	case 1, 2:
		b.WriteString(genQuoted(r, genString(r, 20)))
	case 3:
		fmt.Fprintf(b, "%d", r.IntN(300)) // a byte, or not quite
	case 4:
		b.WriteString([]string{"-1", "-0", "0", "255", "256", "2147483647", "2147483648", "-2147483648", "-2147483649",
			"9223372036854775807", "-9223372036854775808", "18446744073709551616", "123456789012345678901234567890",
			"-98765432109876543210987654321098765432109876543210"}[r.IntN(14)])
	case 5:
		fmt.Fprintf(b, "%d", int64(r.Uint64()))
	case 6:
		f := []string{"%g", "%e", "%E", "%.3f", "%.17g"}[r.IntN(5)]
		x := r.NormFloat64() * []float64{1, 1e-8, 1e12, 1e300, 1e-300}[r.IntN(5)]
		fmt.Fprintf(b, f, x)
	case 7:
		b.WriteString([]string{"1.0", "-0.0", "0.1", "1e2", "1E2", "1e-2", "2.5e+3", "0.30000000000000004", "1e-400", "5e-324", "1.7976931348623157e308"}[r.IntN(11)])
	case 8:
		// a list of small integers: a string in Erlang's terms
		b.WriteString("[")
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, "%d", r.IntN(260))
		}
		b.WriteString("]")
	case 9, 10:
		b.WriteString("[")
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteString(", ")
			}
			genValue(r, b, depth+1)
		}
		b.WriteString("]")
	default:
		genObject(r, b, depth, false)
	}
}

var genRunes = []rune("abcxyzABC019 _-./\\\"'\u00e9\u00fc\u00df\u4e2d\u6587\u65e5\u672c\u0416\u05d0\U0001F600\U0001F9E1\u2028\u0001\u001f\u007f\ufeff")

func genString(r *rand.Rand, max int) string {
	rs := make([]rune, r.IntN(max))
	for i := range rs {
		rs[i] = genRunes[r.IntN(len(genRunes))]
	}
	return string(rs)
}

// genQuoted writes s as a JSON string, escaping some characters that
// need not be escaped (as clients do: \u00e9, \/ or a surrogate pair).
func genQuoted(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case c == '/' && r.IntN(2) == 0:
			b.WriteString(`\/`)
		case c > 0x7f && r.IntN(3) == 0:
			if c > 0xffff {
				c -= 0x10000
				fmt.Fprintf(&b, `\u%04X\u%04x`, 0xd800+(c>>10), 0xdc00+(c&0x3ff))
			} else {
				fmt.Fprintf(&b, `\u%04x`, c)
			}
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
