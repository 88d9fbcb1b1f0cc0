package replicator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/replicator"
)

// feedServer serves _changes over n rows with seqs "1".."n". The first
// feed is cut (the connection closed) after cutAfter rows; body, when
// set, is the answer to every feed instead.
type feedServer struct {
	n, cutAfter int
	body        string

	mu     sync.Mutex
	feeds  []string // since of each feed request
	counts int      // limit=0 requests
}

func (s *feedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("limit") == "0" {
		s.mu.Lock()
		s.counts++
		s.mu.Unlock()
		fmt.Fprintf(w, `{"results":[],"last_seq":"%d","pending":%d}`, since, s.n-since)
		return
	}
	if r.URL.Query().Has("limit") {
		http.Error(w, "a feed has no limit", 400)
		return
	}
	s.mu.Lock()
	s.feeds = append(s.feeds, r.URL.Query().Get("since"))
	first := len(s.feeds) == 1
	s.mu.Unlock()
	if s.body != "" {
		_, _ = w.Write([]byte(s.body))
		return
	}
	_, _ = w.Write([]byte(`{"results":[`))
	for i := since + 1; i <= s.n; i++ {
		if i > since+1 {
			_, _ = w.Write([]byte(",\n"))
		}
		fmt.Fprintf(w, `{"seq":"%d","id":"d%d","changes":[{"rev":"1-a"}]}`, i, i)
		if first && i-since == s.cutAfter {
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
	}
	fmt.Fprintf(w, "\n],\n\"last_seq\":\"%d\",\"pending\":0}\n", s.n)
}

func feedEndpoint(t *testing.T, s http.Handler) *replicator.HTTPEndpoint {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	e := replicator.NewHTTPEndpoint(&replicator.Spec{URL: ts.URL + "/db"})
	e.Backoff = time.Millisecond
	return e
}

// A feed comes in pages of the asked size while it is read; a connection
// lost mid-feed is opened again after the last page handed on, so every
// change is handed on once, in order, and the last page says so.
func TestFeedPagesAndResume(t *testing.T) {
	s := &feedServer{n: 25, cutAfter: 13}
	e := feedEndpoint(t, s)
	var ids []string
	var pages []string
	err := e.Feed(context.Background(), replicator.ChangesQuery{}, 5, func(p *replicator.ChangesPage) error {
		for _, r := range p.Rows {
			ids = append(ids, strings.TrimPrefix(r.Id, "d"))
		}
		pages = append(pages, fmt.Sprintf("%d rows to %s pending %d end %v", len(p.Rows), p.LastSeq, p.Pending, p.End))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 25)
	for i := range want {
		want[i] = strconv.Itoa(i + 1)
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("rows %v", ids)
	}
	wantPages := []string{
		`5 rows to "5" pending 20 end false`, `5 rows to "10" pending 15 end false`,
		`5 rows to "15" pending 10 end false`, `5 rows to "20" pending 5 end false`,
		`5 rows to "25" pending 0 end false`, `0 rows to "25" pending 0 end true`,
	}
	if strings.Join(pages, "; ") != strings.Join(wantPages, "; ") {
		t.Fatalf("pages\n%s\nwant\n%s", strings.Join(pages, "\n"), strings.Join(wantPages, "\n"))
	}
	if strings.Join(s.feeds, ",") != ",10" || s.counts != 1 {
		t.Fatalf("feeds since %q, %d counts; want the feed again from 10 after the cut, one count", s.feeds, s.counts)
	}
}

// An answer of the wrong form fails the feed at once, not retried.
func TestFeedBadAnswer(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"results":{"id":"x"}}`, "bad _changes answer: results is an object, not an array"},
		{`{"last_seq":"9"}`, "bad _changes answer: no results"},
		{`<html>502</html>`, "bad _changes answer: invalid character"},
		{`{"results":[{"seq":"1","changes":[{"rev":"1-a"}]}]}`, "bad _changes answer: a row without an id or revs"},
		{`{"results":[{"seq":"1","id":"x","changes":"1-a"}]}`, "bad _changes answer: changes is a string, not an array"},
	} {
		s := &feedServer{n: 3, body: tc.body}
		e := feedEndpoint(t, s)
		err := e.Feed(context.Background(), replicator.ChangesQuery{}, 5, func(*replicator.ChangesPage) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want %q", tc.body, err, tc.want)
		}
		if len(s.feeds) != 1 {
			t.Fatalf("%s: %d feed requests, want 1", tc.body, len(s.feeds))
		}
	}
}

// BenchmarkFeed reads a feed of 100,000 rows as settee writes them.
func BenchmarkFeed(b *testing.B) {
	var body []byte
	body = append(body, `{"results":[`...)
	for i := 1; i <= 100000; i++ {
		if i > 1 {
			body = append(body, ",\n"...)
		}
		body = fmt.Appendf(body, `{"seq":"%d-g1AAAAFbeJzLYWBg4MhgTmHQTs5ILQ","id":"doc%08d","changes":[{"rev":"1-967a00dff5e02add41819138abb3284d"}]}`, i, i)
	}
	body = append(body, "\n],\n\"last_seq\":\"100000\",\"pending\":0}\n"...)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("limit") == "0" {
			_, _ = w.Write([]byte(`{"results":[],"last_seq":"0","pending":100000}`))
			return
		}
		_, _ = w.Write(body)
	}))
	defer ts.Close()
	e := replicator.NewHTTPEndpoint(&replicator.Spec{URL: ts.URL + "/db"})
	b.SetBytes(int64(len(body)))
	for range b.N {
		n := 0
		if err := e.Feed(context.Background(), replicator.ChangesQuery{}, 2000, func(p *replicator.ChangesPage) error { n += len(p.Rows); return nil }); err != nil || n != 100000 {
			b.Fatal(err, n)
		}
	}
}

// A feed read a few bytes at a time, with numbers for seqs (CouchDB 1.x),
// escapes, white space, a row bigger than the read buffer and members the
// replicator does not know, gives the rows encoding/json reads.
func TestFeedParsesWhatEncodingJSONDoes(t *testing.T) {
	big := strings.Repeat("b", 200<<10)
	body := "\n { \"results\" : [\n" +
		`{"seq":1,"id":"a","changes":[{"rev":"1-x"}]}` + " ,\n" +
		`{"changes":[{"rev":"2-y"},{"rev":"2-z","other":[1,{"x":"]"}]}],"id":"q\"\u00e9\\","seq":12345678901234,"deleted":true,"doc":{"a":"}"}}` + ",\n" +
		`{"seq":13,"id":"` + big + `","changes":[{"rev":"1-big"}],"deleted":false}` + ",\n" +
		`{"\u0073eq":14,"id":"esc","changes":[{"rev":"1-e"}]}` + "\n" +
		"] , \"last_seq\" : 14 , \"pending\" : 0 }\n"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("limit") == "0" {
			_, _ = w.Write([]byte(`{"results":[],"last_seq":0,"pending":4}`))
			return
		}
		for i, n := 0, 1; i < len(body); i, n = i+n, n%7+1 {
			_, _ = w.Write([]byte(body[i:min(i+n, len(body))]))
			w.(http.Flusher).Flush()
		}
	}))
	defer ts.Close()
	e := replicator.NewHTTPEndpoint(&replicator.Spec{URL: ts.URL + "/db"})
	var got []string
	last := ""
	err := e.Feed(context.Background(), replicator.ChangesQuery{}, 2, func(p *replicator.ChangesPage) error {
		for _, r := range p.Rows {
			got = append(got, fmt.Sprintf("%s %q %v %v", r.Seq, r.Id, r.Revs, r.Deleted))
		}
		last = p.LastSeq
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Results []struct {
			Seq     json.RawMessage
			ID      string
			Changes []struct{ Rev string }
			Deleted bool
		}
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range v.Results {
		var revs []string
		for _, c := range r.Changes {
			revs = append(revs, c.Rev)
		}
		want = append(want, fmt.Sprintf("%s %q %v %v", r.Seq, r.ID, revs, r.Deleted))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || last != "14" {
		t.Fatalf("rows\n%.300s\nwant\n%.300s\nlast %s", strings.Join(got, "\n"), strings.Join(want, "\n"), last)
	}
}
