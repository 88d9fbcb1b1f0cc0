package httpgw_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// dbuPeer is a server under test: settee or CouchDB.
type dbuPeer struct {
	url, user, pw string
}

func (p dbuPeer) do(t *testing.T, method, path, body string, auth bool, maxTime time.Duration) (int, http.Header, string) {
	t.Helper()
	ctx := context.Background()
	if maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxTime)
		defer cancel()
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth(p.user, p.pw)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // a cut-off read (maxTime) keeps what came
	return resp.StatusCode, resp.Header, string(b)
}

type dbuRow struct {
	DB   string `json:"db_name"`
	Type string `json:"type"`
	Seq  string `json:"seq"`
}

type dbuFeed struct {
	Results []dbuRow `json:"results"`
	LastSeq string   `json:"last_seq"`
}

func (p dbuPeer) feed(t *testing.T, query string) dbuFeed {
	t.Helper()
	st, _, body := p.do(t, "GET", "/_db_updates"+query, "", true, 0)
	var f dbuFeed
	if st != 200 || json.Unmarshal([]byte(body), &f) != nil {
		t.Fatalf("GET /_db_updates%s: %d %s", query, st, body)
	}
	return f
}

// events lists the feed's (db, type) of databases named with prefix.
func events(f dbuFeed, prefix string) []string {
	var out []string
	for _, r := range f.Results {
		if strings.HasPrefix(r.DB, prefix) {
			out = append(out, r.DB+" "+r.Type)
		}
	}
	slices.Sort(out)
	return out
}

