package httpgw_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// selChanges posts a filter=_selector request and decodes the answer.
func selChanges(t *testing.T, s *testserver.Server, db, query, selector string) changes {
	t.Helper()
	var ch changes
	mustCall(t, s, 200, "POST", "/"+db+"/_changes?filter=_selector"+query, `{"selector":`+selector+`}`, &ch)
	return ch
}

func changeIDs(ch changes) []string {
	var ids []string
	for _, r := range ch.Results {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestChangesSelectorFilter: POST _changes?filter=_selector sends the
// changes whose winning revision matches the selector, as CouchDB does:
// a deleted doc only when its tombstone matches, last_seq past the changes
// left out, limit counting rows sent, since resuming after a row,
// include_docs only when asked, style=all_docs listing the leaves that
// match; continuous and eventsource feeds filter too.
func TestChangesSelectorFilter(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/sel?q=4", nil, nil)
	var docs []map[string]any
	for i := range 20 {
		docs = append(docs, map[string]any{"_id": fmt.Sprintf("d%02d", i), "n": i, "type": []string{"a", "b"}[i%2],
			"meta": map[string]any{"tier": i % 3}})
	}
	res := bulkDocs(t, s, "sel", docs)
	// d00 is deleted with an empty tombstone, d02 with one that still
	// says type a (CouchDB matches the tombstone's body)
	mustCall(t, s, 200, "DELETE", "/sel/d00?rev="+res[0].Rev, nil, nil)
	mustCall(t, s, 201, "POST", "/sel/_bulk_docs", fmt.Sprintf(`{"docs":[{"_id":"d02","_rev":%q,"_deleted":true,"type":"a"}]}`, res[2].Rev), nil)

	var all changes
	mustCall(t, s, 200, "GET", "/sel/_changes", nil, &all)
	if len(all.Results) != 20 {
		t.Fatalf("unfiltered feed: %d rows", len(all.Results))
	}
	// the order of the unfiltered feed, restricted to want
	order := func(want func(id string) bool) []string {
		var ids []string
		for _, r := range all.Results {
			if want(r.ID) {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	// type a: the even docs, d02's tombstone too, not d00's
	typeA := func(id string) bool {
		var n int
		fmt.Sscanf(id, "d%d", &n)
		return n%2 == 0 && n != 0
	}

	ch := selChanges(t, s, "sel", "", `{"type":"a"}`)
	if got, want := changeIDs(ch), order(typeA); !slices.Equal(got, want) {
		t.Fatalf("type a: %v, want %v", got, want)
	}
	for _, r := range ch.Results {
		if r.Deleted != (r.ID == "d02") || r.Doc != nil {
			t.Fatalf("row %+v", r)
		}
	}
	if ch.LastSeq != all.LastSeq || ch.Pending != 0 {
		t.Fatalf("last_seq %s pending %d, want the feed's end %s and 0", ch.LastSeq, ch.Pending, all.LastSeq)
	}

	// nested fields, operators, and a selector nothing matches: no rows,
	// last_seq still at the end
	ch = selChanges(t, s, "sel", "", `{"meta.tier":2,"n":{"$gte":5,"$lt":15},"$or":[{"type":"a"},{"n":{"$in":[11,17]}}]}`)
	if got := changeIDs(ch); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"d08", "d11", "d14"}) {
		t.Fatalf("nested selector: %v", got)
	}
	ch = selChanges(t, s, "sel", "", `{"type":"c"}`)
	if len(ch.Results) != 0 || ch.LastSeq != all.LastSeq {
		t.Fatalf("nothing matches: %+v, want last_seq %s", ch, all.LastSeq)
	}
	// deleted docs are seen with _deleted
	ch = selChanges(t, s, "sel", "", `{"_deleted":true}`)
	if got := changeIDs(ch); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"d00", "d02"}) || !ch.Results[0].Deleted {
		t.Fatalf("_deleted: %+v", ch.Results)
	}

	// limit counts the rows sent; since resumes after the last of them
	want := order(typeA)
	ch = selChanges(t, s, "sel", "&limit=3", `{"type":"a"}`)
	if got := changeIDs(ch); !slices.Equal(got, want[:3]) || ch.LastSeq != ch.Results[2].Seq {
		t.Fatalf("limit=3: %v last_seq %s, want %v and the third row's seq", got, ch.LastSeq, want[:3])
	}
	ch = selChanges(t, s, "sel", "&since="+ch.LastSeq, `{"type":"a"}`)
	if got := changeIDs(ch); !slices.Equal(got, want[3:]) || ch.LastSeq != all.LastSeq {
		t.Fatalf("since the third: %v, want %v", got, want[3:])
	}

	// include_docs: the matching docs, whole
	ch = selChanges(t, s, "sel", "&include_docs=true", `{"n":{"$gt":17}}`)
	if len(ch.Results) != 2 {
		t.Fatalf("include_docs: %+v", ch.Results)
	}
	for _, r := range ch.Results {
		var d map[string]any
		if err := json.Unmarshal(r.Doc, &d); err != nil || d["_id"] != r.ID || d["n"].(float64) <= 17 || d["_rev"] != r.Changes[0]["rev"] {
			t.Fatalf("doc %s: %s", r.ID, r.Doc)
		}
	}

	// a change that does not match moves last_seq on and sends nothing
	mustCall(t, s, 201, "PUT", "/sel/x1", `{"type":"b"}`, nil)
	ch = selChanges(t, s, "sel", "&since="+all.LastSeq, `{"type":"a"}`)
	if len(ch.Results) != 0 || ch.LastSeq == all.LastSeq {
		t.Fatalf("after a non-matching write: %+v (since %s)", ch, all.LastSeq)
	}

	// style=all_docs: each leaf is matched; a row lists the ones that do
	mustCall(t, s, 201, "POST", "/sel/_bulk_docs", `{"new_edits":false,"docs":[`+
		`{"_id":"cf","_rev":"2-ffffffffffffffffffffffffffffffff","type":"b","_revisions":{"start":2,"ids":["ffffffffffffffffffffffffffffffff","11111111111111111111111111111111"]}},`+
		`{"_id":"cf","_rev":"1-22222222222222222222222222222222","type":"a"}]}`, nil)
	ch = selChanges(t, s, "sel", "&style=all_docs&since="+all.LastSeq, `{"type":"a"}`)
	if len(ch.Results) != 1 || ch.Results[0].ID != "cf" || len(ch.Results[0].Changes) != 1 ||
		ch.Results[0].Changes[0]["rev"] != "1-22222222222222222222222222222222" {
		t.Fatalf("all_docs, a losing leaf matches: %+v", ch.Results)
	}
	ch = selChanges(t, s, "sel", "&since="+all.LastSeq, `{"type":"a"}`)
	if len(ch.Results) != 0 {
		t.Fatalf("main_only, the winner does not match: %+v", ch.Results)
	}
	ch = selChanges(t, s, "sel", "&style=all_docs&since="+all.LastSeq, `{"type":"b"}`)
	if len(ch.Results) != 2 || ch.Results[1].ID != "cf" || len(ch.Results[1].Changes) != 1 ||
		ch.Results[1].Changes[0]["rev"] != "2-ffffffffffffffffffffffffffffffff" {
		t.Fatalf("all_docs, the winner matches: %+v", ch.Results)
	}
	// the winner is seen with its _conflicts, as CouchDB opens it
	ch = selChanges(t, s, "sel", "&since="+all.LastSeq, `{"_conflicts":{"$exists":true}}`)
	if got := changeIDs(ch); !slices.Equal(got, []string{"cf"}) {
		t.Fatalf("_conflicts: %v", got)
	}

	// continuous and eventsource: the matching rows, then the end
	resp := s.Do(t, "POST", "/sel/_changes?feed=continuous&timeout=200&filter=_selector", `{"selector":{"n":{"$gte":18}}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last2 := order(func(id string) bool { return id == "d18" || id == "d19" })
	if len(lines) != 3 || !strings.Contains(lines[0], `"id":"`+last2[0]+`"`) || !strings.Contains(lines[1], `"id":"`+last2[1]+`"`) {
		t.Fatalf("continuous: %q", lines)
	}
	var end struct {
		LastSeq string `json:"last_seq"`
	}
	if err := json.Unmarshal([]byte(lines[2]), &end); err != nil || end.LastSeq == all.LastSeq || end.LastSeq == "" {
		t.Fatalf("continuous end %q (the feed goes past x1 and cf)", lines[2])
	}
	resp = s.Do(t, "POST", "/sel/_changes?feed=eventsource&timeout=200&filter=_selector", `{"selector":{"n":19}}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(b), "data: "); n != 1 || !strings.Contains(string(b), `"id":"d19"`) {
		t.Fatalf("eventsource: %q", b)
	}
}

// TestChangesSelectorOperators: filter=_selector matches with the array,
// string and type operators (mango: $elemMatch $allMatch $regex
// $beginsWith $size $mod $type $all $keyMapMatch) as CouchDB's
// mango_selector does, over the whole path from the request to the rows.
func TestChangesSelectorOperators(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/selops?q=2", nil, nil)
	bulkDocs(t, s, "selops", []map[string]any{
		{"_id": "ann", "name": "Ann Smith", "n": 4, "scores": []any{70, 92}, "tags": []any{"a", "b"}, "m": map[string]any{"red": 1}},
		{"_id": "bob", "name": "Bob Jones", "n": 5, "scores": []any{50, 60}, "tags": []any{"b"}, "m": map[string]any{}},
		{"_id": "cy", "name": "cy smith", "n": "5", "scores": []any{}, "tags": "a", "m": []any{"red"}},
	})
	for _, c := range []struct {
		sel  string
		want []string
	}{
		{`{"scores":{"$elemMatch":{"$gte":90}}}`, []string{"ann"}},
		{`{"scores":{"$elemMatch":{"$lt":90}}}`, []string{"ann", "bob"}},
		{`{"name":{"$regex":"(?i)smith$"}}`, []string{"ann", "cy"}},
		{`{"name":{"$regex":"^[A-Z]"},"scores":{"$elemMatch":{"$lt":55}}}`, []string{"bob"}},
		{`{"scores":{"$allMatch":{"$gte":60}}}`, []string{"ann"}}, // cy's empty array does not match
		{`{"name":{"$beginsWith":"Bob"}}`, []string{"bob"}},
		{`{"scores":{"$size":0}}`, []string{"cy"}},
		{`{"n":{"$mod":[2,1]}}`, []string{"bob"}}, // cy's "5" is no integer
		{`{"n":{"$type":"string"}}`, []string{"cy"}},
		{`{"tags":{"$all":["b","a"]}}`, []string{"ann"}},
		{`{"m":{"$keyMapMatch":{"$eq":"red"}}}`, []string{"ann"}},
	} {
		got := changeIDs(selChanges(t, s, "selops", "", c.sel))
		if slices.Sort(got); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.sel, got, c.want)
		}
	}
}

