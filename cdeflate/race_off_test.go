//go:build !race

package cdeflate

const raceOn = false
