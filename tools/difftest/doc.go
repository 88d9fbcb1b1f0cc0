// Package difftest is settee's differential tester: it sends the same
// request sequence to an Apache CouchDB and to a settee and reports every
// difference between the two answers.
//
// A Sequence (corpus/*.json, or one the fuzzer generates) is a list of
// Steps, each one HTTP request. Both targets get the same steps in the same
// order; values an answer binds (a rev, an etag, a generated id) are kept per
// target, so a later step sends each side its own value. For every step the
// two answers are compared (Compare):
//
//   - the status code;
//   - the headers clients read: Content-Type, ETag, Location,
//     Cache-Control, Expires, Pragma, WWW-Authenticate, Accept-Ranges,
//     Content-Range, Content-Encoding, Set-Cookie, X-Couch-* (but
//     X-Couch-Request-ID, for logs, and X-Couch-Stack-Hash, of a 500);
//   - the body: JSON by shape (members present, value types, array lengths)
//     and by value, except values that differ by nature between two servers
//     or two runs (sequences, times, sizes, the server's uuid, node names,
//     bookmarks): those are compared by type only. Revisions are compared
//     exactly, since settee computes CouchDB's rev ids; a rev (or any other
//     32-hex token: uuids, ids POST made) that differs is reported once, at
//     first sight, and from then on the pair is bound, so one differing
//     edit does not report again in every later answer that names it.
//     Text bodies (attachments, feeds) are compared line by line, JSON lines
//     as JSON.
//
// A difference is a Diff; Diff.Key is its one-line form ("status: couchdb
// 500, settee 400", "body /reason: couchdb ..., settee ..."). The declared
// differences (deliberate.txt: deliberate, each with a reason; known.txt:
// not yet fixed, each with a count that may only shrink) match a step's
// method and path pattern and a Key pattern (Declared).
//
// The fuzzer (Fuzz) generates sequences from a grammar of the API (endpoints
// × methods × parameters × value generators, valid and invalid) from a seed;
// a failing sequence prints in corpus form, to be replayed or kept.
//
// TestDiffCorpus runs the CI corpus against a real CouchDB
// (internal/testcouch; skipped where there is none) and a real settee; the
// command (cmd/difftest) runs the whole corpus or the fuzzer against any two
// URLs. docs/difftest.md says how to run both by hand.
package difftest
