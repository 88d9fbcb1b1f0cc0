// Package bench is the client side of `settee bench`: CouchDB's fabric_bench
// workload (src/fabric/src/fabric_bench.erl in apache/couchdb) run over HTTP
// against any CouchDB-compatible server, using only the public API.
//
// Run creates a throwaway database named fabricbenchdb-<unix µs> (with ?q=&n=
// when asked), then runs fabric_bench's phases in its order and with its
// document shapes (small ≈ 335 B, medium ≈ 14.6 KB, large ≈ 146 KB):
//
//  1. Add: Docs documents with ids "Docs".."1" through POST /db/_bulk_docs in
//     batches of BatchSize; a batch answered 201 counts as ok, 202 as
//     accepted. Then GET /db must report doc_count == Docs.
//  2. Get: GET /db/<id> of uniformly random existing ids, sequentially, Docs
//     times (fabric_bench's count; Gets overrides it).
//  3. All docs: one streamed GET /db/_all_docs, rows/s.
//  4. All docs w/ include_docs: the same with include_docs=true.
//  5. Changes: one streamed GET /db/_changes, rows/s.
//  6. Single doc updates: IndividualDocs sequential PUT /db/<random id> of new
//     documents, as fabric_bench's put_docs does (UpdateSameDoc instead
//     rewrites one document, passing its _rev each time).
//
// and deletes the database. Each phase prints fabric_bench's line
// (" * <label> (Hz): <rounded rate>") followed by the per-request p50/p99
// latency; "Time to run all benchmarks" sums phases 1, 2, 3, 5 and 6, as
// fabric_bench does. Differences from fabric_bench, all forced by going over
// HTTP or asked for: adds run Concurrency batches in parallel (1 reproduces
// fabric_bench), there is no wait for the internal replicator backlog and no
// smoosh (auto-compaction) switch, and the environment block reports what the
// public API exposes.
//
// Document bodies are built from byte templates (no reflection) and, up to
// PregenMB, generated before the clock starts, so the client leaves the CPU
// to the server it measures. Rows of the streaming phases are decoded one at
// a time with encoding/json's Decoder and never collected.
//
// cmd/settee wires it as:
//
//	var cfg bench.Config
//	cfg.RegisterFlags(fs)
//	// after fs.Parse:
//	res, err := bench.Run(ctx, cfg, os.Stdout, os.Stderr)
package bench
