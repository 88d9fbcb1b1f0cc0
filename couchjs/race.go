//go:build race

package couchjs

// raceEnabled: built with -race (see limitAddressSpace).
const raceEnabled = true

// raceMemoryFactor scales the resident bound the parent holds a worker to
// (Config.WorkerMemory): the race detector's shadow memory is resident
// too, several times the heap.
const raceMemoryFactor = 3
