// Package cdeflate is a pure-Go port of C zlib's deflate (1.2.x/1.3, the
// default strategy, windowBits 15, memLevel 8) whose gzip output is byte
// for byte zlib's. CouchDB gzips attachments of compressible types with
// Erlang's zlib and puts the md5 of the gzipped bytes, the attachment's
// digest, into the document's revision id; Go's compress/gzip writes other
// (equally valid) bytes, so without this package settee's revisions, ETags
// and gzip bodies would differ from CouchDB's for the same request.
package cdeflate
