package kivik_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	kivik "github.com/go-kivik/kivik/v4"
)

// fillSource writes what a replication must carry: plain docs, an edited
// doc, a deleted one, a conflict, an attachment, a design doc and a
// _local doc (which must not travel).
func fillSource(t *testing.T, db *kivik.DB) {
	t.Helper()
	var docs []any
	for i := range 25 {
		docs = append(docs, map[string]any{"_id": fmt.Sprintf("doc-%02d", i), "i": i})
	}
	_, err := db.BulkDocs(ctx(t), docs)
	must(t, "BulkDocs", err)
	rev, err := db.Put(ctx(t), "edited", map[string]any{"v": 1})
	must(t, "Put edited", err)
	_, err = db.Put(ctx(t), "edited", map[string]any{"_rev": rev, "v": 2})
	must(t, "edit", err)
	rev, err = db.Put(ctx(t), "deleted", map[string]any{"v": 1})
	must(t, "Put deleted", err)
	_, err = db.Delete(ctx(t), "deleted", rev)
	must(t, "Delete", err)
	conflicted(t, db, "conflicted")
	_, err = db.PutAttachment(ctx(t), "with-att", newAtt("f.txt", "text/plain", "attached bytes"))
	must(t, "PutAttachment", err)
	_, err = db.Put(ctx(t), "_design/app", map[string]any{"language": "javascript"})
	must(t, "Put design", err)
	_, err = db.Put(ctx(t), "_local/stay", map[string]any{"here": true})
	must(t, "Put local", err)
}

// leaves is every doc's leaf revs (deleted included), as a kivik user reads
// them: changes with style=all_docs.
func leaves(t *testing.T, db *kivik.DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	ch := db.Changes(ctx(t), kivik.Param("style", "all_docs"))
	for ch.Next() {
		revs := slices.Clone(ch.Changes())
		sort.Strings(revs)
		out[ch.ID()] = revs
	}
	must(t, "Changes", ch.Err())
	return out
}

// sameDocs checks target holds what source holds: the leaves of every doc,
// the bodies of the winners, the attachment, no _local doc.
func sameDocs(t *testing.T, source, target *kivik.DB) {
	t.Helper()
	ls, lt := leaves(t, source), leaves(t, target)
	if !maps.EqualFunc(ls, lt, slices.Equal) {
		t.Errorf("leaves differ:\nsource %v\ntarget %v", ls, lt)
	}
	for id := range ls {
		var a, b map[string]any
		errA := source.Get(ctx(t), id, kivik.Param("conflicts", true)).ScanDoc(&a)
		errB := target.Get(ctx(t), id, kivik.Param("conflicts", true)).ScanDoc(&b)
		// attachment stubs differ in digest, length and revpos where CouchDB
		// kept a gzip-encoded PUT's bytes (see Attachments): names and types
		// are compared here, the content below
		stubsOnly(a)
		stubsOnly(b)
		if kivik.HTTPStatus(errA) != kivik.HTTPStatus(errB) || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("doc %s: source %v %v, target %v %v", id, a, errA, b, errB)
		}
	}
	att, err := target.GetAttachment(ctx(t), "with-att", "f.txt")
	must(t, "GetAttachment on the target", err)
	if got := readAtt(t, att); got != "attached bytes" {
		t.Errorf("attachment on the target = %q", got)
	}
	if err := target.Get(ctx(t), "_local/stay").Err(); kivik.HTTPStatus(err) != 404 {
		t.Errorf("_local doc on the target: %v, want 404", err)
	}
}

func stubsOnly(doc map[string]any) {
	atts, _ := doc["_attachments"].(map[string]any)
	for name, a := range atts {
		m, _ := a.(map[string]any)
		atts[name] = map[string]any{"content_type": m["content_type"], "stub": m["stub"]}
	}
}

// kivik's own replicator (kivik.Replicate): changes, revs_diff, open_revs
// and bulk_docs/attachment PUTs driven by the client.
func testClientReplicate(t *testing.T, e *env) {
	source := e.newDB(t, "kreplsrc")
	target := e.newDB(t, "krepltgt")
	fillSource(t, source)

	res, err := kivik.Replicate(ctx(t), target, source)
	must(t, "kivik.Replicate", err)
	if res.DocWriteFailures != 0 || res.DocsWritten == 0 || res.DocsRead == 0 {
		t.Errorf("kivik.Replicate result %+v", res)
	}
	sameDocs(t, source, target)

	// again: nothing to write
	res, err = kivik.Replicate(ctx(t), target, source)
	must(t, "kivik.Replicate again", err)
	if res.DocsWritten != 0 || res.DocWriteFailures != 0 {
		t.Errorf("second kivik.Replicate wrote %+v", res)
	}
}

// client.Replicate: a _replicator doc the server's replicator runs.
func testReplicatorDocs(t *testing.T, e *env) {
	source := e.newDB(t, "replsrc")
	fillSource(t, source)
	targetName := e.dbName("repltgt")
	t.Cleanup(func() { _ = e.admin.DestroyDB(ctx(t), targetName) })

	rep, err := e.admin.Replicate(ctx(t), e.dsn(e.user, e.pw)+"/"+targetName, e.dsn(e.user, e.pw)+"/"+source.Name(), kivik.Param("create_target", true))
	if kivik.HTTPStatus(err) == http.StatusNotFound {
		// kivik's Replicate POSTs the _replicator doc, then at once GETs
		// /_scheduler/docs/_replicator/<id>; a scheduler that has not seen
		// the new doc yet answers 404 {"error":"not_found","reason":"missing"}
		// and kivik gives up. Seen on settee under -race with the other
		// scenarios running; CouchDB has the same window (its doc processor
		// learns of the doc from a db event). The doc is there: find it.
		t.Logf("Replicate: %v: the scheduler did not know the new _replicator doc yet; looking it up", err)
		eventually(t, 30*time.Second, "the replication shows in GetReplications", func() error {
			reps, err := e.admin.GetReplications(ctx(t))
			if err != nil {
				return err
			}
			for _, r := range reps {
				if strings.Contains(r.Target, "/"+targetName) {
					rep = r
					return nil
				}
			}
			return fmt.Errorf("not among %d", len(reps))
		})
		err = nil
	}
	must(t, "Replicate", err)
	t.Cleanup(func() { _ = rep.Delete(ctx(t)) })

	eventually(t, 30*time.Second, "replication completes", func() error {
		if err := rep.Update(ctx(t)); err != nil {
			return err
		}
		if rep.State() != kivik.ReplicationComplete {
			return fmt.Errorf("state %q (err %v)", rep.State(), rep.Err())
		}
		return nil
	})
	if rep.Err() != nil || rep.DocsWritten() == 0 || rep.DocWriteFailures() != 0 {
		t.Errorf("completed replication: err %v, docs written %d, failures %d", rep.Err(), rep.DocsWritten(), rep.DocWriteFailures())
	}
	if rep.EndTime().IsZero() {
		t.Errorf("completed replication: no end time")
	}
	sameDocs(t, source, e.admin.DB(targetName))

	reps, err := e.admin.GetReplications(ctx(t))
	must(t, "GetReplications", err)
	found := false
	for _, r := range reps {
		// the scheduler's list names source and target without credentials
		if strings.Contains(r.Target, "/"+targetName) && r.State() == kivik.ReplicationComplete {
			found = true
		}
	}
	if !found {
		t.Errorf("GetReplications (%d) lacks the completed replication to %s", len(reps), targetName)
	}
}
