// Package conformance replays the golden corpus of real Apache CouchDB 3.5.2
// request/response pairs (../shared/couchdb-golden, see its README.md) against
// a real settee node and compares the answers.
//
// The corpus is located through $SETTEE_GOLDEN_DIR, else ../../shared/couchdb-golden
// relative to this directory (shared/ sits beside the repository); without it
// TestGolden is skipped.
//
// TestGolden runs one subtest per scenario (records sharing "scenario", in step
// order) and one sub-subtest per record "name". It implements the README's replay
// rules: {db}/{db2}/{base} substitution (databases golden-<scenario> and
// golden-<scenario>-2), setup requests, credential labels (<admin>, <user> =
// alice, <wrong>, <none>, session cookies from the scenario's last POST /_session
// for that user), placeholders (N-<rev:K>, <rev:K>, <uuid:K> and <seq:K> bound on
// first sight and substituted into later requests; <time>, <size>, <etag>,
// <session>, <hash>, <salt>, <boundary>, <ref> match any value), normalise
// pointers, JSON bodies compared structurally (object key order ignored, array
// order significant unless the record's note says otherwise), text bodies line by
// line (feed lines parsed as JSON), and the recorded response headers.
//
// Every difference is reported with the JSON pointer (rooted at the record, e.g.
// /response/body/rows/0/value/rev) of the first differing value, expected vs got.
// Records that CouchDB answers with a 500 where a 4xx is due pass with either the
// recorded answer or any 4xx carrying a CouchDB error body.
//
// known_failures.txt lists the records settee does not pass yet, one name per line
// with a "# reason". A listed record that fails is logged and skipped; a listed
// record that passes fails the test until it is removed from the list, so the list
// only shrinks. TestGolden logs the summary "golden: N passed, M known failures,
// K failed", and TestMain prints it again after all tests, as the last line.
//
// Requests go out byte for byte as recorded (JSON in the query unencoded, %2F kept),
// redirects are not followed and responses are not transparently decompressed.
// The one timing allowance: a GET right after a batch=ok write is retried for up
// to 5 s, since that write "lands a moment later" (README).
//
// TestHarnessSelfCheck replays every record against a synthetic answer built from
// the record itself, so harness bugs show up without a server.
package conformance
