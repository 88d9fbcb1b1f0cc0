// Package node is the settee process: configuration, the store (package
// storage), the actor system, the database catalog (each database's shard
// map) and the shard actors it supervises, cluster membership and failure
// detection, the replicator and auto-compaction daemons, the HTTP listener,
// start-up and clean shutdown. Tests start real nodes through Start.
package node
