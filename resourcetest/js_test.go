package resourcetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
)

// Case 2 and its family: design-doc JavaScript that asks for more memory
// than there is, in one allocation or in a loop. One such show once ended
// the node ("fatal error: runtime: out of memory"); CouchDB 3.5.2 answers
// each 500 (render_error with a RangeError or InternalError, or
// os_process_error when its couchjs times out) and stays up.
func TestJavaScriptAllocations(t *testing.T) {
	n := startNode(t)
	n.setup()
	n.must("PUT", "/js", "", nil, 201)
	fns := map[string]string{
		"repeat":    `function(doc,req){ return "x".repeat(Math.pow(2,40)); }`,
		"padStart":  `function(doc,req){ return "".padStart(Math.pow(2,31)); }`,
		"padEnd":    `function(doc,req){ return "".padEnd(Math.pow(2,40), "ab"); }`,
		"join":      `function(doc,req){ return new Array(Math.pow(2,28)).join("abcdefgh"); }`,
		"fill":      `function(doc,req){ var a = new Array(Math.pow(2,27)).fill(1); return ""+a.length; }`,
		"from":      `function(doc,req){ return ""+Array.from({length: Math.pow(2,30)}).length; }`,
		"buffer":    `function(doc,req){ return ""+new ArrayBuffer(Math.pow(2,40)).byteLength; }`,
		"typed":     `function(doc,req){ return ""+new Float64Array(Math.pow(2,33)).length; }`,
		"doubling":  `function(doc,req){ var s = "x"; while (true) s = s + s; }`,
		"stringify": `function(doc,req){ var a = []; for (var i = 0; i < 1e9; i++) a.push({k: i, v: "xxxxxxxxxxxxxxxx"}); return JSON.stringify(a); }`,
		"concat":    `function(doc,req){ var a = [1]; while (true) a = a.concat(a); }`,
	}
	ddoc := map[string]any{
		"shows":               fns,
		"views":               map[string]any{"v": map[string]string{"map": `function(doc){ if (doc.mapboom) emit(doc._id, "x".repeat(Math.pow(2,40))); else emit(doc._id, 1); }`}, "r": map[string]string{"map": `function(doc){ emit(doc._id, 1); }`, "reduce": `function(k, v, re){ return "x".repeat(Math.pow(2,40)); }`}},
		"validate_doc_update": `function(n, o){ if (n.boom) { var s = "x".repeat(Math.pow(2,40)); } }`,
	}
	b, _ := json.Marshal(ddoc)
	n.must("PUT", "/js/_design/d", "application/json", b, 201)
	n.must("PUT", "/js/calm", "application/json", []byte(`{}`), 201)
	n.must("PUT", "/js/boom", "application/json", []byte(`{"mapboom":false}`), 201)
	w := n.watch()
	var wg sync.WaitGroup
	for name := range fns {
		wg.Go(func() {
			start := time.Now()
			st, body := n.do("GET", "/js/_design/d/_show/"+name+"/calm", "", nil)
			t.Logf("show %s: %d %.160s in %v", name, st, strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
			if st != 500 || !strings.Contains(body, `"render_error"`) && !strings.Contains(body, `"os_process_error"`) {
				t.Errorf("show %s: %d %.300s, want CouchDB's 500 render_error or os_process_error", name, st, body)
			}
		})
	}
	wg.Go(func() {
		st, body := n.do("PUT", "/js/boom2", "application/json", []byte(`{"boom":true}`))
		t.Logf("validate_doc_update: %d %.160s", st, strings.TrimSpace(body))
		// CouchDB 3.5.2: 500 {"error":"RangeError","reason":"{[]}"}
		if st != 500 {
			t.Errorf("a doc whose validate_doc_update ran out of memory: %d %s, want 500", st, body)
		}
	})
	wg.Wait()
	// a map function that runs out of memory on one doc: the doc is left
	// out (or the query fails), the node answers the next query
	doc := n.must("GET", "/js/boom", "", nil, 200)
	var d map[string]any
	_ = json.Unmarshal([]byte(doc), &d)
	n.must("PUT", "/js/boom", "application/json", []byte(fmt.Sprintf(`{"_rev":%q,"mapboom":true}`, d["_rev"])), 201)
	st, body := n.do("GET", "/js/_design/d/_view/v", "", nil)
	t.Logf("view v: %d %.200s", st, strings.TrimSpace(body))
	if st != 200 && st != 500 {
		t.Errorf("view v: %d %s", st, body)
	}
	st, body = n.do("GET", "/js/_design/d/_view/r", "", nil)
	t.Logf("view r (reduce): %d %.200s", st, strings.TrimSpace(body))
	if st != 500 && st != 200 {
		t.Errorf("view r: %d %s", st, body)
	}
	// and JavaScript still runs after it all
	n.must("PUT", "/js/after", "application/json", []byte(`{}`), 201)
	n.must("GET", "/js/_design/d/_view/r?reduce=false", "", nil, 200)
	w.end(t)
}

// Case 4: one database's validate_doc_update loops under 12 concurrent
// writes; a write to another database, whose VDU is JavaScript too, once
// waited 14.1 s for a runtime. It must wait no more than a second.
func TestJavaScriptLoopingDatabase(t *testing.T) {
	n := startNode(t)
	n.setup()
	n.must("PUT", "/busy", "", nil, 201)
	n.must("PUT", "/calm", "", nil, 201)
	n.must("PUT", "/busy/_design/v", "application/json", []byte(`{"validate_doc_update":"function(n, o){ while (true) {} }"}`), 201)
	n.must("PUT", "/calm/_design/v", "application/json", []byte(`{"validate_doc_update":"function(n, o){ if (n.bad) throw({forbidden: 'bad'}); }"}`), 201)
	w := n.watch()
	// the busy writes are let go once the calm ones are measured: each
	// would take os_process_timeout (5 s), two at a time
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "PUT", n.adminURL(fmt.Sprintf("/busy/d%d", i)), strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // let go
			}
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("a write past a looping VDU: %d", resp.StatusCode)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the loops have the runtimes
	var slowest time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		n.must("PUT", fmt.Sprintf("/calm/d%d", i), "application/json", []byte(`{}`), 201)
		slowest = max(slowest, time.Since(start))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("slowest write to the calm database: %v", slowest)
	if slowest > answerWithin {
		t.Errorf("a write to the calm database took %v while another database's VDU looped", slowest)
	}
	cancel()
	wg.Wait()
	w.end(t)
}

