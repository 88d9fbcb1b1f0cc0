package replicator

import "time"

// CloseIdleConnections closes the pooled connections of the process-wide
// transport. They outlive every job by design (the pool is shared), so a
// leak test closes them before it counts goroutines.
func CloseIdleConnections() { transport.CloseIdleConnections() }

// SetFilterRecheck sets how often running _replicator docs' filters are
// read again (for nodes whose Config leaves it 0) and returns a func that
// puts the old value back.
func SetFilterRecheck(d time.Duration) func() {
	old := filterRecheckDefault.Swap(int64(d))
	return func() { filterRecheckDefault.Store(old) }
}
