// Package node is the settee process: configuration, the badger instance,
// the actor system, the database catalog (each database's shard map) and
// the shard actors it supervises, the HTTP listener, start-up and clean
// shutdown. Tests start real nodes through Start.
package node
