package designdoc

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's top, two directories above this package.
const root = "../.."

func TestDesignNamesEveryPackage(t *testing.T) {
	names := tableNames(t)
	if len(names) == 0 {
		t.Fatal("no rows found under DESIGN.md's ## Packages")
	}
	named := func(pkg string) bool {
		for _, n := range names {
			if n == pkg || strings.HasSuffix(n, "/") && strings.HasPrefix(pkg+"/", n) {
				return true
			}
		}
		return false
	}
	for _, pkg := range packages(t) {
		if !named(pkg) {
			t.Errorf("DESIGN.md's package table has no row for %s: add one (what it owns, what it must not)", pkg)
		}
	}
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(n))); err != nil || !st.IsDir() {
			t.Errorf("DESIGN.md's package table names %s, which is not a directory of the repository", n)
		}
	}
}

// tableNames returns the backquoted names in the first cell of each row of
// the table under "## Packages".
func tableNames(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	var names []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			names = append(names, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// packages returns the directories of the module that hold .go files, as
// slash-separated paths from the repository's top.
func packages(t *testing.T) []string {
	var pkgs []string
	walkGoFiles(t, func(path string) {
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if rel = filepath.ToSlash(rel); !slices.Contains(pkgs, rel) {
			pkgs = append(pkgs, rel)
		}
	})
	return pkgs
}

// walkGoFiles calls fn with the path of every .go file of the module,
// skipping testdata, hidden and underscore directories, node_modules and
// nested modules (third_party/badger).
func walkGoFiles(t *testing.T, fn func(path string)) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (third_party/badger)
				}
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			fn(path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
