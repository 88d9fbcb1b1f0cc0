package difftest

// Fuzz generates n sequences of steps requests each from seed.
func Fuzz(seed uint64, n, steps int, mode string) []Sequence { return nil }
