// Package coordinator carries one request across the shards of a database:
// it finds the shard copies of each doc (crc32 over q equal ranges, as
// CouchDB's mem3), fans work out to them as messages, and merges what they
// answer: per-doc results by integer tag, sorted rows for _all_docs, a
// clustered sequence for _changes. It never touches storage.
package coordinator
