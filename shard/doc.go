// Package shard is one copy of one shard range of a database: an actor that
// owns its keys in the node's badger instance, commits updates in groups
// (one synced commit serves every update queued while the previous one ran),
// merges revision trees, and keeps the by-id, by-seq, body, local and meta
// records of DESIGN.md. It knows nothing of other shards.
package shard
