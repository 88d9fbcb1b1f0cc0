package replicator

// CloseIdleConnections closes the pooled connections of the process-wide
// transport. They outlive every job by design (the pool is shared), so a
// leak test closes them before it counts goroutines.
func CloseIdleConnections() { transport.CloseIdleConnections() }
