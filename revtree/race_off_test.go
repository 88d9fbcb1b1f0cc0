//go:build !race

package revtree

const raceEnabled = false
