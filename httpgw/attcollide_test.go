//go:build !race

package httpgw_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// md5Collision is Wang and Yu's 2004 pair: two 128-byte messages that
// differ in six bytes and have the same MD5 (79054025…). The test checks
// that they do.
var md5Collision = [2]string{
	"d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f89" +
		"55ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b" +
		"d8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0" +
		"e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70",
	"d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f89" +
		"55ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b" +
		"d8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0" +
		"e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70",
}

// asUser sends a request with a user's basic credentials.
func asUser(t *testing.T, s *testserver.Server, user, method, path, ctype string, body []byte) (int, []byte) {
	t.Helper()
	req := s.NewRequest(t, method, path, body)
	req.SetBasicAuth(user, user+"-pw")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestAttachmentsWithCollidingMD5 is the attack on attachment data shared
// by digest: alice stores an attachment, bob uploads bytes with the same
// MD5 to another doc of the same shard (q=1). Each must keep serving its
// own bytes: written, compacted and after a restart.
// (not under -race: it compacts, whose badger GC races inside badger;
// make test's non-race pass runs it, as every test of a !race file)
func TestAttachmentsWithCollidingMD5Compact(t *testing.T) {
	t.Parallel()
	m1, err1 := hex.DecodeString(md5Collision[0])
	m2, err2 := hex.DecodeString(md5Collision[1])
	if err1 != nil || err2 != nil || len(m1) != 128 || len(m2) != 128 {
		t.Fatalf("bad pair: %v %v", err1, err2)
	}
	if s1, s2 := md5.Sum(m1), md5.Sum(m2); bytes.Equal(m1, m2) || s1 != s2 {
		t.Fatalf("not an MD5 collision: %x %x", s1, s2)
	}

	s := testserver.Start(t)
	for _, u := range []string{"alice", "bob"} {
		mustCall(t, s, 201, "PUT", "/_users/org.couchdb.user:"+u,
			`{"name":"`+u+`","password":"`+u+`-pw","roles":[],"type":"user"}`, nil)
	}
	mustCall(t, s, 201, "PUT", "/shared?q=1", nil, nil)
	mustCall(t, s, 200, "PUT", "/shared/_security", `{"members":{"names":["alice","bob"]}}`, nil)

	put := func(user, doc string, data []byte) {
		t.Helper()
		if st, b := asUser(t, s, user, "PUT", "/shared/"+doc+"/blob", "application/octet-stream", data); st != 201 {
			t.Fatalf("%s PUT %s: %d %s", user, doc, st, b)
		}
	}
	put("alice", "alice-doc", m1)
	put("bob", "bob-doc", m2)

	var da, db struct {
		Atts map[string]struct {
			Digest string `json:"digest"`
		} `json:"_attachments"`
	}
	mustCall(t, s, 200, "GET", "/shared/alice-doc", nil, &da)
	mustCall(t, s, 200, "GET", "/shared/bob-doc", nil, &db)
	if da.Atts["blob"].Digest == "" || da.Atts["blob"].Digest != db.Atts["blob"].Digest {
		t.Fatalf("digests %q and %q: want the same md5 digest", da.Atts["blob"].Digest, db.Atts["blob"].Digest)
	}

	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			user, doc string
			want      []byte
		}{{"alice", "alice-doc", m1}, {"bob", "bob-doc", m2}, {"bob", "alice-doc", m1}} {
			st, got := asUser(t, s, c.user, "GET", "/shared/"+c.doc+"/blob", "", nil)
			if st != 200 || !bytes.Equal(got, c.want) {
				t.Errorf("%s: %s GET %s/blob: %d %x, want %x", when, c.user, c.doc, st, got, c.want)
			}
		}
		// the doc with its data inline, as a replication reads it
		var doc struct {
			Atts map[string]struct {
				Data []byte `json:"data"`
			} `json:"_attachments"`
		}
		req := s.NewRequest(t, "GET", "/shared/alice-doc?attachments=true", nil)
		req.SetBasicAuth("alice", "alice-pw")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: alice-doc?attachments=true: %d %v", when, resp.StatusCode, err)
		}
		if got := doc.Atts["blob"].Data; !bytes.Equal(got, m1) {
			t.Errorf("%s: alice-doc?attachments=true has %x, want %x", when, got, m1)
		}
	}
	check("written")
	compactAndWait(t, s, "shared")
	check("compacted")
	s.Restart(t)
	check("restarted")
}
