// Package shard is one copy of one shard range of a database: an actor that
// owns its keys in the node's badger instance (package storage), commits
// updates in groups (one synced commit serves every update queued while the
// previous one ran), merges revision trees (package revtree), and keeps the
// by-id, by-seq, body, local and meta records described in DESIGN.md. It
// knows nothing of other shards: what the node's shards share (the badger
// instance, disk accounting, space reclamation) is storage's.
package shard
