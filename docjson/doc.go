// Package docjson is the JSON layer of settee's document write path: a
// single-pass byte scanner that validates a request body and, in the same
// pass, pulls out what the database needs to know about a document.
//
// Bodies stay bytes. A document travels from the socket to badger and back as
// raw JSON: settee never decodes a body into map[string]any unless an
// operation needs its fields. What the write path does need is small and
// sits at the top level of the object: the CouchDB special members (_id,
// _rev, _deleted, _revisions, _attachments, ...), which must be checked with
// CouchDB's rules and removed from the stored body. ParseDoc does exactly
// that in one pass over the input: it validates the whole value (RFC 8259,
// strict UTF-8, bounded nesting), extracts and checks the special members and
// emits the rest of the object compactly, byte for byte as the client sent it
// minus insignificant whitespace. ParseBulkDocs splits a _bulk_docs request
// into the raw bytes of its documents in the same way, without decoding them.
//
// On fabric_bench's 14.7 KB "medium" document (BenchmarkParseDoc and its
// neighbours, one core of the 2-core dev machine, best of 8 runs on a busy
// host) ParseDoc ran at ~730 MB/s and Valid at ~1.25 GB/s, against ~330 MB/s
// for json.Valid and ~60 MB/s for json.Unmarshal into map[string]any.
// ParseDoc allocates the output body and one small block holding the Doc and
// its strings; Valid allocates nothing.
//
// Bytes that were validated already, or that a CouchDB-compatible server
// wrote (a replicator's _changes, _bulk_get and _revs_diff answers), are
// walked instead of scanned: SkipValue, Object and Array delimit values
// without checking them and stop safely on what they cannot delimit;
// couchdoc, the replicator and bench walk JSON bytes with them (walk.go
// says why the package keeps both).
//
// Errors are *Error values carrying CouchDB's reason text and error name; they
// unwrap to one of the package's sentinel errors (ErrInvalidJSON,
// ErrNotObject, ErrBadSpecialMember, ...) for errors.Is.
package docjson
