package httpgw_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

func TestAllDocsMergesShardsInOrder(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/m?q=8", nil, nil)
	var ids []string
	for batch := range 3 {
		docs := nDocs(500, fmt.Sprintf("d%d-%%04d", batch))
		for _, d := range docs {
			ids = append(ids, d["_id"].(string))
		}
		bulkDocs(t, s, "m", docs)
	}
	sort.Strings(ids)

	tests := []struct {
		name  string
		query string
		want  []string
		off   int
	}{
		{"all", "", ids, 0},
		{"descending", "?descending=true", reversed(ids), 0},
		{"limit", "?limit=7", ids[:7], 0},
		{"skip-limit", "?skip=600&limit=10", ids[600:610], 600},
		{"startkey", `?startkey="d1-0000"&limit=3`, ids[500:503], 500},
		{"range-exclusive", `?startkey="d1-0000"&endkey="d1-0499"&inclusive_end=false`, ids[500:999], 500},
		{"descending-range", `?descending=true&startkey="d1-0002"&endkey="d1-0000"`, reversed(ids[500:503]), 997},
		{"key", `?key="d2-0042"`, []string{"d2-0042"}, 1042},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got allDocs
			mustCall(t, s, 200, "GET", "/m/_all_docs"+tc.query, nil, &got)
			var gotIDs []string
			for _, r := range got.Rows {
				gotIDs = append(gotIDs, r.ID)
			}
			if !slices.Equal(gotIDs, tc.want) {
				t.Fatalf("rows: got %d ids %v..., want %d %v...", len(gotIDs), head(gotIDs), len(tc.want), head(tc.want))
			}
			if *got.TotalRows != len(ids) {
				t.Errorf("total_rows %d, want %d", *got.TotalRows, len(ids))
			}
			if *got.Offset != tc.off {
				t.Errorf("offset %d, want %d", *got.Offset, tc.off)
			}
		})
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func TestChangesResumeAcrossShards(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/c?q=4", nil, nil)
	res := bulkDocs(t, s, "c", nDocs(300, "doc-%03d"))
	seen := map[string]int{}
	since := "0"
	for range 100 {
		var ch changes
		mustCall(t, s, 200, "GET", "/c/_changes?limit=45&since="+since, nil, &ch)
		for _, r := range ch.Results {
			seen[r.ID]++
		}
		since = ch.LastSeq
		if len(ch.Results) == 0 {
			break
		}
		if len(ch.Results) == 45 && ch.Pending != 300-len(seen) {
			t.Errorf("pending %d after %d rows, want %d", ch.Pending, len(seen), 300-len(seen))
		}
	}
	if len(seen) != 300 {
		t.Fatalf("saw %d distinct ids, want 300", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s seen %d times", id, n)
		}
	}
	// update three docs: only they appear after the old last_seq
	for _, i := range []int{3, 150, 299} {
		mustCall(t, s, 201, "PUT", "/c/"+res[i].ID, fmt.Sprintf(`{"_rev":%q,"v":2}`, res[i].Rev), nil)
	}
	var ch changes
	mustCall(t, s, 200, "GET", "/c/_changes?since="+since, nil, &ch)
	var got []string
	for _, r := range ch.Results {
		got = append(got, r.ID)
		if !strings.HasPrefix(r.Changes[0]["rev"], "2-") {
			t.Errorf("%s: rev %s, want generation 2", r.ID, r.Changes[0]["rev"])
		}
	}
	sort.Strings(got)
	if !slices.Equal(got, []string{"doc-003", "doc-150", "doc-299"}) {
		t.Fatalf("changes since last_seq: %v", got)
	}
	// the whole feed from 0 still has 300 rows (a doc moves to its new seq)
	mustCall(t, s, 200, "GET", "/c/_changes", nil, &ch)
	if len(ch.Results) != 300 {
		t.Fatalf("full feed: %d rows, want 300", len(ch.Results))
	}
}

