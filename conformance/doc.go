// Package conformance replays a corpus of real Apache CouchDB 3.5.2
// request/response pairs against a real settee node and compares the answers.
//
// # The corpus
//
// The corpus lives in this directory, in testdata/<area>.jsonl (one HTTP
// exchange per line; the format, the placeholders and the names substituted
// are described in testdata/README.md). It is recorded by the project's own
// recorder from a real CouchDB 3.5.2 and is always present, so the tests run
// on a fresh clone with nothing beside it. $SETTEE_CORPUS_DIR replays another
// corpus of the same format instead (e.g. a recording in progress).
//
// The recorder's input is testdata/scenarios/<area>.json: for every scenario
// its setup and steps, each step the request exactly as the record shows it
// (method, path, header labels, body, with the placeholders of values bound
// by earlier steps), the response pointers whose values vary and how
// ("vary": pointer -> kind), and a note. The responses are not in there: they
// are what CouchDB answers.
//
// # Recording
//
//	make record
//	# i.e. go test ./conformance/ -run '^TestRecord$' -record -count=1 -v
//
// TestRecord (skipped without -record) starts a CouchDB 3.5.2 on a free
// 127.0.0.1 port with a fresh data dir using ../shared/couchdb/start.sh
// ($SETTEE_COUCHDB_DIR, else shared/couchdb beside the repository or beside a
// directory above it), checks it is 3.5.2, plays every scenario in order
// (setup as admin, each step's request with the values bound so far, the
// credential labels as the harness sends them, a wait after a batch=ok write
// until it has landed), and writes testdata/<area>.jsonl: database names and
// the base URL as {db}, {db2}, {base}; the vary values as placeholders
// numbered per scenario in order of first sight (N-<rev:K>, <uuid:K>,
// <seq:K>, <time>, <size>, <etag>, <session>, <hash>, <salt>, <boundary>,
// <ref>); only the recorded response headers; the normalise pointers. Then
// CouchDB is stopped and its data dir removed.
//
// Flags: -record.couchdb http://admin:PASSWORD@127.0.0.1:PORT records from a
// running CouchDB instead (it must be fresh: alice's user doc must never have
// existed there, TestRecord checks); -record.out DIR writes elsewhere than
// testdata. The output is deterministic: two recordings from two fresh
// CouchDBs are byte-identical, so after a re-record `git diff testdata` shows
// exactly what changed. To add a case, add a step (or scenario) to
// testdata/scenarios/<area>.json, re-record, review the diff, and run
// TestGolden; list what settee does not pass yet in known_failures.txt.
//
// The recorder's own tests: TestRecorderCanned (one canned scenario and the
// exact lines it must give), TestRecorderErrors, TestRecorderRoundTrip (every
// committed record is re-derived from an answer synthesised from it, byte for
// byte; scenarios and corpus list the same steps) need no CouchDB.
// TestRecorderLive records a few scenarios from a real CouchDB and compares
// them with testdata; TestGoldenCrossCheck compares testdata with the
// starting corpus ../shared/couchdb-golden ($SETTEE_GOLDEN_DIR). Both skip
// with a message when what they need is absent.
//
// # Replaying
//
// TestGolden runs one subtest per scenario (records sharing "scenario", in step
// order) and one sub-subtest per record "name". It implements the replay
// rules of testdata/README.md: {db}/{db2}/{base} substitution (databases
// golden-<scenario> and golden-<scenario>-2), setup requests, credential labels
// (<admin>, <user> = alice, <wrong>, <none>, session cookies from the
// scenario's last POST /_session for that user), placeholders (N-<rev:K>,
// <rev:K>, <uuid:K> and <seq:K> bound on first sight and substituted into
// later requests; <time>, <size>, <etag>, <session>, <hash>, <salt>,
// <boundary>, <ref> match any value), normalise pointers, JSON bodies compared
// structurally (object key order ignored, array order significant unless the
// record's note says otherwise), text bodies line by line (feed lines parsed as
// JSON), and the recorded response headers.
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
// to 5 s, since that write lands a moment later.
//
// TestHarnessSelfCheck replays every record against a synthetic answer built from
// the record itself, so harness bugs show up without a server.
package conformance
