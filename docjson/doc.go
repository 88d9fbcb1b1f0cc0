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
// Measured on a 2-core machine with fabric_bench's 14.7 KB "medium" document
// (see BenchmarkParseDoc), a scanner of this kind runs at several hundred MB/s
// per core, ahead of json.Valid and more than ten times faster than
// json.Unmarshal into a map, and it allocates only the output body and one
// small block for the extracted fields.
//
// Errors are *Error values carrying CouchDB's reason text and error name; they
// unwrap to one of the package's sentinel errors (ErrInvalidJSON,
// ErrNotObject, ErrBadSpecialMember, ...) for errors.Is.
package docjson
