package resourcetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cpu is the node process's user+system CPU time so far.
func (n *node) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// the fields after the command's closing parenthesis: utime is the
	// 12th of them, stime the 13th, in clock ticks (100 a second here)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Case 3: a user sets their own doc's iterations to 1e11. Logins as that
// user (by anyone) once each burned a core until restart, even after the
// client had gone. Now each is refused before any hashing (CouchDB's
// max_iterations), and a login under the bound that its client abandons
// stops hashing.
func TestIterationsChosenByAUser(t *testing.T) {
	n := startNode(t)
	n.setup()
	// users may edit their own docs where _users is open, as sign-up apps
	// set it
	n.setConfig("couchdb", "users_db_security_editable", "true")
	n.must("PUT", "/_users/_security", "application/json", []byte(`{"admins":{"names":[],"roles":[]},"members":{"names":[],"roles":[]}}`), 200)
	n.must("PUT", "/_users/org.couchdb.user:mallory", "application/json",
		[]byte(`{"name":"mallory","type":"user","roles":[],"password":"pw"}`), 201)
	// the user edits their own doc: a derived key of their own making, at
	// 1e11 iterations
	var doc map[string]any
	req, _ := http.NewRequest("GET", n.url("/_users/org.couchdb.user:mallory"), nil)
	req.SetBasicAuth("mallory", "pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	doc["iterations"] = 100000000000
	body, _ := json.Marshal(doc)
	req, _ = http.NewRequest("PUT", n.url("/_users/org.couchdb.user:mallory"), strings.NewReader(string(body)))
	req.SetBasicAuth("mallory", "pw")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	reason, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("the user's own edit: %d %s", resp.StatusCode, reason)
	}
	w := n.watch()
	cpu0 := n.cpu()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var req *http.Request
			if i%2 == 0 {
				req, _ = http.NewRequestWithContext(ctx, "GET", n.url("/_session"), nil)
				req.SetBasicAuth("mallory", "pw")
			} else {
				req, _ = http.NewRequestWithContext(ctx, "POST", n.url("/_session"), strings.NewReader(`{"name":"mallory","password":"pw"}`))
				req.Header.Set("Content-Type", "application/json")
			}
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("login %d: %v after %v", i, err, time.Since(start))
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 403 && resp.StatusCode != 401 {
				t.Errorf("login %d: %d, want a refusal", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	if used := n.cpu() - cpu0; used > 2*time.Second {
		t.Errorf("8 refused logins and 2 s after cost the node %v of CPU", used)
	}

	// under the bound, abandoned: the hash stops with its client
	n.setConfig("chttpd_auth", "max_iterations", "100000000000")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	req, _ = http.NewRequestWithContext(ctx, "GET", n.url("/_session"), nil)
	req.SetBasicAuth("mallory", "pw")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a login at 1e11 iterations answered %d within 500 ms", resp.StatusCode)
	}
	cancel()
	time.Sleep(500 * time.Millisecond) // the hash notices its client went
	cpu1 := n.cpu()
	time.Sleep(2 * time.Second)
	if used := n.cpu() - cpu1; used > time.Second {
		t.Errorf("an abandoned login kept hashing: %v of CPU in the 2 s after", used)
	}
	w.end(t)
}
