package policy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
	"github.com/settee/settee/policy"
	pb "github.com/settee/settee/proto"
)

// startWithPolicy is a node and the policy its gateway uses.
func startWithPolicy(t *testing.T) (*testserver.Server, *policy.Policy, *coordinator.Coordinator) {
	var pol *policy.Policy
	var c *coordinator.Coordinator
	s := testserver.Start(t, func(cfg *node.Config) {
		h := cfg.Handler
		cfg.Handler = func(sv node.Services) (http.Handler, error) {
			pol, c = sv.Policy, sv.Coordinator
			return h(sv)
		}
	})
	return s, pol, c
}

func call(t *testing.T, s *testserver.Server, want int, method, path string, body any) map[string]any {
	t.Helper()
	resp := s.Do(t, method, path, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// TestDesignCache: the policy's design docs follow the writes made
// through it at once (a new doc, an edit, a deletion, the database
// deleted and made again), and a doc the cache does not hold (written
// past the policy, as through another node) is read at once.
func TestDesignCache(t *testing.T) {
	s, pol, c := startWithPolicy(t)
	ctx := context.Background()
	call(t, s, 201, "PUT", "/d", nil)

	if _, err := pol.Design(ctx, "d", "_design/a"); err != policy.ErrMissing {
		t.Fatalf("before any: %v, want ErrMissing", err)
	}
	ddoc := `{"views":{"v":{"map":"function(d){emit(d._id)}"}},"shows":{"s":"function(){return 'x'}"},"validate_doc_update":"function(){}"}`
	rev := call(t, s, 201, "PUT", "/d/_design/a", ddoc)["rev"].(string)
	d, err := pol.Design(ctx, "d", "_design/a")
	if err != nil {
		t.Fatalf("after the write: %v", err)
	}
	if d.Rev != rev || !strings.HasPrefix(string(d.Body), `{"_id":"_design/a","_rev":"`+rev+`"`) {
		t.Fatalf("rev %s body %s, want rev %s with _id and _rev first", d.Rev, d.Body, rev)
	}
	if d.Def == nil || len(d.Def.Views) != 1 || d.DefErr != nil {
		t.Fatalf("def %+v err %v", d.Def, d.DefErr)
	}
	if src, ok := d.Source("shows", "s"); !ok || !strings.Contains(src, "'x'") {
		t.Fatalf("show source %q %v", src, ok)
	}
	if _, ok := d.Source("shows", "nope"); ok {
		t.Fatal("a missing show found")
	}
	if d.JS == nil {
		t.Fatal("no sandbox")
	}
	if again, _ := pol.Design(ctx, "d", "_design/a"); again != d {
		t.Fatal("a second lookup within the TTL parsed the doc again")
	}
	all, err := pol.Designs(ctx, "d")
	if err != nil || len(all) != 1 || all[0] != d {
		t.Fatalf("Designs: %v %v", all, err)
	}

	// an edit through the policy is seen at once
	rev = call(t, s, 201, "PUT", "/d/_design/a", `{"_rev":"`+rev+`","shows":{"s":"function(){return 'y'}"}}`)["rev"].(string)
	if d, err = pol.Design(ctx, "d", "_design/a"); err != nil || d.Rev != rev {
		t.Fatalf("after the edit: %v %v", d, err)
	}
	if src, _ := d.Source("shows", "s"); !strings.Contains(src, "'y'") {
		t.Fatalf("show source after the edit %q", src)
	}

	// written past the policy (as another node's write arrives): found
	out, err := c.UpdateDocs(ctx, "d", []*pb.DocUpdate{{Id: "_design/b", Body: []byte(`{"filters":{"f":"function(){return true}"}}`)}}, true, 0)
	if err != nil || out[0].Err != nil {
		t.Fatalf("raw write: %v %v", err, out)
	}
	if d, err := pol.Design(ctx, "d", "_design/b"); err != nil || d.Rev != out[0].Rev {
		t.Fatalf("a doc the cache did not hold: %v %v", d, err)
	}
	if all, err := pol.Designs(ctx, "d"); err != nil || len(all) != 2 || all[0].ID != "_design/a" || all[1].ID != "_design/b" {
		t.Fatalf("Designs after the raw write: %v %v", all, err)
	}

	// a deletion is seen at once, as "deleted"
	call(t, s, 200, "DELETE", "/d/_design/a?rev="+rev, nil)
	if _, err := pol.Design(ctx, "d", "_design/a"); err != policy.ErrDesignDeleted {
		t.Fatalf("after the delete: %v, want ErrDesignDeleted", err)
	}
	if all, _ := pol.Designs(ctx, "d"); len(all) != 1 || all[0].ID != "_design/b" {
		t.Fatalf("Designs after the delete: %v", all)
	}

	// the database deleted and made again: nothing of the old one
	if _, err := pol.Design(ctx, "d", "_design/b"); err != nil {
		t.Fatal(err)
	}
	call(t, s, 200, "DELETE", "/d", nil)
	call(t, s, 201, "PUT", "/d", nil)
	if d, err := pol.Design(ctx, "d", "_design/b"); err != policy.ErrMissing {
		t.Fatalf("in the new database: %v %v, want ErrMissing", d, err)
	}
	if all, err := pol.Designs(ctx, "d"); err != nil || len(all) != 0 {
		t.Fatalf("Designs of the new database: %v %v", all, err)
	}
}
