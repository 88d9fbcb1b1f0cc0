package shard

import (
	"encoding/base64"
	"encoding/binary"

	pb "github.com/settee/settee/proto"
)

// Record kinds, the byte after the 4-byte shard handle.
const (
	kindID    = 'i' // id/<docid>        -> FullDocInfo
	kindSeq   = 's' // seq/<u64 BE>      -> FullDocInfo (copy, seed 002)
	kindBody  = 'b' // body/<docid><rev> -> BodyRecord
	kindLocal = 'l' // local/<docid>     -> LocalDoc
	kindAtt   = 'a' // att/sha256-<b64>  -> raw bytes (att/md5-<b64>: older settee)
	kindMeta  = 'm' // meta              -> ShardMeta
	kindStats = 'x' // stats             -> ShardStats
	kindPurge = 'p' // purge/<u64 BE>    -> PurgeInfo
	kindPart  = 't' // part/<partition>  -> PartitionStats (partitioned databases)
)

// Prefix is the key prefix of every record of the shard copy with handle h.
func Prefix(h uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], h)
	return b[:]
}

type keys struct {
	h [4]byte
}

func newKeys(h uint32) keys {
	var k keys
	binary.BigEndian.PutUint32(k.h[:], h)
	return k
}

func (k keys) kind(c byte, extra int) []byte {
	b := make([]byte, 5, 5+extra)
	copy(b, k.h[:])
	b[4] = c
	return b
}

func (k keys) id(docid string) []byte {
	return append(k.kind(kindID, len(docid)), docid...)
}

func (k keys) idPrefix() []byte { return k.kind(kindID, 0) }

func (k keys) seq(s uint64) []byte {
	return binary.BigEndian.AppendUint64(k.kind(kindSeq, 8), s)
}

func (k keys) seqPrefix() []byte { return k.kind(kindSeq, 0) }

// body keys length-prefix the doc id so that ids holding any byte cannot
// collide with another id's revs.
func (k keys) body(docid, rev string) []byte {
	b := binary.AppendUvarint(k.kind(kindBody, 10+len(docid)+len(rev)), uint64(len(docid)))
	b = append(b, docid...)
	return append(b, rev...)
}

func (k keys) local(docid string) []byte {
	return append(k.kind(kindLocal, len(docid)), docid...)
}

func (k keys) localPrefix() []byte { return k.kind(kindLocal, 0) }

// att is the key of attachment data named by an attachment key (attKey).
func (k keys) att(key string) []byte {
	return append(k.kind(kindAtt, len(key)), key...)
}

// attKey names an attachment's data: "sha256-<base64>" of the stored
// bytes, or, for a record written before settee kept the SHA-256, its
// digest ("md5-<base64>"), under which the older settee stored it. The
// MD5 digest alone must not name new data: two attachments whose bytes
// collide under MD5 (a collision takes seconds to make) would share one
// key, and the second write would replace the bytes the first doc serves.
func attKey(a *pb.AttMeta) string {
	if len(a.Sha256) > 0 {
		return sha256Key(a.Sha256)
	}
	return a.Digest
}

func sha256Key(sum []byte) string {
	return "sha256-" + base64.StdEncoding.EncodeToString(sum)
}

func (k keys) meta() []byte { return k.kind(kindMeta, 0) }

func (k keys) stats() []byte { return k.kind(kindStats, 0) }

func (k keys) partition(p string) []byte {
	return append(k.kind(kindPart, len(p)), p...)
}

func (k keys) purge(s uint64) []byte {
	return binary.BigEndian.AppendUint64(k.kind(kindPurge, 8), s)
}

func (k keys) purgePrefix() []byte { return k.kind(kindPurge, 0) }

func (k keys) attPrefix() []byte { return k.kind(kindAtt, 0) }
