// Package crashtest runs the real settee binary as a subprocess and checks
// durability across process death.
//
// TestKillDuringWrites builds ./cmd/settee once, starts `settee serve` on a
// temporary data dir, drives a concurrent write load (single PUTs creating
// and updating docs, and _bulk_docs batches mixing both), sends SIGKILL at a
// random moment, restarts the binary on the same data dir and port and
// checks that every write acknowledged with 201/202 is there: the doc
// exists, its current revision is the acknowledged one or a descendant of it
// (a write may commit without its reply reaching the client), the body at
// the acknowledged revision is the one written, and doc_count, _all_docs and
// _changes agree. The kill/restart cycle runs three times on one database.
//
// TestSIGTERMGraceful sends SIGTERM during a write load: the process must
// exit 0 within 10 s and every acknowledged write must be there after a
// restart.
//
// TestClusterKillDuringCreates runs three nodes and creates databases
// (q=4 n=3) through the first while one node, or the first itself, is
// killed; after the restart and convergence every name is on all nodes
// (same shard map, writable through each) or on none, and every
// acknowledged create is on all.
//
// SIGKILL leaves the kernel's page cache intact, so these tests catch
// acknowledgements sent before a commit reached the operating system,
// non-atomic commits (doc info, by-seq index and counters out of step) and
// recovery bugs, not a missing fsync (that needs power-loss simulation).
//
// Both tests are skipped with -short. Set CRASHTEST_RACE=1 to build the
// server with the race detector (slower; a race report makes the graceful
// shutdown test fail with exit status 66).
package crashtest
