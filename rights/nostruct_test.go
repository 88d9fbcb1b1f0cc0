package rights_test

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// authPaths are the code that authenticates users or decides their
// rights: packages auth and rights whole, and httpgw's files of logins,
// sessions, authentication handlers, _security and _users.
var authPaths = map[string][]string{ // package dir → files ("" all)
	"auth":   nil,
	"rights": nil,
	"policy": nil,
	"httpgw": {"auth.go", "authconf.go", "authjwt.go", "authproxy.go", "users.go"},
}

// TestNoStructDecodingOnAuthPaths enforces the rule of docs/security.md
// ("Documents that grant rights"): on an authentication or authorization
// path nothing decodes JSON into a Go struct, because encoding/json
// matches a struct's fields case-insensitively ("Roles" fills Roles
// tagged "roles") where CouchDB's names are exact.
//
// The rule, checked on the type-checked code: a call of encoding/json's
// Unmarshal, or of the Decode method of an encoding/json Decoder, whose
// target's type reaches a struct type through any pointers, slices,
// arrays, maps (keys or values) and named types is refused. Targets that
// are strings, numbers, json.RawMessage, maps of those, slices of those,
// or interfaces (decoded as maps, names exact) pass. Package rights'
// token walk and httpgw's decodeObject (which matches a struct's tags
// exactly over a map) are how a struct is filled instead.
func TestNoStructDecodingOnAuthPaths(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// export data of every dependency, as the compiler wrote it
	cmd := exec.Command("go", "list", "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}", "./auth", "./rights", "./policy", "./httpgw")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	for dir, only := range authPaths {
		cmd := exec.Command("go", "list", "-f", "{{join .GoFiles \"\\n\"}}", "./"+dir)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", dir, err)
		}
		var files []*ast.File
		for _, name := range strings.Fields(string(out)) {
			f, err := parser.ParseFile(fset, filepath.Join(root, dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check("github.com/settee/settee/"+dir, fset, files, info); err != nil {
			t.Fatalf("type-checking %s: %v", dir, err)
		}
		checked := 0
		for _, f := range files {
			name := filepath.Base(fset.Position(f.Pos()).Filename)
			if only != nil && !slices.Contains(only, name) {
				continue
			}
			checked++
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if target := decodeTarget(info, call); target != nil {
					if tv, ok := info.Types[target]; ok && reachesStruct(tv.Type, map[types.Type]bool{}) {
						t.Errorf("%s: JSON decoded into %s, which holds a struct: names would match case-insensitively (use package rights)",
							fset.Position(call.Pos()), tv.Type)
					}
				}
				return true
			})
		}
		if only != nil && checked != len(only) {
			t.Errorf("%s: checked %d of the files %v: one was renamed or removed; update authPaths", dir, checked, only)
		}
	}
}

// decodeTarget is the argument a call decodes JSON into, when it is
// json.Unmarshal or (*json.Decoder).Decode; nil for any other call.
func decodeTarget(info *types.Info, call *ast.CallExpr) ast.Expr {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	obj := info.Uses[sel.Sel]
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "encoding/json" {
		return nil
	}
	switch {
	case fn.Name() == "Unmarshal" && len(call.Args) == 2:
		return call.Args[1]
	case fn.Name() == "Decode" && len(call.Args) == 1:
		if recv := fn.Signature().Recv(); recv != nil && strings.HasSuffix(recv.Type().String(), "encoding/json.Decoder") {
			return call.Args[0]
		}
	}
	return nil
}

// reachesStruct reports whether decoding into a value of type t could
// fill a struct's fields.
func reachesStruct(t types.Type, seen map[types.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch u := t.Underlying().(type) {
	case *types.Struct:
		return true
	case *types.Pointer:
		return reachesStruct(u.Elem(), seen)
	case *types.Slice:
		return reachesStruct(u.Elem(), seen)
	case *types.Array:
		return reachesStruct(u.Elem(), seen)
	case *types.Map:
		return reachesStruct(u.Key(), seen) || reachesStruct(u.Elem(), seen)
	}
	return false
}

// TestNoStructDecodingRuleBites: the rule refuses what it must.
func TestNoStructDecodingRuleBites(t *testing.T) {
	type cred struct{ Roles []string }
	for _, c := range []struct {
		t    types.Type
		want bool
	}{
		{types.NewPointer(types.NewStruct(nil, nil)), true},
		{types.NewSlice(types.NewPointer(types.NewStruct(nil, nil))), true},
		{types.NewMap(types.Typ[types.String], types.NewStruct(nil, nil)), true},
		{types.NewPointer(types.NewMap(types.Typ[types.String], types.NewInterfaceType(nil, nil))), false},
		{types.NewPointer(types.NewSlice(types.Typ[types.String])), false},
		{types.NewPointer(types.Typ[types.String]), false},
	} {
		if got := reachesStruct(c.t, map[types.Type]bool{}); got != c.want {
			t.Errorf("%s: %v, want %v", c.t, got, c.want)
		}
	}
	// what the rule stands on: encoding/json fills a field named in
	// another case
	var c cred
	if err := json.Unmarshal([]byte(`{"ROLES":["_admin"]}`), &c); err != nil || len(c.Roles) != 1 {
		t.Fatalf("encoding/json no longer matches fields case-insensitively (%v %v): the rule may be eased", c, err)
	}
}
