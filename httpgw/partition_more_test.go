package httpgw_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
)

// Issue 19, what must stay unchanged or survive: a partition's counts and
// sizes through compaction, purge and a restart, max_partition_size on
// the stored sizes after a restart, replication between partitioned and
// plain databases, and the _changes of a partitioned db. Each test runs
// on settee and, as ...AsCouchDB, on Apache CouchDB 3.5.2, whose answers
// the assertions are.

// partInfo is GET /db/_partition/P.
type partInfo struct {
	DbName string `json:"db_name"`
	Sizes  struct {
		Active   int64 `json:"active"`
		External int64 `json:"external"`
	} `json:"sizes"`
	Partition   string `json:"partition"`
	DocCount    int    `json:"doc_count"`
	DocDelCount int    `json:"doc_del_count"`
}

// pmCall sends a request, fails t unless the status is want, and decodes
// the answer into out (if not nil).
func pmCall(c caller, want int, method, path, body string, out any) string {
	c.t.Helper()
	resp, b := c.do(method, path, body, nil)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(b), out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return b
}

func pmPart(c caller, db, p string) partInfo {
	c.t.Helper()
	var pi partInfo
	pmCall(c, 200, "GET", "/"+db+"/_partition/"+p, "", &pi)
	return pi
}

func pmParts(c caller, db string, ps []string) map[string]partInfo {
	c.t.Helper()
	m := map[string]partInfo{}
	for _, p := range ps {
		m[p] = pmPart(c, db, p)
	}
	return m
}

// pmPut writes a doc (its body compact JSON, no _id) and returns its rev.
func pmPut(c caller, db, id, body string) string {
	c.t.Helper()
	var r struct{ Rev string }
	pmCall(c, 201, "PUT", "/"+db+"/"+id, body, &r)
	return r.Rev
}

func pmDelete(c caller, db, id, rev string) string {
	c.t.Helper()
	var r struct{ Rev string }
	pmCall(c, 200, "DELETE", "/"+db+"/"+id+"?rev="+rev, "", &r)
	return r.Rev
}

// pmEdit updates id n times, each body of a different size; it returns
// the last rev and the last body.
func pmEdit(c caller, db, id, rev string, n int) (string, string) {
	c.t.Helper()
	var body string
	for i := range n {
		body = fmt.Sprintf(`{"round":%d,"pad":"%s"}`, i, strings.Repeat("e", 10+(i*37)%200))
		with := `{"_rev":"` + rev + `",` + body[1:]
		var r struct{ Rev string }
		pmCall(c, 201, "PUT", "/"+db+"/"+id, with, &r)
		rev = r.Rev
	}
	return rev, body
}

