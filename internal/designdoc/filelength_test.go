package designdoc

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxGoLines is the most lines a hand-written Go file of the module may
// have: past it, a file is split by concept into files of the same
// package (docs/testing.md, Contributing).
const maxGoLines = 800

// TestGoFilesAtMostMaxLines fails for every Go file of the module over
// maxGoLines lines, test files, generated files (a "// Code generated …
// DO NOT EDIT." line before the package clause) and third_party left out.
func TestGoFilesAtMostMaxLines(t *testing.T) {
	checked := 0
	walkGoFiles(t, func(path string) {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "third_party/") {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			return
		}
		checked++
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
		if n > maxGoLines {
			t.Errorf("%s has %d lines, more than %d: split it by concept into files of its package (docs/testing.md, Contributing)", rel, n, maxGoLines)
		}
	})
	if checked == 0 {
		t.Fatal("no Go files found")
	}
}