// The answers CouchDB 3.5.2 gives the deterministic ones of those
// functions, asked of it side by side: a string past SpiderMonkey's
// longest is a RangeError thrown in the function (a show's render_error
// with the error's text), a validate_doc_update's is 500
// {"error":"RangeError","reason":"{[]}"}, and a reduce's makes the row's
// value null.
func TestJavaScriptErrorsAsCouchDB(t *testing.T) {
	cs := testcouch.Start(t, "")
	n := startNode(t)
	couch := func(method, path string, body []byte) (int, string) {
		req, _ := http.NewRequest(method, cs.URL+path, bytes.NewReader(body))
		req.SetBasicAuth(cs.User, cs.Password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("CouchDB %s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	settee := func(method, path string, body []byte) (int, string) {
		return n.do(method, path, "application/json", body)
	}
	ddoc := []byte(`{"shows":{` +
		`"repeat":"function(doc,req){ return \"x\".repeat(Math.pow(2,40)); }",` +
		`"padStart":"function(doc,req){ return \"\".padStart(Math.pow(2,31)); }",` +
		`"padEnd":"function(doc,req){ return \"\".padEnd(Math.pow(2,40), \"ab\"); }"},` +
		`"views":{"r":{"map":"function(doc){ emit(null, 1); }","reduce":"function(k, v, re){ return \"x\".repeat(Math.pow(2,40)); }"}},` +
		`"validate_doc_update":"function(n, o){ if (n.boom) { var s = \"x\".repeat(Math.pow(2,40)); } }"}`)
	for _, do := range []func(string, string, []byte) (int, string){couch, settee} {
		if st, b := do("PUT", "/js", nil); st != 201 {
			t.Fatalf("PUT /js: %d %s", st, b)
		}
		if st, b := do("PUT", "/js/_design/d", ddoc); st != 201 {
			t.Fatalf("PUT the design doc: %d %s", st, b)
		}
		if st, b := do("PUT", "/js/a", []byte(`{}`)); st != 201 {
			t.Fatalf("PUT /js/a: %d %s", st, b)
		}
	}
	// a show's reason up to the error's text: the rest is the stack,
	// with line numbers of couchjs's own main.js
	errText := func(b string) string {
		var e struct{ Error, Reason string }
		_ = json.Unmarshal([]byte(b), &e)
		r, _, _ := strings.Cut(e.Reason, `", `)
		return e.Error + " " + r
	}
	for _, show := range []string{"repeat", "padStart", "padEnd"} {
		cst, cb := couch("GET", "/js/_design/d/_show/"+show+"/a", nil)
		sst, sb := settee("GET", "/js/_design/d/_show/"+show+"/a", nil)
		if cst != sst || errText(cb) != errText(sb) {
			t.Errorf("show %s: settee %d %s\nCouchDB %d %s", show, sst, errText(sb), cst, errText(cb))
		}
	}
	norm := func(b string) string {
		var v any
		_ = json.Unmarshal([]byte(b), &v)
		out, _ := json.Marshal(v)
		return string(out)
	}
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/js/boom", `{"boom":true}`},
		{"GET", "/js/_design/d/_view/r", ""},
	} {
		cst, cb := couch(c.method, c.path, []byte(c.body))
		sst, sb := settee(c.method, c.path, []byte(c.body))
		if cst != sst || norm(cb) != norm(sb) {
			t.Errorf("%s %s: settee %d %s, CouchDB %d %s", c.method, c.path, sst, sb, cst, cb)
		}
	}
}
