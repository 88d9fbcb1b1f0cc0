package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// designReadersAllowed are the functions outside the policy that may read
// a design doc with a point read of their own, each for a reason that
// is not what the design doc defines for a query ("file:function").
var designReadersAllowed = map[string]string{
	"node/sysdbs.go:ensureUsersDesign": "the node installs _users/_design/_auth when its copy lacks it: a write's check, not a use",
	"httpgw/mangoidx.go:readDDoc":      "creating or deleting a Mango index edits its design doc: the edit needs the current revision, not the cache's",
	"replicator/filterid.go:designDoc": "a replication's id hashes its filter's source as the source database has it now, read uncached as CouchDB's replicator reads it",
}

// TestDesignDocsComeFromThePolicy fails when code outside the policy
// reads a design doc itself rather than through Policy.Design or
// Policy.Designs (the one loader and cache of design docs). The rule, on
// the syntax: a pb.GetDoc literal (the coordinator's point read) whose
// Id is
//
//   - a string literal beginning "_design/", or a concatenation that
//     begins with one ("_design/" + name);
//   - a name or selector that says it is a design doc's id ("ddoc" or
//     "design" a word of it: ddocID, auth.UsersDesignID);
//
// or any pb.GetDoc literal in a function so named (readDDoc,
// designDoc). Reading a doc the user named by id (GET
// /db/_design/x, an attachment of it) builds its literal from a plain
// id and is not caught: those are reads of the doc, not uses of it.
func TestDesignDocsComeFromThePolicy(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == "third_party", strings.HasPrefix(d.Name(), "."),
				rel == "policy", rel == "coordinator", rel == "shard", rel == "intrepl":
				return filepath.SkipDir // the policy itself, or below it
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
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			named := designish(fn.Name.Name)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok || !isGetDoc(lit.Type) {
					return true
				}
				if !named && !designID(lit) {
					return true
				}
				key := rel + ":" + fn.Name.Name
				if _, ok := designReadersAllowed[key]; ok {
					seen[key] = true
					return true
				}
				bad = append(bad, fset.Position(lit.Pos()).String()+" ("+fn.Name.Name+")")
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: reads a design doc itself, not through policy.Design/Designs", b)
	}
	for key := range designReadersAllowed {
		if !seen[key] {
			t.Errorf("%s is allowed to read design docs but does not: drop it from designReadersAllowed", key)
		}
	}
}

// isGetDoc: the literal's type is pb.GetDoc.
func isGetDoc(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "GetDoc"
}

// designID: the literal's Id is a design doc's by the rule above.
func designID(lit *ast.CompositeLit) bool {
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Id" {
			continue
		}
		v := kv.Value
		for {
			b, ok := v.(*ast.BinaryExpr)
			if !ok || b.Op != token.ADD {
				break
			}
			v = b.X // the leftmost operand
		}
		switch v := v.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(v.Value)
			return err == nil && strings.HasPrefix(s, "_design/")
		case *ast.Ident:
			return designish(v.Name)
		case *ast.SelectorExpr:
			return designish(v.Sel.Name)
		}
	}
	return false
}

// designWord: "ddoc" or "design" as a word of a Go name (ddocID,
// readDDoc, UsersDesignID, design_id; not findDocs).
var designWord = regexp.MustCompile(`(^|_)(?i:ddoc|design)|(DDoc|Design)`)

func designish(name string) bool { return designWord.MatchString(name) }
