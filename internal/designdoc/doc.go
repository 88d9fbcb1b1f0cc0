// Package designdoc holds no code: its tests keep DESIGN.md's package
// table true to the tree, and the module's Go files short enough to read.
//
// TestDesignNamesEveryPackage walks the module (skipping testdata, hidden
// and underscore directories, node_modules, and nested modules such as
// third_party/badger) and fails for every directory holding Go files,
// test files alone included, that no row of the table under DESIGN.md's
// "## Packages" names: a row names a package by its path in backquotes in
// its first cell (several may share a row, "| `crashtest`, `conformance` |"),
// or a whole tree by a path ending in a slash ("| `scripts/` |"). It fails
// too for a name in that column that is not a directory of the repository,
// so a package removed or renamed takes its row along.
//
// TestGoFilesAtMostMaxLines walks the same tree and fails for every Go
// file over 800 lines, except test files, generated files (a "// Code
// generated … DO NOT EDIT." line before the package clause, as go/ast's
// IsGenerated reads it) and third_party: such a file is split by concept
// into files of its package (docs/testing.md, Contributing).
package designdoc
