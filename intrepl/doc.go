// Package intrepl is internal replication: it keeps the copies of a shard
// range equal, as CouchDB's mem3_sync does. Each local copy pushes to each
// peer copy what the peer lacks: it walks its by-seq index from a
// checkpoint (a _local doc in the local copy, per peer), asks the peer for
// its rev trees (the _revs_diff step), fetches the missing leaf revisions
// with their history and attachments (all reads sent before any is
// awaited), and casts them into the peer copy with new_edits=false, which
// merges them the way replication does, conflicts kept, in batches of up to
// 4 MB, then sends one flush that the peer answers once they are committed
// (backpressure: the next page waits). It reads the peer's rev trees back
// before the checkpoint may pass the page, since a cast has no answer of its
// own. It runs after updates (coalesced)
// and on a periodic sweep, so a node that was down catches up by itself.
package intrepl
