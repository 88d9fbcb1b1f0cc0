// Package intrepl is internal replication: it keeps the copies of a shard
// range equal, as CouchDB's mem3_sync does. Each local copy pushes to each
// peer copy what the peer lacks: it walks its by-seq index from a
// checkpoint (a _local doc in the local copy, per peer), asks the peer for
// its rev trees, fetches the missing leaf revisions with their history and
// attachments, and writes them with new_edits=false, which merges them the
// way replication does, conflicts kept. It runs after updates (coalesced)
// and on a periodic sweep, so a node that was down catches up by itself.
package intrepl