// TestChangesSelectorLongpoll: a longpoll with filter=_selector is not
// answered by a change the selector leaves out; it waits on, and answers
// the first change that matches.
func TestChangesSelectorLongpoll(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/lps?q=2", nil, nil)
	done := make(chan changes, 1)
	go func() {
		var ch changes
		call(t, s, "POST", "/lps/_changes?feed=longpoll&since=now&timeout=20000&filter=_selector", `{"selector":{"type":"a"}}`, &ch)
		done <- ch
	}()
	time.Sleep(200 * time.Millisecond)
	mustCall(t, s, 201, "PUT", "/lps/b1", `{"type":"b"}`, nil)
	mustCall(t, s, 201, "PUT", "/lps/b2", `{"type":"b"}`, nil)
	select {
	case ch := <-done:
		t.Fatalf("a non-matching change answered the longpoll: %+v", ch)
	case <-time.After(700 * time.Millisecond):
	}
	mustCall(t, s, 201, "PUT", "/lps/a1", `{"type":"a"}`, nil)
	select {
	case ch := <-done:
		var now changes
		mustCall(t, s, 200, "GET", "/lps/_changes?since=now", nil, &now)
		if !slices.Equal(changeIDs(ch), []string{"a1"}) || ch.LastSeq != now.LastSeq {
			t.Fatalf("longpoll answered %+v, want a1 and last_seq %s", ch, now.LastSeq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("longpoll did not wake on a matching write")
	}

	// nothing matching by the timeout: an empty answer past what was seen
	var before changes
	mustCall(t, s, 200, "GET", "/lps/_changes?since=now", nil, &before)
	go func() {
		var ch changes
		call(t, s, "POST", "/lps/_changes?feed=longpoll&since=now&timeout=600&filter=_selector", `{"selector":{"type":"a"}}`, &ch)
		done <- ch
	}()
	time.Sleep(200 * time.Millisecond)
	mustCall(t, s, 201, "PUT", "/lps/b3", `{"type":"b"}`, nil)
	select {
	case ch := <-done:
		if len(ch.Results) != 0 || ch.LastSeq == before.LastSeq {
			t.Fatalf("timed-out longpoll: %+v (before %s)", ch, before.LastSeq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("longpoll outlived its timeout")
	}
}

// TestChangesDesignFilter: filter=_design sends only design docs, by GET
// or POST; pending counts the changes not sent, as CouchDB's lookup of
// design docs does.
func TestChangesDesignFilter(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/dd?q=2", nil, nil)
	bulkDocs(t, s, "dd", nDocs(6, "doc-%d"))
	mustCall(t, s, 201, "PUT", "/dd/_design/one", `{"views":{}}`, nil)
	mustCall(t, s, 201, "PUT", "/dd/_local/cp", `{"x":1}`, nil)
	mustCall(t, s, 201, "PUT", "/dd/_design/two", `{}`, nil)
	for _, m := range []string{"GET", "POST"} {
		var body any
		if m == "POST" {
			body = `{}`
		}
		var ch changes
		mustCall(t, s, 200, m, "/dd/_changes?filter=_design", body, &ch)
		if got := changeIDs(ch); !slices.Equal(got, []string{"_design/one", "_design/two"}) || ch.Pending != 6 {
			t.Fatalf("%s filter=_design: %v pending %d", m, got, ch.Pending)
		}
	}
}

// TestChangesFilterErrors: bad filter requests get CouchDB's status, error
// and reason (couch_changes:configure_filter, chttpd_db).
func TestChangesFilterErrors(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/fe", nil, nil)
	cases := []struct {
		method, query string
		body          any
		status        int
		err, reason   string
	}{
		{"GET", "filter=_selector", nil, 400, "bad_request", "Selector must be specified in POST payload"},
		{"GET", `filter=_selector&selector={"a":1}`, nil, 400, "bad_request", "Selector must be specified in POST payload"},
		{"POST", "filter=_selector", `{}`, 400, "bad_request", "Selector error: expected a JSON object"},
		{"POST", "filter=_selector", `{"selector":[1]}`, 400, "bad_request", "Selector error: expected a JSON object"},
		{"POST", "filter=_selector", `{"selector":"x"}`, 400, "bad_request", "Selector error: expected a JSON object"},
		{"POST", "filter=_selector", `{"selector":{"a":{"$foo":1}}}`, 400, "bad_request", "Invalid operator: $foo"},
		{"POST", "filter=_selector", `{"selector":{"a":{"$in":5}}}`, 400, "bad_request", "Bad argument for operator $in: 5"},
		{"POST", "filter=_selector", `{"selector":{"$gt":5}}`, 400, "bad_request", "One or more conditions is missing a field name."},
		{"POST", "filter=_selector", `{"selector":{"a":{"$regex":"("}}}`, 400, "bad_request", `Bad argument for operator $regex: "("`},
		{"POST", "filter=_selector", `{"selector":{"a":{"$elemMatch":3}}}`, 400, "bad_request", "Bad argument for operator $elemMatch: 3"},
		{"POST", "filter=_selector", `{"selector":{"a":{"$mod":[0,1]}}}`, 400, "bad_request", "Bad argument for operator $mod: [0,1]"},
		{"POST", "filter=_selector", `{"selector":{"a":{"$beginsWith":1}}}`, 400, "bad_request", "Invalid operator: $beginsWith"},
		{"POST", "filter=_selector", `{"selector":{"a":{"$text":"x"}}}`, 400, "bad_request", "Unsupported operator: $text"},
		{"POST", "filter=_selector", `{"selector":`, 400, "bad_request", "invalid UTF-8 JSON"},
		{"POST", "filter=_selector", `[1]`, 400, "bad_request", "Request body must be a JSON object"},
		{"POST", "filter=_nope", `{}`, 400, "bad_request", "unknown builtin filter name"},
		{"GET", "filter=_nope", nil, 400, "bad_request", "unknown builtin filter name"},
		{"GET", "filter=nope", nil, 400, "bad_request", "`filter` must be of the form `designname/filtername`"},
		{"GET", "filter=_view", nil, 400, "bad_request", "`view` filter parameter is not provided."},
	}
	for _, c := range cases {
		var e struct{ Error, Reason string }
		if st := call(t, s, c.method, "/fe/_changes?"+c.query, c.body, &e); st != c.status || e.Error != c.err || e.Reason != c.reason {
			t.Errorf("%s ?%s %v: %d %+v, want %d %s %q", c.method, c.query, c.body, st, e, c.status, c.err, c.reason)
		}
	}
	// a name of slashes alone is no filter, as in CouchDB
	mustCall(t, s, 200, "GET", "/fe/_changes?filter=/", nil, nil)
	// the selector's body is JSON: another content type is CouchDB's 415
	req := s.NewRequest(t, "POST", "/fe/_changes?filter=_selector", `{"selector":{}}`)
	req.Header.Set("Content-Type", "text/plain")
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Error, Reason string }
	_ = json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 415 || e.Error != "bad_content_type" {
		t.Fatalf("text/plain: %d %+v", resp.StatusCode, e)
	}
}