func (p dbuPeer) waitEvents(t *testing.T, prefix string, want ...string) dbuFeed {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := p.feed(t, "")
		got := events(f, prefix)
		if slices.Equal(got, want) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("_db_updates events of %s*: %v, want %v", prefix, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var seqRE = regexp.MustCompile(`"seq":"[^"]*"|"last_seq":"[^"]*"|"rev":"[^"]*"|id: "[^"]*"`)

// dbUpdatesSteps runs the same requests against settee and CouchDB 3.5.2;
// the answers (shapes, statuses, errors) are CouchDB's.
func dbUpdatesSteps(t *testing.T, p dbuPeer) {
	for _, path := range []string{"/dbua", "/dbua/d", "/dbub"} {
		body := ""
		if path == "/dbua/d" {
			body = "{}"
		}
		if st, _, b := p.do(t, "PUT", path, body, true, 0); st != 201 {
			t.Fatalf("PUT %s: %d %s", path, st, b)
		}
	}
	if st, _, b := p.do(t, "DELETE", "/dbua", "", true, 0); st != 200 {
		t.Fatalf("DELETE /dbua: %d %s", st, b)
	}
	all := p.waitEvents(t, "dbu", "dbua created", "dbua updated", "dbua deleted", "dbub created")

	// the normal feed's bytes
	st, h, body := p.do(t, "GET", "/_db_updates", "", true, 0)
	if st != 200 || h.Get("Content-Type") != "application/json" || h.Get("ETag") == "" {
		t.Errorf("normal: %d %v", st, h)
	}
	shape := seqRE.ReplaceAllString(body, `S`)
	if !strings.HasPrefix(shape, "{\"results\":[\n{\"db_name\":") || !strings.HasSuffix(shape, "\n],\nS}\n\n") ||
		!strings.Contains(shape, "S},\r\n{\"db_name\":") {
		t.Errorf("normal feed bytes: %q", body)
	}
	for _, r := range all.Results {
		if r.Seq == "" || r.Type == "" {
			t.Errorf("row %+v", r)
		}
	}

	// limit; since; since=now
	one := p.feed(t, "?limit=1")
	if len(one.Results) != 1 || one.LastSeq != one.Results[0].Seq {
		t.Errorf("limit=1: %+v", one)
	}
	rest := p.feed(t, "?since="+one.LastSeq)
	if len(rest.Results) != len(all.Results)-1 || slices.Contains(rest.Results, one.Results[0]) {
		t.Errorf("since the first: %+v, all %+v", rest, all)
	}
	if z := p.feed(t, "?limit=0"); len(z.Results) != 0 {
		t.Errorf("limit=0: %+v", z)
	}
	now := p.feed(t, "?since=now")
	if len(now.Results) != 0 || now.LastSeq == "" {
		t.Errorf("since=now: %+v", now)
	}
	// descending: newest first, since ignored
	desc := p.feed(t, "?descending=true&since="+one.LastSeq)
	if len(desc.Results) != len(all.Results) || !slices.Equal(events(desc, "dbu"), events(all, "dbu")) {
		t.Errorf("descending: %+v, all %+v", desc, all)
	}

	// longpoll times out empty, and wakes for an event
	t0 := time.Now()
	st, _, body = p.do(t, "GET", "/_db_updates?feed=longpoll&since=now&timeout=300", "", true, 0)
	if st != 200 || time.Since(t0) < 250*time.Millisecond || seqRE.ReplaceAllString(body, "S") != "{\"results\":[\n\n],\nS}\n\n" {
		t.Errorf("longpoll timeout: %d %q after %v", st, body, time.Since(t0))
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		req, _ := http.NewRequest("PUT", p.url+"/dbuc", nil)
		req.SetBasicAuth(p.user, p.pw)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	st, _, body = p.do(t, "GET", "/_db_updates?feed=longpoll&since=now&timeout=10000", "", true, 0)
	if st != 200 || !strings.Contains(body, `{"db_name":"dbuc","type":"created","seq":"`) {
		t.Errorf("longpoll woken: %d %q", st, body)
	}

	// continuous
	st, _, body = p.do(t, "GET", "/_db_updates?feed=continuous&since=now&timeout=200", "", true, 0)
	if st != 200 || seqRE.ReplaceAllString(body, "S") != "{S}\n\n" {
		t.Errorf("continuous, nothing new: %d %q", st, body)
	}
	st, _, body = p.do(t, "GET", "/_db_updates?feed=continuous&limit=2&timeout=200", "", true, 0)
	row := `\{"db_name":"[^"]+","type":"(created|updated|deleted)",S\}\n`
	if st != 200 || !regexp.MustCompile(`^`+row+row+`\{S\}\n\n$`).MatchString(seqRE.ReplaceAllString(body, "S")) {
		t.Errorf("continuous limit=2: %d %q", st, body)
	}
	// heartbeats keep a feed open past its timeout
	_, _, body = p.do(t, "GET", "/_db_updates?feed=continuous&since=now&heartbeat=100&timeout=100", "", true, 700*time.Millisecond)
	if strings.Count(body, "\n") < 3 || strings.Trim(body, "\n") != "" {
		t.Errorf("continuous heartbeats: %q", body)
	}

	// eventsource: _global_changes' change rows
	st, h, body = p.do(t, "GET", "/_db_updates?feed=eventsource&limit=1", "", true, 0)
	want := regexp.MustCompile(`^data: \{S,"id":"(created|updated|deleted):[^"]+","changes":\[\{S\}\]\}\nS\n\n\n$`)
	if st != 200 || h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" ||
		!want.MatchString(seqRE.ReplaceAllString(body, "S")) {
		t.Errorf("eventsource: %d %v %q", st, h, body)
	}
	_, _, body = p.do(t, "GET", "/_db_updates?feed=eventsource&since=now&heartbeat=100", "", true, 450*time.Millisecond)
	if !strings.HasPrefix(body, "event: heartbeat\ndata: \n\n") {
		t.Errorf("eventsource heartbeat: %q", body)
	}

	// bad input
	if st, _, b := p.do(t, "PUT", "/_users/org.couchdb.user:dbuser", `{"name":"dbuser","password":"pw","roles":[],"type":"user"}`, true, 0); st != 201 {
		t.Fatalf("user: %d %s", st, b)
	}
	bob := dbuPeer{p.url, "dbuser", "pw"}
	for _, tc := range []struct {
		peer   dbuPeer
		auth   bool
		method string
		query  string
		status int
		body   string
	}{
		{p, true, "GET", "?feed=bogus", 400, `{"error":"bad_request","reason":"Supported ` + "`feed`" + ` types: normal, continuous, longpoll, eventsource"}`},
		{p, true, "GET", "?limit=abc", 400, `{"error":"bad_request","reason":"invalid_integer"}`},
		{p, true, "GET", "?limit=-1", 400, `{"error":"bad_request","reason":"invalid_integer"}`},
		{p, true, "GET", "?timeout=x", 400, `{"error":"bad_request","reason":"invalid_integer"}`},
		{p, true, "GET", "?heartbeat=-5", 400, `{"error":"bad_request","reason":"invalid_integer"}`},
		{p, true, "GET", "?since=bogus", 400, `{"error":"bad_request","reason":"Malformed sequence supplied in 'since' parameter."}`},
		{p, true, "GET", "?since=99", 400, `{"error":"bad_request","reason":"Malformed sequence supplied in 'since' parameter."}`},
		{p, false, "GET", "", 401, `{"error":"unauthorized","reason":"You are not a server admin."}`},
		{p, false, "GET", "?feed=bogus", 401, `{"error":"unauthorized","reason":"You are not a server admin."}`},
		{bob, true, "GET", "", 401, `{"error":"unauthorized","reason":"You are not a server admin."}`},
		{p, true, "POST", "", 405, `{"error":"method_not_allowed","reason":"Only GET allowed"}`},
	} {
		st, _, b := tc.peer.do(t, tc.method, "/_db_updates"+tc.query, "", tc.auth, 0)
		if st != tc.status || strings.TrimSpace(b) != tc.body {
			t.Errorf("%s %s (%s): %d %s, want %d %s", tc.method, tc.query, tc.peer.user, st, b, tc.status, tc.body)
		}
	}

	// _global_changes holds the history: without it the feed is 404 and
	// events are lost; made again it starts empty
	if st, _, b := p.do(t, "DELETE", "/_global_changes", "", true, 0); st != 200 {
		t.Fatalf("DELETE /_global_changes: %d %s", st, b)
	}
	// (CouchDB may answer a 500 database_does_not_exist while the
	// deleted shards close)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, _, body = p.do(t, "GET", "/_db_updates", "", true, 0)
		if st != 500 || time.Now().After(deadline) {
			break
		}
	}
	if st != 404 || strings.TrimSpace(body) != `{"error":"not_found","reason":"Database does not exist."}` {
		t.Errorf("without _global_changes: %d %s", st, body)
	}
	p.do(t, "PUT", "/dbud", "", true, 0)
	time.Sleep(time.Second)
	if st, _, b := p.do(t, "PUT", "/_global_changes", "", true, 0); st != 201 {
		t.Fatalf("PUT /_global_changes: %d %s", st, b)
	}
	p.do(t, "PUT", "/dbue", "", true, 0)
	p.waitEvents(t, "dbu", "dbue created")
}

func TestDBUpdates(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	dbUpdatesSteps(t, dbuPeer{s.URL, testserver.AdminUser, testserver.AdminPassword})
}

func TestDBUpdatesAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	dbUpdatesSteps(t, dbuPeer{cs.URL, cs.User, cs.Password})
}

// Events are kept across restarts, one per (type, db): a second write
// moves the db's "updated" row to a later seq.
func TestDBUpdatesRestartAndCoalescing(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	p := dbuPeer{s.URL, testserver.AdminUser, testserver.AdminPassword}
	p.do(t, "PUT", "/r1", "", true, 0)
	p.do(t, "PUT", "/r1/a", "{}", true, 0)
	f := p.waitEvents(t, "r", "r1 created", "r1 updated")
	var upd string
	for _, r := range f.Results {
		if r.Type == "updated" {
			upd = r.Seq
		}
	}
	s.Restart(t)
	after := p.feed(t, "")
	if !slices.Equal(events(after, "r"), []string{"r1 created", "r1 updated"}) || after.LastSeq != f.LastSeq {
		t.Fatalf("after restart: %+v, before %+v", after, f)
	}
	p.do(t, "PUT", "/r1/b", "{}", true, 0)
	p.do(t, "PUT", "/r2", "", true, 0)
	f2 := p.waitEvents(t, "r", "r1 created", "r1 updated", "r2 created")
	for _, r := range f2.Results {
		if r.Type == "updated" && r.Seq == upd {
			t.Errorf("r1's updated row did not move: %+v", f2)
		}
	}
	if got := p.feed(t, "?since="+f.LastSeq); len(got.Results) != 2 {
		t.Errorf("since before the restart: %+v", got)
	}
	// a seq of another node's feed starts over: never skip an event
	if got := p.feed(t, "?since=5-AAAAAAAAAAAAAAAAAAAAAA"); len(got.Results) != len(f2.Results) {
		t.Errorf("since of another feed: %+v", got)
	}
}
