package badger

// settee patch.

// WithBackgroundCPU bounds how many goroutines build tables at once, in
// memtable flushes and compactions together: n below GOMAXPROCS leaves a
// P to the goroutines that serve writes (y.Gate). 0, the default, is
// upstream's behaviour: no bound, and every table builder compresses on
// 2*NumCPU goroutines of its own.
func (opt Options) WithBackgroundCPU(n int) Options {
	opt.setteeBackgroundCPU = n
	return opt
}

// setteeYieldKeys is how many keys a gated merge or memtable flush adds
// between offers of its gate slot: a few hundred microseconds of work.
const setteeYieldKeys = 1024

// WithBackgroundNice runs the goroutines that flush memtables and build
// compactions' tables on OS threads of their own at this nice value
// (Linux; elsewhere it does nothing). Their CPU then goes to the threads
// serving writes first, in the kernel's scheduler, which sees the whole
// machine (Go's scheduler does not: a P whose thread the kernel does not
// run looks busy to it). Use it with WithBackgroundCPU below GOMAXPROCS,
// or low-priority threads may hold every P. 0, the default, is upstream's
// behaviour.
func (opt Options) WithBackgroundNice(n int) Options {
	opt.setteeBackgroundNice = n
	return opt
}
