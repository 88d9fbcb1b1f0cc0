// Package designdoc holds no code: its test keeps DESIGN.md's package
// table true to the tree.
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
package designdoc
