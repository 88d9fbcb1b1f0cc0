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

// TestCompressibleAttRevsAsCouchDB writes docs with attachments of
// compressible types (which CouchDB gzips with zlib and whose digest, of
// the gzipped bytes, is an input of the revision) to settee and to a real
// CouchDB 3.5.2, inline, uploaded on their own and in multipart bodies,
// and checks that both give the same revision, digest, length,
// encoded_length and gzip bytes.
func TestCompressibleAttRevsAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	s := testserver.Start(t)
	sides := []*revSide{
		{name: "settee", url: s.URL, user: testserver.AdminUser, pw: testserver.AdminPassword},
		{name: "CouchDB", url: cs.URL, user: cs.User, pw: cs.Password},
	}
	for _, sd := range sides {
		sd.call(t, "PUT", "/atts", "", 201)
	}
	r := rand.New(rand.NewPCG(7, 2026))
	datas := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one", []byte("a")},
		{"hello", []byte("hello world")},
		{"text100k", wordText(r, 100<<10)},
		{"random1m", randomText(r, 1<<20)},
	}
	types := []string{"text/plain", "application/json", "text/html; charset=utf-8", "application/javascript", "application/xml"}

	// inline base64, one attachment a doc, then all of them in one doc
	var all []string
	for i, d := range datas {
		ct := types[i%len(types)]
		att := fmt.Sprintf(`%s:{"content_type":%s,"data":%q}`, quote(d.name+".txt"), quote(ct), base64.StdEncoding.EncodeToString(d.data))
		all = append(all, att)
		id := "inline-" + d.name
		sameRev(t, sides, "PUT", "/atts/"+id, `{"_attachments":{`+att+`}}`, "inline "+d.name)
		sameAtts(t, sides, id)
	}
	sameRev(t, sides, "PUT", "/atts/inline-all", `{"n":1,"_attachments":{`+strings.Join(all, ",")+`}}`, "inline all")
	sameAtts(t, sides, "inline-all")

	// standalone PUTs: a new doc, then one more on its revision
	for i, d := range datas {
		id := "put-" + d.name
		rev := sameRevRaw(t, sides, "PUT", "/atts/"+id+"/a.txt", types[(i+1)%len(types)], d.data, "PUT "+d.name)
		sameRevRaw(t, sides, "PUT", "/atts/"+id+"/b.json?rev="+rev, "application/json", d.data, "PUT second "+d.name)
		sameAtts(t, sides, id)
	}

	// multipart/related: every data as a part that follows
	var mp bytes.Buffer
	var stubs []string
	for i, d := range datas {
		stubs = append(stubs, fmt.Sprintf(`%s:{"content_type":%s,"length":%d,"follows":true}`,
			quote("mp-"+d.name+".txt"), quote(types[i%len(types)]), len(d.data)))
	}
	const boundary = "cdeflate-boundary"
	fmt.Fprintf(&mp, "--%s\r\nContent-Type: application/json\r\n\r\n{\"kind\":\"multipart\",\"_attachments\":{%s}}\r\n", boundary, strings.Join(stubs, ","))
	for _, d := range datas {
		fmt.Fprintf(&mp, "--%s\r\n\r\n", boundary)
		mp.Write(d.data)
		mp.WriteString("\r\n")
	}
	fmt.Fprintf(&mp, "--%s--", boundary)
	sameRevRaw(t, sides, "PUT", "/atts/multipart", `multipart/related;boundary="`+boundary+`"`, mp.Bytes(), "multipart")
	sameAtts(t, sides, "multipart")
}

// sameAtts checks that a doc's attachments are stored alike on both
// sides: digest, length, encoding, encoded_length, and the bytes a client
// that accepts gzip gets.
func sameAtts(t *testing.T, sides []*revSide, id string) {
	t.Helper()
	type att struct {
		ContentType   string `json:"content_type"`
		Digest        string `json:"digest"`
		Length        int    `json:"length"`
		Encoding      string `json:"encoding"`
		EncodedLength int    `json:"encoded_length"`
		Revpos        int    `json:"revpos"`
	}
	var docs [2]struct {
		Rev  string         `json:"_rev"`
		Atts map[string]att `json:"_attachments"`
	}
	for k, sd := range sides {
		if err := json.Unmarshal(sd.call(t, "GET", "/atts/"+id+"?att_encoding_info=true", "", 200), &docs[k]); err != nil {
			t.Fatal(err)
		}
	}
	if docs[0].Rev != docs[1].Rev {
		t.Errorf("%s: rev settee %s, CouchDB %s", id, docs[0].Rev, docs[1].Rev)
	}
	if len(docs[0].Atts) != len(docs[1].Atts) || len(docs[1].Atts) == 0 {
		t.Fatalf("%s: settee has %d attachments, CouchDB %d", id, len(docs[0].Atts), len(docs[1].Atts))
	}
	for name, want := range docs[1].Atts {
		got := docs[0].Atts[name]
		if got != want {
			t.Errorf("%s/%s: settee %+v, CouchDB %+v", id, name, got, want)
		}
		if want.Encoding != "gzip" {
			t.Errorf("%s/%s: CouchDB did not gzip it: %+v", id, name, want)
		}
		var bodies [2][]byte
		for k, sd := range sides {
			bodies[k] = getGzip(t, sd, "/atts/"+id+"/"+name)
		}
		if !bytes.Equal(bodies[0], bodies[1]) {
			t.Errorf("%s/%s: gzip body: settee %d bytes, CouchDB %d bytes", id, name, len(bodies[0]), len(bodies[1]))
		}
	}
}

func getGzip(t *testing.T, sd *revSide, path string) []byte {
	t.Helper()
	req, err := http.NewRequest("GET", sd.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(sd.user, sd.pw)
	req.Header.Set("Accept-Encoding", "gzip") // and so no transparent gunzip
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%s: GET %s: %d, Content-Encoding %q", sd.name, path, resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	return body
}

func wordText(r *rand.Rand, n int) []byte {
	words := strings.Fields("the of and to in is was that for it with as his on be at by document revision attachment shard replication couchdb settee")
	var b []byte
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
		if r.IntN(12) == 0 {
			b = append(b, '\n')
		} else {
			b = append(b, ' ')
		}
	}
	return b[:n]
}

func randomText(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(32 + r.IntN(95))
	}
	return b
}