// pmCompact compacts db and waits until its info says compact_running
// false (twice in a row: CouchDB starts each shard's compaction a moment
// after the 202).
func pmCompact(c caller, db string) {
	c.t.Helper()
	pmCall(c, 202, "POST", "/"+db+"/_compact", "{}", nil)
	deadline := time.Now().Add(60 * time.Second)
	idle := 0
	for idle < 2 {
		var info struct {
			CompactRunning bool `json:"compact_running"`
		}
		pmCall(c, 200, "GET", "/"+db, "", &info)
		if info.CompactRunning {
			idle = 0
		} else {
			idle++
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("compaction of %s still running after 60s", db)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// compactPurgeSeed writes the docs of partitionCompactPurge: alice, bob
// and carol with docs edited many times and deleted ones. It returns
// the revs and the live docs' bodies by id.
func compactPurgeSeed(c caller, db string) (revs, bodies map[string]string) {
	c.t.Helper()
	revs, bodies = map[string]string{}, map[string]string{}
	for _, p := range []string{"alice", "bob", "carol"} {
		for i := 1; i <= 5; i++ {
			id := fmt.Sprintf("%s:%d", p, i)
			body := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("p", 20*i))
			revs[id], bodies[id] = pmPut(c, db, id, body), body
		}
	}
	for _, id := range []string{"alice:1", "bob:1", "carol:3"} {
		revs[id], bodies[id] = pmEdit(c, db, id, revs[id], 25)
	}
	for _, id := range []string{"alice:5", "bob:5", "bob:4"} {
		revs[id] = pmDelete(c, db, id, revs[id])
		delete(bodies, id)
	}
	// carol:c in conflict: two leaves, 1-bbbb the winner
	pmCall(c, 201, "POST", "/"+db+"/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"carol:c","_rev":"1-aaaa","v":"a"},{"_id":"carol:c","_rev":"1-bbbb","v":"bbbbbbbbbb"}]}`, nil)
	return revs, bodies
}

// partitionCompactPurge: compaction changes no partition's counts nor
// its external size; a purge takes the purged docs out of them.
func partitionCompactPurge(t *testing.T, base, user, pw string) {
	c := caller{t, base, user, pw}
	db := "pcp"
	pmCall(c, 201, "PUT", "/"+db+"?partitioned=true", "", nil)
	revs, bodies := compactPurgeSeed(c, db)
	parts := []string{"alice", "bob", "carol", "nobody"}
	before := pmParts(c, db, parts)
	// what the seed makes: 5 docs each, alice one deleted, bob two,
	// carol a sixth in conflict
	for p, want := range map[string][2]int{"alice": {4, 1}, "bob": {3, 2}, "carol": {6, 0}, "nobody": {0, 0}} {
		if got := before[p]; got.DocCount != want[0] || got.DocDelCount != want[1] {
			t.Errorf("%s before compaction: doc_count %d doc_del_count %d, want %d and %d", p, got.DocCount, got.DocDelCount, want[0], want[1])
		}
	}
	// CouchDB's external is the JSON bodies of every leaf of every doc:
	// a deleted leaf's {} (2), both leaves of carol:c (9 and 18)
	for p, extra := range map[string]int64{"alice": 2, "bob": 2 * 2, "carol": 9 + 18} {
		want := extra
		for id, b := range bodies {
			if strings.HasPrefix(id, p+":") {
				want += int64(len(b))
			}
		}
		if got := before[p].Sizes.External; got != want {
			t.Errorf("%s before compaction: external %d, want %d (CouchDB's: every leaf's body, a deleted one's {} too)", p, got, want)
		}
	}
	t.Logf("before compaction: %+v", before)

	pmCompact(c, db)
	after := pmParts(c, db, parts)
	t.Logf("after compaction: %+v", after)
	for _, p := range parts {
		b, a := before[p], after[p]
		if a.DocCount != b.DocCount || a.DocDelCount != b.DocDelCount || a.Sizes.External != b.Sizes.External {
			t.Errorf("%s after compaction: doc_count %d doc_del_count %d external %d, want %d, %d, %d (as before)",
				p, a.DocCount, a.DocDelCount, a.Sizes.External, b.DocCount, b.DocDelCount, b.Sizes.External)
		}
		if p == "nobody" {
			if a.Sizes.Active != 0 || a.Sizes.External != 0 {
				t.Errorf("nobody after compaction: sizes %+v, want zeros", a.Sizes)
			}
		} else if a.Sizes.Active <= 0 {
			t.Errorf("%s after compaction: active %d, want > 0", p, a.Sizes.Active)
		}
		if a.DbName != db || a.Partition != p {
			t.Errorf("%s after compaction: db_name %q partition %q", p, a.DbName, a.Partition)
		}
	}
	// the docs are all there, by partition
	var all allDocs
	pmCall(c, 200, "GET", "/"+db+"/_partition/alice/_all_docs", "", &all)
	if len(all.Rows) != 4 {
		t.Errorf("alice's _all_docs after compaction: %d rows, want 4", len(all.Rows))
	}
	var doc map[string]any
	pmCall(c, 200, "GET", "/"+db+"/alice:1", "", &doc)
	if doc["_rev"] != revs["alice:1"] {
		t.Errorf("alice:1 after compaction: rev %v, want %s", doc["_rev"], revs["alice:1"])
	}

	// purge the deleted alice:5 (its leaf) and bob:2, live with one rev
	var pr struct {
		Purged map[string][]string `json:"purged"`
	}
	// and carol:c's winning leaf
	pmCall(c, 201, "POST", "/"+db+"/_purge", fmt.Sprintf(`{"alice:5":[%q],"bob:2":[%q],"carol:c":["1-bbbb"]}`, revs["alice:5"], revs["bob:2"]), &pr)
	if !slices.Equal(pr.Purged["alice:5"], []string{revs["alice:5"]}) || !slices.Equal(pr.Purged["bob:2"], []string{revs["bob:2"]}) ||
		!slices.Equal(pr.Purged["carol:c"], []string{"1-bbbb"}) {
		t.Errorf("purged %v", pr.Purged)
	}
	purged := pmParts(c, db, parts)
	t.Logf("after purge: %+v", purged)
	wantAfter := map[string]partInfo{}
	for p, pi := range after {
		wantAfter[p] = pi
	}
	a := wantAfter["alice"]
	a.DocDelCount--
	a.Sizes.External -= 2
	wantAfter["alice"] = a
	b := wantAfter["bob"]
	b.DocCount--
	b.Sizes.External -= int64(len(bodies["bob:2"]))
	wantAfter["bob"] = b
	for _, p := range parts {
		g, w := purged[p], wantAfter[p]
		// CouchDB 3.5.2 leaves a doc's sizes as they were when a purge
		// takes one leaf of it and keeps the doc (carol:c): carol's
		// external is 18 too high until the next compaction. Its
		// figure after that is checked below.
		if p == "carol" {
			w.Sizes.External = g.Sizes.External
		}
		if g.DocCount != w.DocCount || g.DocDelCount != w.DocDelCount || g.Sizes.External != w.Sizes.External {
			t.Errorf("%s after purge: doc_count %d doc_del_count %d external %d, want %d, %d, %d",
				p, g.DocCount, g.DocDelCount, g.Sizes.External, w.DocCount, w.DocDelCount, w.Sizes.External)
		}
		if p != "nobody" && g.Sizes.Active <= 0 {
			t.Errorf("%s after purge: active %d, want > 0", p, g.Sizes.Active)
		}
	}
	pmCall(c, 404, "GET", "/"+db+"/bob:2", "", nil)
	pmCall(c, 404, "GET", "/"+db+"/alice:5", "", nil)
	pmCall(c, 200, "GET", "/"+db+"/carol:c", "", &doc)
	if doc["_rev"] != "1-aaaa" {
		t.Errorf("carol:c after its winner's purge: rev %v, want 1-aaaa", doc["_rev"])
	}
	pmCall(c, 200, "GET", "/"+db+"/_partition/bob/_all_docs", "", &all)
	if len(all.Rows) != 2 {
		t.Errorf("bob's _all_docs after purge: %d rows, want 2", len(all.Rows))
	}
	// a compaction after the purge changes no counts, nor alice's and
	// bob's external; carol's is then her live docs' and carol:c's
	// leaf left, 1-aaaa's 9 bytes
	pmCompact(c, db)
	again := pmParts(c, db, parts)
	delete(bodies, "bob:2")
	for _, p := range parts {
		g, w := again[p], purged[p]
		if p == "carol" {
			w.Sizes.External = 9
			for id, b := range bodies {
				if strings.HasPrefix(id, "carol:") {
					w.Sizes.External += int64(len(b))
				}
			}
		}
		if g.DocCount != w.DocCount || g.DocDelCount != w.DocDelCount || g.Sizes.External != w.Sizes.External {
			t.Errorf("%s after purge and compaction: doc_count %d doc_del_count %d external %d, want %d, %d, %d",
				p, g.DocCount, g.DocDelCount, g.Sizes.External, w.DocCount, w.DocDelCount, w.Sizes.External)
		}
	}
}

func TestPartitionStatsCompactPurgeAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	partitionCompactPurge(t, cs.URL, cs.User, cs.Password)
}

// partitionRestart: a partition's info is the same after a restart, and
// max_partition_size is enforced on the sizes stored before it.
func partitionRestart(t *testing.T, base func() string, user, pw string, restart func()) {
	c := func() caller { return caller{t, base(), user, pw} }
	db := "prs"
	pmCall(c(), 201, "PUT", "/"+db+"?partitioned=true&q=3", "", nil)
	revs, _ := compactPurgeSeed(c(), db)
	pmCall(c(), 200, "PUT", "/_node/_local/_config/couchdb/max_partition_size", `"1000"`, nil)
	// dave: 3 × 408, over the limit
	fill := `{"v":"` + partitionFill + `"}`
	for i := 1; i <= 3; i++ {
		revs[fmt.Sprintf("dave:b%d", i)] = pmPut(c(), db, fmt.Sprintf("dave:b%d", i), fill)
	}
	overflow := func(id string) {
		t.Helper()
		var e struct{ Error, Reason string }
		pmCall(c(), 403, "PUT", "/"+db+"/"+id, `{}`, &e)
		if e.Error != "partition_overflow" || e.Reason != "Partition limit exceeded due to update on '"+id+"'" {
			t.Errorf("PUT %s: %+v, want partition_overflow", id, e)
		}
	}
	overflow("dave:b4")
	parts := []string{"alice", "bob", "carol", "dave", "nobody"}
	before := pmParts(c(), db, parts)
	if before["dave"].Sizes.External != 3*408 || before["dave"].DocCount != 3 {
		t.Errorf("dave before restart: %+v, want 3 docs, external 1224", before["dave"])
	}

	restart()
	after := pmParts(c(), db, parts)
	for _, p := range parts {
		if after[p] != before[p] {
			t.Errorf("%s after restart: %+v, was %+v", p, after[p], before[p])
		}
	}
	var limit string
	pmCall(c(), 200, "GET", "/_node/_local/_config/couchdb/max_partition_size", "", &limit)
	if limit != "1000" {
		t.Errorf("max_partition_size after restart: %q, want \"1000\" (a config write persists)", limit)
	}
	// dave is still full, the others are not held back
	overflow("dave:b4")
	pmCall(c(), 400, "POST", "/"+db+"/_bulk_docs", `{"docs":[{"_id":"dave:b4"},{"_id":"x"}]}`, nil)
	var bulk []bulkResult
	pmCall(c(), 201, "POST", "/"+db+"/_bulk_docs", `{"docs":[{"_id":"dave:b4"},{"_id":"bob:6"}]}`, &bulk)
	if len(bulk) != 2 || bulk[0].Error != "partition_overflow" || !bulk[1].OK {
		t.Errorf("_bulk_docs into a full dave and bob after restart: %+v", bulk)
	}
	// a delete frees room: 2 × 408 + 2
	pmDelete(c(), db, "dave:b1", revs["dave:b1"])
	if got := pmPart(c(), db, "dave"); got.Sizes.External != 818 || got.DocCount != 2 || got.DocDelCount != 1 {
		t.Errorf("dave after a delete: %+v, want 2 docs, 1 deleted, external 818", got)
	}
	pmPut(c(), db, "dave:b4", fill)
	overflow("dave:b5")
	// what was written after the restart survives another
	before = pmParts(c(), db, parts)
	restart()
	after = pmParts(c(), db, parts)
	for _, p := range parts {
		if after[p] != before[p] {
			t.Errorf("%s after the second restart: %+v, was %+v", p, after[p], before[p])
		}
	}
	overflow("dave:b5")
	pmCall(c(), 200, "DELETE", "/_node/_local/_config/couchdb/max_partition_size", "", nil)
	pmPut(c(), db, "dave:b5", `{}`)
}

func TestPartitionStatsSurviveRestart(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	partitionRestart(t, func() string { return s.URL }, testserver.AdminUser, testserver.AdminPassword, func() { s.Restart(t) })
}

func TestPartitionStatsSurviveRestartAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	partitionRestart(t, func() string { return cs.URL }, cs.User, cs.Password, func() { cs.Restart(t) })
}

// repResult is what a one-shot POST /_replicate answers.
type repResult struct {
	OK      bool `json:"ok"`
	History []struct {
		DocsRead         int `json:"docs_read"`
		DocsWritten      int `json:"docs_written"`
		DocWriteFailures int `json:"doc_write_failures"`
	} `json:"history"`
}

// pmReplicate runs a one-shot replication and returns its stats.
func pmReplicate(c caller, body string) repResult {
	c.t.Helper()
	var r repResult
	b := pmCall(c, 200, "POST", "/_replicate", body, &r)
	if !r.OK || len(r.History) == 0 {
		c.t.Fatalf("replicate %s: %s", body, b)
	}
	return r
}

func pmIDs(c caller, db string) []string {
	c.t.Helper()
	var all allDocs
	pmCall(c, 200, "GET", "/"+db+"/_all_docs", "", &all)
	var ids []string
	for _, r := range all.Rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func pmProps(c caller, db string) string {
	c.t.Helper()
	var info struct{ Props json.RawMessage }
	pmCall(c, 200, "GET", "/"+db, "", &info)
	return string(info.Props)
}

// partitionReplication: docs go from a partitioned db to a plain one and
// from a plain one to a partitioned one; ids without a partition do not
// go into a partitioned db. endpoint gives the source or target of
// POST /_replicate for a db of this server.
func partitionReplication(t *testing.T, base, user, pw string, endpoints map[string]func(db string) string) {
	c := caller{t, base, user, pw}
	// the partitioned source: alice, bob, a deleted doc, a global design
	// doc, a _local doc
	pmCall(c, 201, "PUT", "/rsrc?partitioned=true&q=3", "", nil)
	var docs []string
	for i := 1; i <= 6; i++ {
		docs = append(docs, fmt.Sprintf(`{"_id":"alice:%d","n":%d}`, i, i), fmt.Sprintf(`{"_id":"bob:%d","n":%d,"pad":"%s"}`, i, i, strings.Repeat("b", i*10)))
	}
	docs = append(docs, `{"_id":"_design/g","options":{"partitioned":false},"views":{"n":{"map":"function (doc) { emit(doc.n, 1); }"}}}`)
	plainDocs := slices.Clone(docs)
	pmCall(c, 201, "POST", "/rsrc/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
	rev := pmPut(c, "rsrc", "alice:del", `{"n":0}`)
	delRev := pmDelete(c, "rsrc", "alice:del", rev)
	pmPut(c, "rsrc", "_local/l", `{"a":1}`)
	srcIDs := pmIDs(c, "rsrc")
	srcParts := pmParts(c, "rsrc", []string{"alice", "bob"})

	// the plain source with partitioned ids: the same docs
	pmCall(c, 201, "PUT", "/rplain", "", nil)
	pmCall(c, 201, "POST", "/rplain/_bulk_docs", `{"docs":[`+strings.Join(plainDocs, ",")+`]}`, nil)
	rev = pmPut(c, "rplain", "alice:del", `{"n":0}`)
	pmDelete(c, "rplain", "alice:del", rev)

	// the plain source with ids of no partition beside partitioned ones
	pmCall(c, 201, "PUT", "/rmixed", "", nil)
	pmCall(c, 201, "POST", "/rmixed/_bulk_docs", `{"docs":[{"_id":"alice:1","n":1},{"_id":"nocolon","n":2},{"_id":"bob:1","n":3},{"_id":"alsonone","n":4},{"_id":"carol:1","n":5}]}`, nil)

	// what the replicator reads: the _changes of the partitioned source,
	// whole, filtered and by pages, has every doc once
	t.Run("changes", func(t *testing.T) {
		partitionChanges(caller{t, base, user, pw}, "rsrc", append(slices.Clone(srcIDs), "alice:del"))
	})

	for kind, ep := range endpoints {
		t.Run(kind, func(t *testing.T) {
			c := caller{t, base, user, pw}
			rep := func(src, tgt string, create bool) repResult {
				t.Helper()
				body := fmt.Sprintf(`{"source":%q,"target":%q}`, ep(src), ep(tgt))
				if create {
					body = body[:len(body)-1] + `,"create_target":true}`
				}
				return pmReplicate(c, body)
			}

			// (a) partitioned -> a new db: every doc, the target plain
			tgt := "rtgta-" + kind
			r := rep("rsrc", tgt, true)
			if got := pmIDs(c, tgt); !slices.Equal(got, srcIDs) {
				t.Errorf("(a) target has %q, want %q", got, srcIDs)
			}
			if h := r.History[0]; h.DocsWritten != len(srcIDs)+1 || h.DocWriteFailures != 0 {
				t.Errorf("(a) docs_written %d doc_write_failures %d, want %d and 0", h.DocsWritten, h.DocWriteFailures, len(srcIDs)+1)
			}
			if p := pmProps(c, tgt); p != `{}` {
				t.Errorf("(a) target props %s, want {} (not partitioned)", p)
			}
			var e struct{ Error, Reason string }
			pmCall(c, 400, "GET", "/"+tgt+"/_partition/alice", "", &e)
			if e.Reason != "database is not partitioned" {
				t.Errorf("(a) target's _partition/alice: %+v", e)
			}
			// the deleted doc came, the _local one did not
			var del struct {
				Deleted bool `json:"_deleted"`
			}
			pmCall(c, 200, "GET", "/"+tgt+"/alice:del?rev="+delRev, "", &del)
			if !del.Deleted {
				t.Errorf("(a) target's alice:del?rev=%s: not deleted", delRev)
			}
			pmCall(c, 404, "GET", "/"+tgt+"/_local/l", "", nil)

			// (b) plain with partitioned ids -> a partitioned db made before
			tgt = "rtgtb-" + kind
			pmCall(c, 201, "PUT", "/"+tgt+"?partitioned=true", "", nil)
			r = rep("rplain", tgt, false)
			if got := pmIDs(c, tgt); !slices.Equal(got, srcIDs) {
				t.Errorf("(b) target has %q, want %q", got, srcIDs)
			}
			if h := r.History[0]; h.DocsWritten != len(srcIDs)+1 || h.DocWriteFailures != 0 {
				t.Errorf("(b) docs_written %d doc_write_failures %d, want %d and 0", h.DocsWritten, h.DocWriteFailures, len(srcIDs)+1)
			}
			if p := pmProps(c, tgt); p != `{"partitioned":true}` {
				t.Errorf("(b) target props %s, want partitioned", p)
			}
			for p, want := range srcParts {
				got := pmPart(c, tgt, p)
				if got.DocCount != want.DocCount || got.DocDelCount != want.DocDelCount || got.Sizes.External != want.Sizes.External {
					t.Errorf("(b) target's %s: %+v, want the counts and external of a partitioned db written directly: %+v", p, got, want)
				}
			}
			var all allDocs
			pmCall(c, 200, "GET", "/"+tgt+"/_partition/bob/_all_docs", "", &all)
			if len(all.Rows) != 6 {
				t.Errorf("(b) target's bob _all_docs: %d rows, want 6", len(all.Rows))
			}

			// (c) plain with ids of no partition -> partitioned. CouchDB
			// 3.5.2: the target's _revs_diff refuses the batch (400
			// illegal_docid), the replication fails (500, reason
			// revs_diff_failed): nothing of the batch is written, the
			// docs with a partition neither
			tgt = "rtgtc-" + kind
			pmCall(c, 201, "PUT", "/"+tgt+"?partitioned=true", "", nil)
			resp, b := c.do("POST", "/_replicate", fmt.Sprintf(`{"source":%q,"target":%q}`, ep("rmixed"), ep(tgt)), nil)
			got := pmIDs(c, tgt)
			t.Logf("(c) POST /_replicate: %d %s; target has %q", resp.StatusCode, b, got)
			if resp.StatusCode != 500 || !strings.Contains(b, "illegal_docid") || len(got) != 0 {
				t.Errorf("(c) replicate ids of no partition into a partitioned db: %d %s, target %q; want 500 (illegal_docid), nothing written", resp.StatusCode, b, got)
			}
		})
	}
}

func TestPartitionReplication(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	httpEP := func(db string) string {
		u, _ := url.Parse(s.URL + "/" + db)
		u.User = url.UserPassword(testserver.AdminUser, testserver.AdminPassword)
		return u.String()
	}
	partitionReplication(t, s.URL, testserver.AdminUser, testserver.AdminPassword, map[string]func(string) string{
		"local": func(db string) string { return db },
		"http":  httpEP,
	})
}

func TestPartitionReplicationAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	partitionReplication(t, cs.URL, cs.User, cs.Password, map[string]func(string) string{
		"http": func(db string) string {
			u, _ := url.Parse(cs.URL + "/" + db)
			u.User = url.UserPassword(cs.User, cs.Password)
			return u.String()
		},
	})
}

// partitionChanges checks that each _changes of db lists its docs once:
// all holds the ids of every doc, deleted ones too.
func partitionChanges(c caller, db string, all []string) {
	t := c.t
	all = slices.Sorted(slices.Values(all))
	ids := func(ch changes) []string {
		var got []string
		for _, r := range ch.Results {
			got = append(got, r.ID)
		}
		slices.Sort(got)
		return got
	}
	pick := func(pred func(id string) bool) []string {
		var w []string
		for _, id := range all {
			if pred(id) {
				w = append(w, id)
			}
		}
		return w
	}
	n := func(id string) int {
		var k int
		if _, err := fmt.Sscanf(id[strings.IndexByte(id, ':')+1:], "%d", &k); err != nil {
			return -1
		}
		return k
	}
	docIDs := `["alice:1","bob:2","alice:del","nosuch:1"]`
	for _, tc := range []struct {
		name, method, path, body string
		want                     []string
	}{
		{"all", "GET", "/_changes", "", all},
		{"style=all_docs", "GET", "/_changes?style=all_docs", "", all},
		{"_selector", "POST", "/_changes?filter=_selector", `{"selector":{"n":{"$gt":3}}}`,
			pick(func(id string) bool { return id != "alice:del" && n(id) > 3 })},
		{"_selector by _id", "POST", "/_changes?filter=_selector", `{"selector":{"_id":{"$gt":"bob:"}}}`,
			pick(func(id string) bool { return strings.HasPrefix(id, "bob:") })},
		{"_doc_ids POST", "POST", "/_changes?filter=_doc_ids", `{"doc_ids":` + docIDs + `}`, []string{"alice:1", "alice:del", "bob:2"}},
		{"_doc_ids GET", "GET", "/_changes?filter=_doc_ids&doc_ids=" + url.QueryEscape(docIDs), "", []string{"alice:1", "alice:del", "bob:2"}},
		{"_design", "GET", "/_changes?filter=_design", "", []string{"_design/g"}},
	} {
		var ch changes
		pmCall(c, 200, tc.method, "/"+db+tc.path, tc.body, &ch)
		if got := ids(ch); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: ids %q, want %q (each once)", tc.method, tc.path, got, tc.want)
		}
	}
	// by pages of 4, each since the page before's last_seq
	var got []string
	since := "0"
	for range 20 {
		var ch changes
		pmCall(c, 200, "GET", "/"+db+"/_changes?limit=4&since="+url.QueryEscape(since), "", &ch)
		if len(ch.Results) == 0 {
			break
		}
		for _, r := range ch.Results {
			got = append(got, r.ID)
		}
		since = ch.LastSeq
	}
	slices.Sort(got)
	if !slices.Equal(got, all) {
		t.Errorf("_changes by pages of 4: ids %q, want %q (each once)", got, all)
	}
	// a filtered feed by pages as well, each since the page before's last
	// row, as a replicator and PouchDB checkpoint: a filtered, limited
	// feed's last_seq can be past matching rows it did not send
	// (apache/couchdb#1221: paging by it lost a doc now and then against
	// the real CouchDB, whose shards' workers race to the limit)
	got, since = nil, "0"
	for range 20 {
		var ch changes
		pmCall(c, 200, "POST", "/"+db+"/_changes?filter=_selector&limit=2&since="+url.QueryEscape(since), `{"selector":{"n":{"$gt":3}}}`, &ch)
		if len(ch.Results) == 0 {
			break
		}
		for _, r := range ch.Results {
			got = append(got, r.ID)
		}
		since = ch.Results[len(ch.Results)-1].Seq
	}
	slices.Sort(got)
	if want := pick(func(id string) bool { return id != "alice:del" && n(id) > 3 }); !slices.Equal(got, want) {
		t.Errorf("_changes?filter=_selector by pages of 2: ids %q, want %q (each once)", got, want)
	}
}
