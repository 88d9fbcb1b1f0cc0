//go:build race

package cdeflate

// raceOn: under -race (make test's pass) the big inputs are left out; a
// run without it checks them all (about 35 s).
const raceOn = true
