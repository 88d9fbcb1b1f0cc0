// Package metrics is one node's Prometheus metrics, served as text at
// GET /_node/_local/_prometheus: HTTP requests by route, documents read and
// written, shard group commits, replication and compaction progress (read
// from the task registry at scrape time), badger's sizes, and the Go runtime
// and process collectors. Every node has its own registry; nothing is
// registered globally, so several nodes can run in one process.
package metrics
