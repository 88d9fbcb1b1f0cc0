package coordinator

import (
	"context"
	"hash/crc32"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
)

// Placement tells where a database's shard copies live and which nodes are
// up; node implements it.
type Placement interface {
	Lookup(ctx context.Context, db string) (*pb.DbRecord, error)
	PID(ref *pb.ShardRef) *actor.PID
	// Self is this node's name: its copies are read first.
	Self() string
	// Alive reports whether a node answers heartbeats; copies on other
	// nodes are skipped rather than waited for.
	Alive(node string) bool
}

// PointReads is a Placement whose copies serve point reads (GetDoc,
// GetDocInfos) beside their actors, as shard.Reader does. The coordinator
// uses it when its Placement has it: this node's copy is read on the
// request's goroutine and another node's by one message to its reader,
// where the actor's mailbox would add a hand-off on each side.
type PointReads interface {
	// ReadPID addresses the process that answers ref's point reads.
	ReadPID(ref *pb.ShardRef) *actor.PID
	// LocalReader is ref's reader when the copy is on this node, else nil.
	LocalReader(ref *pb.ShardRef) LocalReader
}

// LocalReader reads one copy held by this node, on the caller's goroutine.
type LocalReader interface {
	// ReadDoc answers one doc, a rendered one appended to buf (its
	// DocReply.Rendered a part of it); it returns the grown buf.
	ReadDoc(m *pb.GetDoc, buf []byte) (*pb.DocReply, []byte)
	ReadDocInfos(ids []string) *pb.DocInfosReply
	// ReadDocs answers many docs from one snapshot, the rendered ones
	// appended to buf (each DocReply.Rendered a part of it); it returns
	// the grown buf.
	ReadDocs(ms []*pb.GetDoc, buf []byte) (*pb.DocsReply, []byte)
}

// Range is one shard range with its copies.
type Range struct {
	Begin, End uint32
	Copies     []*pb.ShardRef
	// Partitioned: the database places docs by their partition
	// (PlacementKey); every range of a database says the same.
	Partitioned bool
}

// Ranges groups a database's shard copies by range, in range order.
func Ranges(rec *pb.DbRecord) []Range {
	var out []Range
	for _, s := range rec.Shards {
		if n := len(out); n > 0 && out[n-1].Begin == s.RangeBegin {
			out[n-1].Copies = append(out[n-1].Copies, s)
			continue
		}
		out = append(out, Range{Begin: s.RangeBegin, End: s.RangeEnd, Copies: []*pb.ShardRef{s}, Partitioned: rec.Partitioned})
	}
	return out
}

// HashID is CouchDB's doc placement hash (erlang:crc32 of the id).
func HashID(id string) uint32 { return crc32.ChecksumIEEE([]byte(id)) }

// PlacementKey is what a doc's placement hashes: its id, or in a
// partitioned database its partition (design and local docs keep their
// ids), as CouchDB's couch_partition:shard_key.
func PlacementKey(partitioned bool, id string) string {
	if partitioned {
		if p := shard.PartitionOf(id); p != "" {
			return p
		}
	}
	return id
}

// RangeOf returns the index in ranges of the range holding id.
func RangeOf(ranges []Range, id string) int {
	if len(ranges) == 0 {
		return 0
	}
	return RangeOfKey(ranges, PlacementKey(ranges[0].Partitioned, id))
}

// RangeOfKey returns the index in ranges of the range a placement key
// hashes into (a partition's range: RangeOfKey(ranges, partition)).
func RangeOfKey(ranges []Range, key string) int {
	h := HashID(key)
	lo, hi := 0, len(ranges)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if h > ranges[mid].End {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// SplitRanges returns q equal ranges over the 32-bit hash space, the last
// one ending at 0xffffffff (mem3's split).
func SplitRanges(q int) [][2]uint32 {
	if q < 1 {
		q = 1
	}
	size := (uint64(1) << 32) / uint64(q)
	out := make([][2]uint32, q)
	for i := range q {
		b := uint64(i) * size
		e := b + size - 1
		if i == q-1 {
			e = 1<<32 - 1
		}
		out[i] = [2]uint32{uint32(b), uint32(e)}
	}
	return out
}

// Shards returns a database's ranges with their copies (GET /db/_shards).
func (c *Coordinator) Shards(ctx context.Context, db string) ([]Range, error) {
	_, ranges, err := c.lookup(ctx, db)
	return ranges, err
}

// IsPartitioned reports whether db is a partitioned database (one lookup
// of its record, no ranges built: every doc write asks).
func (c *Coordinator) IsPartitioned(ctx context.Context, db string) (bool, error) {
	rec, err := c.pl.Lookup(ctx, db)
	if err != nil {
		return false, err
	}
	return rec.Partitioned, nil
}

// ShardMap returns a database's record with its ranges (its document in
// the _dbs system database).
func (c *Coordinator) ShardMap(ctx context.Context, db string) (*pb.DbRecord, []Range, error) {
	return c.lookup(ctx, db)
}
