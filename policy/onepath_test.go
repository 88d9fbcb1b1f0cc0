package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writersAllowed are the files that may write documents through the
// coordinator directly, each for a reason that is not a user's write.
var writersAllowed = map[string]string{
	"policy/write.go":         "the policy's own Write",
	"node/sysdbs.go":          "the node installs _users/_design/_auth, as CouchDB's server does",
	"replicator/scheduler.go": "the scheduler records a job's state in its _replicator doc, as CouchDB's replicator does",
	"replicator/local.go":     "an endpoint built without a policy (tests that build one alone); the scheduler always sets one",
}

// TestUserWritesGoThroughThePolicy fails when code outside the files
// above calls UpdateDocs, the coordinator's raw write: every path that
// writes for a user (HTTP handlers, replication, the console, anything
// added later) must go through policy.Write and its rules.
func TestUserWritesGoThroughThePolicy(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "third_party" || strings.HasPrefix(d.Name(), ".") || rel == "coordinator" || rel == "shard" || rel == "intrepl" {
				return filepath.SkipDir // below the policy, or not settee's
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "UpdateDocs" {
				if _, allowed := writersAllowed[filepath.ToSlash(rel)]; !allowed {
					bad = append(bad, fset.Position(call.Pos()).String())
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: writes through the coordinator, not policy.Write", b)
	}
}
