package httpgw_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// TestGetsShareNoBuffer: a GET's doc is rendered into a buffer the
// gateway reuses for later GETs (getDoc's pool). Many clients at once
// reading docs of very different sizes — one under the pooled size, one
// over it, with conflicts rendered or not, HEADs among them — each get
// the bytes of their own doc, whole, as a lone GET of it answers them.
// (A buffer put back before its answer is written shows as a data race
// under -race, as CI runs it, even when no bytes came out wrong.)
func TestGetsShareNoBuffer(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/bufs", nil, nil)
	docs := map[string]string{
		"tiny": `{"a":1}`,
		"mid":  `{"data":"` + strings.Repeat("m", 15<<10) + `"}`,
		// over the pool's 256 KB: its buffer is left to the GC
		"big": `{"data":"` + strings.Repeat("b", 300<<10) + `"}`,
	}
	for id, body := range docs {
		mustCall(t, s, 201, "PUT", "/bufs/"+id, body, nil)
	}
	// a conflict on "mid", so that ?conflicts=true renders more bytes
	mustCall(t, s, 201, "POST", "/bufs/_bulk_docs",
		`{"new_edits":false,"docs":[{"_id":"mid","_rev":"1-0000000000000000000000000000000a","x":1}]}`, nil)

	get := func(method, path string) (int, string, error) {
		req, err := http.NewRequest(method, s.URL+path, nil)
		if err != nil {
			return 0, "", err
		}
		req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	var paths []string
	want := map[string]string{}
	for id := range docs {
		for _, q := range []string{"", "?conflicts=true"} {
			p := "/bufs/" + id + q
			code, body, err := get("GET", p)
			if err != nil || code != 200 {
				t.Fatalf("GET %s: %d %v", p, code, err)
			}
			paths = append(paths, p)
			want[p] = body
		}
	}
	if !strings.Contains(want["/bufs/mid?conflicts=true"], `"_conflicts":[`) {
		t.Fatalf("mid?conflicts=true renders no conflicts: %.80s", want["/bufs/mid?conflicts=true"])
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 60 {
				p := paths[rand.IntN(len(paths))]
				method := "GET"
				if rand.IntN(5) == 0 {
					method = "HEAD"
				}
				code, body, err := get(method, p)
				switch {
				case err != nil:
					t.Errorf("%s %s: %v", method, p, err)
					return
				case code != 200:
					t.Errorf("%s %s: status %d", method, p, code)
				case method == "HEAD" && body != "":
					t.Errorf("HEAD %s: a body of %d bytes", p, len(body))
				case method == "GET" && body != want[p]:
					t.Errorf("GET %s: %d bytes, %s", p, len(body), byteDiff(body, want[p]))
				}
			}
		})
	}
	wg.Wait()
}

// byteDiff says where got first differs from want.
func byteDiff(got, want string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("differs at byte %d: %q, want %q", i, got[max(0, i-10):min(len(got), i+10)], want[max(0, i-10):min(len(want), i+10)])
		}
	}
	return fmt.Sprintf("length %d, want %d", len(got), len(want))
}
