package httpgw_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// FuzzQueryParams sends arbitrary query strings to the endpoints that parse
// the most parameters. Whatever the input, the answer is a success or a
// CouchDB-style 4xx error, never a 500 or a broken body.
func FuzzQueryParams(f *testing.F) {
	for _, seed := range []string{
		"limit=2&skip=1", `startkey="a"&endkey="b"`, "descending=true", "keys=[\"a\"]",
		"limit=abc", "startkey=a", "since=now", "since=garbage", "feed=longpoll&timeout=1",
		"style=all_docs&include_docs=true", "filter=_doc_ids&doc_ids=[\"x\"]", "heartbeat=-1",
		"rev=1-abc", "open_revs=all", "open_revs=[\"1-x\"]", "revs=true&revs_info=true", "atts_since=[1]",
		"conflicts=yes", "key=null", "inclusive_end=false&startkey=\"\\u0000\"",
	} {
		f.Add("_all_docs", seed)
		f.Add("_changes", seed)
		f.Add("doc", seed)
	}
	s := testserver.Start(f)
	resp := s.Do(f, "PUT", "/fz", nil)
	resp.Body.Close()
	resp = s.Do(f, "PUT", "/fz/doc", `{"a":1}`)
	resp.Body.Close()
	f.Fuzz(func(t *testing.T, endpoint, query string) {
		switch endpoint {
		case "_all_docs", "_changes", "doc", "_design_docs", "_local_docs":
		default:
			return
		}
		for _, c := range []byte(query) {
			if c <= ' ' || c >= 0x7f || c == '#' {
				return // not a valid request line: net/http refuses it before settee sees it
			}
		}
		if strings.Contains(query, "feed=") && !strings.Contains(query, "timeout=") {
			query += "&timeout=1"
		}
		u := s.URL + "/fz/" + endpoint + "?" + query
		if _, err := url.Parse(u); err != nil {
			return
		}
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			return
		}
		req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s: status %d: %s", u, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 {
			var e struct{ Error, Reason string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Fatalf("%s: status %d with body %q", u, resp.StatusCode, b)
			}
		}
	})
}

// FuzzRequestBodies sends arbitrary bodies to the endpoints that parse
// JSON: never a 500, always a CouchDB error shape on failure.
func FuzzRequestBodies(f *testing.F) {
	seeds := []string{`{"a":1}`, `{"_id":"x"}`, `{"docs":[{"_id":"a"},{"_rev":"1-x"}]}`, `{"docs":[1,2]}`,
		`{"new_edits":false,"docs":[{"_id":"a","_rev":"1-abc","_revisions":{"start":1,"ids":["abc"]}}]}`,
		`{"a":["1-x"]}`, `{"docs":[{"id":"a","rev":"1-x"}]}`, `{"_attachments":{"a":{"data":"aGk="}}}`,
		`{"_attachments":{"a":{"stub":true}}}`, `{"members":{"names":["x"]}}`, `[`, `"x"`, `{"_deleted":true}`,
		`{"keys":["a",1,null]}`, `{"_revisions":{"start":0,"ids":[]}}`}
	for _, ep := range []string{"doc", "_bulk_docs", "_revs_diff", "_bulk_get", "_all_docs", "_security", "_local/x", "_missing_revs"} {
		for _, s := range seeds {
			f.Add(ep, []byte(s))
		}
	}
	s := testserver.Start(f)
	resp := s.Do(f, "PUT", "/fb", nil)
	resp.Body.Close()
	f.Fuzz(func(t *testing.T, endpoint string, body []byte) {
		method := "POST"
		switch endpoint {
		case "doc", "_security", "_local/x":
			method = "PUT"
		case "_bulk_docs", "_revs_diff", "_bulk_get", "_all_docs", "_missing_revs":
		default:
			return
		}
		resp := s.Do(t, method, "/fb/"+endpoint, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", method, endpoint, body, resp.StatusCode, b)
		}
		if resp.StatusCode >= 400 {
			var e struct{ Error, Reason string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Fatalf("%s %q: status %d with body %q", endpoint, body, resp.StatusCode, b)
			}
		}
	})
}