func TestChangesLongpollWakesOnWrite(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/lp", nil, nil)
	done := make(chan changes, 1)
	go func() {
		var ch changes
		call(t, s, "GET", "/lp/_changes?feed=longpoll&since=now&timeout=20000", nil, &ch)
		done <- ch
	}()
	time.Sleep(200 * time.Millisecond)
	mustCall(t, s, 201, "PUT", "/lp/wake", `{"x":1}`, nil)
	select {
	case ch := <-done:
		if len(ch.Results) != 1 || ch.Results[0].ID != "wake" {
			t.Fatalf("longpoll answered %+v", ch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("longpoll did not wake on a write")
	}
}

func TestChangesContinuousStreamsAndHeartbeats(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/cf", nil, nil)
	mustCall(t, s, 201, "PUT", "/cf/first", `{}`, nil)
	req := s.NewRequest(t, "GET", "/cf/_changes?feed=continuous&heartbeat=50&since=0", nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("continuous feed stalled")
			return ""
		}
	}
	var row struct{ ID string }
	if err := json.Unmarshal([]byte(next()), &row); err != nil || row.ID != "first" {
		t.Fatalf("first row: %+v %v", row, err)
	}
	if l := next(); l != "" {
		t.Fatalf("expected a heartbeat (empty line), got %q", l)
	}
	mustCall(t, s, 201, "PUT", "/cf/second", `{}`, nil)
	for {
		l := next()
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil || row.ID != "second" {
			t.Fatalf("second row: %q %v", l, err)
		}
		break
	}
}

func TestConcurrentWritersAllAcknowledged(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/gc", nil, nil)
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	for w := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				id := fmt.Sprintf("w%02d-%02d", w, i)
				resp := s.Do(t, "PUT", "/gc/"+id, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- fmt.Sprintf("%s: %d", id, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var info struct {
		DocCount int `json:"doc_count"`
	}
	mustCall(t, s, 200, "GET", "/gc", nil, &info)
	if info.DocCount != 400 {
		t.Fatalf("doc_count %d, want 400", info.DocCount)
	}
}

func TestRevsLimitStemsHistory(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/st", nil, nil)
	mustCall(t, s, 200, "PUT", "/st/_revs_limit", "3", nil)
	var r bulkResult
	mustCall(t, s, 201, "PUT", "/st/doc", `{"v":0}`, &r)
	first := r.Rev
	for i := 1; i <= 9; i++ {
		mustCall(t, s, 201, "PUT", "/st/doc", fmt.Sprintf(`{"_rev":%q,"v":%d}`, r.Rev, i), &r)
	}
	var doc struct {
		Rev       string `json:"_rev"`
		Revisions struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		} `json:"_revisions"`
	}
	mustCall(t, s, 200, "GET", "/st/doc?revs=true", nil, &doc)
	if !strings.HasPrefix(doc.Rev, "10-") || doc.Revisions.Start != 10 || len(doc.Revisions.IDs) != 3 {
		t.Fatalf("after 10 edits with revs_limit 3: rev %s revisions %+v", doc.Rev, doc.Revisions)
	}
	mustCall(t, s, 404, "GET", "/st/doc?rev="+first, nil, nil)
}

func TestDeleteDatabaseLeavesNothing(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/gone", nil, nil)
	bulkDocs(t, s, "gone", nDocs(50, "g%02d"))
	mustCall(t, s, 200, "DELETE", "/gone", nil, nil)
	mustCall(t, s, 404, "GET", "/gone/g01", nil, nil)
	mustCall(t, s, 201, "PUT", "/gone", nil, nil)
	var ad allDocs
	mustCall(t, s, 200, "GET", "/gone/_all_docs", nil, &ad)
	if len(ad.Rows) != 0 || *ad.TotalRows != 0 {
		t.Fatalf("re-created db has %d rows (total %d)", len(ad.Rows), *ad.TotalRows)
	}
	s.Restart(t)
	mustCall(t, s, 200, "GET", "/gone/_all_docs", nil, &ad)
	if len(ad.Rows) != 0 {
		t.Fatalf("after restart: %d rows", len(ad.Rows))
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/p?q=3", nil, nil)
	bulkDocs(t, s, "p", nDocs(100, "p%03d"))
	mustCall(t, s, 201, "PUT", "/p/_local/cp", `{"seq":7}`, nil)
	var before changes
	mustCall(t, s, 200, "GET", "/p/_changes", nil, &before)
	s.Restart(t)
	var info struct {
		DocCount int `json:"doc_count"`
		Cluster  struct{ Q int }
	}
	mustCall(t, s, 200, "GET", "/p", nil, &info)
	if info.DocCount != 100 || info.Cluster.Q != 3 {
		t.Fatalf("after restart: %+v", info)
	}
	var after changes
	mustCall(t, s, 200, "GET", "/p/_changes?since="+before.LastSeq, nil, &after)
	if len(after.Results) != 0 || after.LastSeq != before.LastSeq {
		t.Fatalf("since old last_seq after restart: %d rows, last_seq %s vs %s", len(after.Results), after.LastSeq, before.LastSeq)
	}
	mustCall(t, s, 200, "GET", "/p/_local/cp", nil, nil)
	mustCall(t, s, 201, "PUT", "/p/new", `{}`, nil)
}

func TestChangesSeqInterval(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/si?q=1", nil, nil)
	bulkDocs(t, s, "si", nDocs(10, "s%02d"))
	var raw struct {
		Results []struct {
			Seq *string `json:"seq"`
		} `json:"results"`
		LastSeq string `json:"last_seq"`
	}
	mustCall(t, s, 200, "GET", "/si/_changes?seq_interval=3", nil, &raw)
	if len(raw.Results) != 10 || raw.LastSeq == "" {
		t.Fatalf("got %d rows, last_seq %q", len(raw.Results), raw.LastSeq)
	}
	var all struct {
		Results []struct {
			Seq string `json:"seq"`
		} `json:"results"`
	}
	mustCall(t, s, 200, "GET", "/si/_changes", nil, &all)
	for i, r := range raw.Results {
		// CouchDB's rows with a seq: where fabric's countdown from the
		// limit (10^15 without one) is a multiple of the interval
		if want := (1_000_000_000_000_000-i)%3 == 0; (r.Seq != nil) != want {
			t.Errorf("row %d: seq %v, want present=%v", i, r.Seq, want)
		}
		// the seqs shown are those of the same rows without seq_interval
		if r.Seq != nil && *r.Seq != all.Results[i].Seq {
			t.Errorf("row %d: seq %s, without seq_interval %s", i, *r.Seq, all.Results[i].Seq)
		}
	}
}

func TestAttachmentsCompressedLikeCouchDB(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/at", nil, nil)
	text := strings.Repeat("hello settee ", 200)
	var r bulkResult
	mustCall(t, s, 201, "PUT", "/at/doc", fmt.Sprintf(`{"_attachments":{"t.txt":{"content_type":"text/plain","data":%q},"b.bin":{"content_type":"application/octet-stream","data":"AAEC"}}}`,
		base64.StdEncoding.EncodeToString([]byte(text))), &r)

	var doc struct {
		Atts map[string]struct {
			Encoding      string `json:"encoding"`
			EncodedLength int    `json:"encoded_length"`
			Length        int    `json:"length"`
			Data          string `json:"data"`
		} `json:"_attachments"`
	}
	mustCall(t, s, 200, "GET", "/at/doc?att_encoding_info=true", nil, &doc)
	ta := doc.Atts["t.txt"]
	if ta.Encoding != "gzip" || ta.Length != len(text) || ta.EncodedLength <= 0 || ta.EncodedLength >= len(text) {
		t.Fatalf("text attachment stub: %+v", ta)
	}
	if doc.Atts["b.bin"].Encoding != "" {
		t.Fatalf("binary attachment was compressed: %+v", doc.Atts["b.bin"])
	}
	// inline data is the identity bytes
	mustCall(t, s, 200, "GET", "/at/doc?attachments=true", nil, &doc)
	if got, _ := base64.StdEncoding.DecodeString(doc.Atts["t.txt"].Data); string(got) != text {
		t.Fatalf("inline data decoded to %d bytes, want %d", len(got), len(text))
	}
	// a client without gzip gets identity bytes; one with gzip the stored ones
	for _, tc := range []struct{ ae, wantEnc string }{{"", ""}, {"gzip, deflate", "gzip"}} {
		req := s.NewRequest(t, "GET", "/at/doc/t.txt", nil)
		req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
		if tc.ae != "" {
			req.Header.Set("Accept-Encoding", tc.ae)
		}
		tr := &http.Transport{DisableCompression: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != tc.wantEnc {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q", tc.ae, resp.Header.Get("Content-Encoding"))
		}
		if tc.wantEnc == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		}
		if string(body) != text || resp.Header.Get("Content-Type") != "text/plain" {
			t.Fatalf("Accept-Encoding %q: %d bytes, type %q", tc.ae, len(body), resp.Header.Get("Content-Type"))
		}
	}
	// COPY keeps the attachment and its encoding
	req := s.NewRequest(t, "COPY", "/at/doc", nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	req.Header.Set("Destination", "copy")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("COPY: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	mustCall(t, s, 200, "GET", "/at/copy?attachments=true", nil, &doc)
	if got, _ := base64.StdEncoding.DecodeString(doc.Atts["t.txt"].Data); string(got) != text {
		t.Fatalf("copied attachment: %d bytes", len(got))
	}
}

func TestAllDocsQueriesAndDocIDBounds(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/aq", nil, nil)
	bulkDocs(t, s, "aq", nDocs(10, "k%d"))
	var res struct {
		Results []allDocs `json:"results"`
	}
	mustCall(t, s, 200, "POST", "/aq/_all_docs/queries", `{"queries":[{"keys":["k3","k1"]},{"limit":2,"skip":1},{"startkey":"k8","include_docs":true}]}`, &res)
	if len(res.Results) != 3 {
		t.Fatalf("%d results", len(res.Results))
	}
	ids := func(a allDocs) (out []string) {
		for _, r := range a.Rows {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids(res.Results[0]); !slices.Equal(got, []string{"k3", "k1"}) {
		t.Errorf("keys query: %v", got)
	}
	if got := ids(res.Results[1]); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Errorf("limit/skip query: %v", got)
	}
	if got := ids(res.Results[2]); !slices.Equal(got, []string{"k8", "k9"}) || len(res.Results[2].Rows[0].Doc) == 0 {
		t.Errorf("startkey include_docs query: %v", got)
	}
	var ad allDocs
	mustCall(t, s, 200, "GET", "/aq/_all_docs?startkey_docid=k7&endkey_docid=k8", nil, &ad)
	if got := ids(ad); !slices.Equal(got, []string{"k7", "k8"}) {
		t.Errorf("startkey_docid/endkey_docid: %v", got)
	}
}

func TestDBsInfoAndAllDBs(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, db := range []string{"a1", "a2", "a3"} {
		mustCall(t, s, 201, "PUT", "/"+db, nil, nil)
	}
	var names []string
	mustCall(t, s, 200, "GET", `/_all_dbs?startkey="a2"&limit=5`, nil, &names)
	if !slices.Equal(names, []string{"a2", "a3"}) {
		t.Fatalf("_all_dbs: %v", names)
	}
	var infos []struct {
		Key   string         `json:"key"`
		Info  map[string]any `json:"info"`
		Error string         `json:"error"`
	}
	mustCall(t, s, 200, "POST", "/_dbs_info", `{"keys":["a1","nope"]}`, &infos)
	if len(infos) != 2 || infos[0].Info["db_name"] != "a1" || infos[1].Error != "not_found" {
		t.Fatalf("_dbs_info: %+v", infos)
	}
	// non-admins may not list databases
	req := s.NewRequest(t, "GET", "/_all_dbs", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("anonymous _all_dbs: %d", resp.StatusCode)
	}
}

func TestNodeStatsSystemVersions(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 200, "GET", "/_up", nil, nil)
	var st struct {
		CouchDB struct {
			Httpd struct {
				Requests struct{ Value int } `json:"requests"`
			} `json:"httpd"`
		} `json:"couchdb"`
	}
	mustCall(t, s, 200, "GET", "/_node/_local/_stats", nil, &st)
	if st.CouchDB.Httpd.Requests.Value < 1 {
		t.Fatalf("_stats requests: %+v", st)
	}
	var sys struct{ Goroutines int }
	mustCall(t, s, 200, "GET", "/_node/_local/_system", nil, &sys)
	if sys.Goroutines < 1 {
		t.Fatalf("_system: %+v", sys)
	}
	var v struct {
		Settee map[string]string `json:"settee"`
		Go     string            `json:"go"`
	}
	mustCall(t, s, 200, "GET", "/_node/settee@127.0.0.1/_versions", nil, &v)
	if v.Go == "" || v.Settee["version"] == "" {
		t.Fatalf("_versions: %+v", v)
	}
	mustCall(t, s, 404, "GET", "/_node/nobody@nowhere/_stats", nil, nil)
}

// ?r= is a doc read's quorum: any positive count is taken (capped by the
// copies there are); anything else stands for the default, as CouchDB
// never refuses one (it answered 200 to r=abc, r=-1 and r=).
func TestReadQuorumParam(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/rq", nil, nil)
	mustCall(t, s, 201, "PUT", "/rq/d", `{"v":1}`, nil)
	for _, q := range []string{"r=1", "r=3", "r=1&open_revs=all", "r=x", "r=-1", "r=", "r=x&open_revs=all"} {
		resp := s.Do(t, "GET", "/rq/d?"+q, "")
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET ?%s: %d", q, resp.StatusCode)
		}
	}
}

// ?w= is a write's quorum on every write, attachments included; a value
// that is not a positive count stands for the default (CouchDB answered
// 201 to w=abc, w=-1, w=1.5 and w=).
func TestWriteQuorumParam(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/wq", nil, nil)
	var d struct{ Rev string }
	mustCall(t, s, 201, "PUT", "/wq/d?w=1", `{"v":1}`, &d)
	mustCall(t, s, 201, "PUT", "/wq/d/a.txt?w=1&rev="+d.Rev, "hello", &d)
	mustCall(t, s, 201, "PUT", "/wq/d?w=x&rev="+d.Rev, `{"v":2}`, &d)
	mustCall(t, s, 201, "PUT", "/wq/d/b.txt?w=x&rev="+d.Rev, "b", &d)
	mustCall(t, s, 200, "DELETE", "/wq/d/b.txt?w=-1&rev="+d.Rev, nil, &d)
	mustCall(t, s, 201, "POST", "/wq/_bulk_docs?w=1.5", `{"docs":[{"_id":"e"}]}`, nil)
	mustCall(t, s, 200, "DELETE", "/wq/d?w=&rev="+d.Rev, nil, &d)
	mustCall(t, s, 404, "GET", "/wq/d", nil, nil)
}

// A node without --node-addr is a finished single node in CouchDB's
// terms, and cannot add nodes.
func TestClusterSetupOnASingleNode(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	var st struct{ State string }
	mustCall(t, s, 200, "GET", "/_cluster_setup", nil, &st)
	if st.State != "single_node_enabled" {
		t.Errorf("state %q, want single_node_enabled", st.State)
	}
	for _, tc := range []struct {
		body, reason string
	}{
		{`{"action":"add_node","host":"127.0.0.1","port":5985,"username":"a","password":"b"}`, "--node-addr"},
		{`{"action":"enable_cluster","bind_address":"0.0.0.0","username":"a","password":"b","node_count":3}`, "--node-addr"},
		// its system databases exist: CouchDB's finish_cluster finds
		// them and answers this
		{`{"action":"finish_cluster"}`, "Cluster is already finished"},
	} {
		var e struct{ Error, Reason string }
		mustCall(t, s, 400, "POST", "/_cluster_setup", tc.body, &e)
		if e.Error != "bad_request" || !strings.Contains(e.Reason, tc.reason) {
			t.Errorf("%s on a single node: %+v, want bad_request %q", tc.body, e, tc.reason)
		}
	}
	// what single-node setup scripts and Fauxton's wizard send: CouchDB
	// answers 201, also on a node that is set up already
	var ok struct{ Ok bool }
	mustCall(t, s, 201, "POST", "/_cluster_setup", `{"action":"enable_single_node","username":"admin","password":"pw","bind_address":"0.0.0.0","port":5984,"singlenode":true}`, &ok)
	if !ok.Ok {
		t.Errorf("enable_single_node: %+v, want ok", ok)
	}
	mustCall(t, s, 200, "GET", "/_cluster_setup", nil, &st)
	if st.State != "single_node_enabled" {
		t.Errorf("state after enable_single_node %q, want single_node_enabled", st.State)
	}
}

// A database's shard map is its document in the _dbs system database, in
// CouchDB's shape: by_range and by_node agree with GET /db/_shards, the
// changelog adds every copy, the suffix is the creation time.
func TestDbsDocumentIsTheShardMap(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/mapped?q=2", nil, nil)
	var shards struct{ Shards map[string][]string }
	mustCall(t, s, 200, "GET", "/mapped/_shards", nil, &shards)
	var doc struct {
		ID        string              `json:"_id"`
		Rev       string              `json:"_rev"`
		Suffix    []int               `json:"shard_suffix"`
		Changelog [][]string          `json:"changelog"`
		ByNode    map[string][]string `json:"by_node"`
		ByRange   map[string][]string `json:"by_range"`
	}
	mustCall(t, s, 200, "GET", "/_node/_local/_dbs/mapped", nil, &doc)
	if doc.ID != "mapped" || !strings.HasPrefix(doc.Rev, "1-") || len(doc.ByRange) != 2 || len(doc.Changelog) != 2 {
		t.Fatalf("_dbs doc: %+v", doc)
	}
	for r, nodes := range shards.Shards {
		if strings.Join(doc.ByRange[r], ",") != strings.Join(nodes, ",") {
			t.Errorf("by_range[%s] = %v, _shards says %v", r, doc.ByRange[r], nodes)
		}
	}
	if got := doc.ByNode["settee@127.0.0.1"]; len(got) != 2 || got[0] != "00000000-7fffffff" || got[1] != "80000000-ffffffff" {
		t.Errorf("by_node: %v", doc.ByNode)
	}
	if doc.Changelog[0][0] != "add" || doc.Changelog[0][1] != "00000000-7fffffff" || doc.Changelog[0][2] != "settee@127.0.0.1" {
		t.Errorf("changelog: %v", doc.Changelog)
	}
	if len(doc.Suffix) < 2 || doc.Suffix[0] != '.' {
		t.Errorf("shard_suffix: %v", doc.Suffix)
	}
	var all struct {
		Rows []struct {
			ID    string
			Value struct{ Rev string }
		}
	}
	mustCall(t, s, 200, "GET", "/_node/_local/_dbs/_all_docs", nil, &all)
	found := false
	for _, r := range all.Rows {
		found = found || (r.ID == "mapped" && r.Value.Rev == doc.Rev)
	}
	if !found {
		t.Errorf("_dbs/_all_docs lacks mapped at %s: %+v", doc.Rev, all.Rows)
	}
	mustCall(t, s, 404, "GET", "/_node/_local/_dbs/nope", nil, nil)
	mustCall(t, s, 405, "PUT", "/_node/_local/_dbs/mapped", `{}`, nil)
}
