//go:build race

package revtree

// raceEnabled: the race detector makes sync.Pool drop what is put back
// at random, so allocation counts are not what they are in a build.
const raceEnabled = true
