package storage

import "path/filepath"

// absDir is dir as /proc/self/maps names the files in it.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		dir = a
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	return dir
}

// fileRSSAllowMB is the file-backed RSS a node leaves alone before its
// trimmer pages the value log out: a quarter of the memory budget (the
// executable's own pages count too).
func fileRSSAllowMB(memoryMB int) int { return max(memoryMB/4, 16) }
