// Package replicator runs CouchDB replications (the protocol of CouchDB's
// replicator: _changes, _revs_diff, _bulk_get, _bulk_docs new_edits=false,
// _local checkpoints) between any two CouchDB-compatible databases, local
// or over HTTP, as protoactor actors run by a Scheduler that follows
// _replicator and serves POST /_replicate and /_scheduler.
//
// DESIGN.md in this directory maps the files to the concepts they hold,
// and says why the pipeline is shaped as it is and how Close waits for
// every goroutine the package starts.
package replicator
