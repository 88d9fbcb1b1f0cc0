package replicator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
)

// TestSparseSeqsCheckpoint: a source that gives only some rows of its
// feed a seq (seq_interval, in any phase: here every 7th row from the
// 4th, which no batch of 5 ends on) and a target that fails after some
// batches. A batch whose last row has no seq moves no checkpoint, so the
// checkpoint never passes a change the target did not take; once the
// target is back the job converges.
func TestSparseSeqsCheckpoint(t *testing.T) {
	t.Parallel()
	const total = 120
	fp := newFaultPair(t, total)
	fp.pa.rp.ModifyResponse = func(resp *http.Response) error {
		q := resp.Request.URL.Query()
		if resp.Request.URL.Path != "/src/_changes" || q.Get("limit") == "0" || resp.StatusCode != 200 {
			return nil
		}
		var v map[string]any
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		rows, _ := v["results"].([]any)
		for i, r := range rows {
			if i%7 != 3 {
				r.(map[string]any)["seq"] = nil
			}
		}
		b, _ = json.Marshal(v)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	// 15 batches go through first, with a checkpoint every 10 ms: some
	// checkpoint is written before the target fails, however slow the
	// machine (with none the test would have nothing to check)
	fp.pb.set(&fault{kind: status, code: 500, body: `{"error":"unknown_error","reason":"down"}`, match: "POST _bulk_docs", after: 15})
	must(t, fp.b, "PUT", "/_replicator/sparse", fp.repDoc(map[string]any{"worker_processes": 3, "worker_batch_size": 5,
		"checkpoint_interval": 10}), 201)
	crashing(t, fp.b, "sparse", "500", 1)

	ck := checkpoint(t, fp.b, "tgt")
	if ck == nil {
		t.Fatal("no checkpoint on the target")
	}
	// every change up to the checkpoint is on the target
	after := map[string]bool{}
	b, _ := json.Marshal(ck["source_last_seq"])
	var since string
	_ = json.Unmarshal(b, &since)
	out := must(t, fp.a, "GET", "/src/_changes?since="+url.QueryEscape(since), nil, 200)
	for _, r := range out["results"].([]any) {
		after[r.(map[string]any)["id"].(string)] = true
	}
	all := must(t, fp.a, "GET", "/src/_changes", nil, 200)
	checked := 0
	for _, r := range all["results"].([]any) {
		id := r.(map[string]any)["id"].(string)
		if after[id] {
			continue
		}
		checked++
		resp := fp.b.Do(t, "GET", "/tgt/"+url.PathEscape(id), nil)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("the checkpoint (%v) passes %s, which the target does not have (%d)", since, id, resp.StatusCode)
		}
	}
	if checked == 0 || checked == total {
		t.Fatalf("checkpoint at %v covers %d of %d changes", since, checked, total)
	}
	t.Logf("checkpoint covers %d of %d changes", checked, total)

	fp.pb.set(nil)
	completed(t, fp.b, "sparse")
	sameLeaves(t, fp.a, "src", fp.b, "tgt")
	if n := ndocs(t, fp.b, "tgt"); n != total {
		t.Fatalf("%d docs on the target, want %d", n, total)
	}
}
