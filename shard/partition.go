package shard

import (
	"errors"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
)

// ErrPartitionOverflow refuses a write to a partition whose docs already
// hold couchdb/max_partition_size bytes (HTTP 403).
func errPartitionOverflow(id string) *pb.Error {
	return perr("partition_overflow", "Partition limit exceeded due to update on '"+id+"'")
}

// PartitionOf is the partition of a doc id in a partitioned database: the
// part before its first ':'. Design and local docs, and ids without a
// ':', have none ("").
func PartitionOf(id string) string {
	if strings.HasPrefix(id, "_design/") || strings.HasPrefix(id, "_local/") {
		return ""
	}
	p, _, ok := strings.Cut(id, ":")
	if !ok {
		return ""
	}
	return p
}

// CheckPartitionedID applies couch_partition's rules to the id of a doc
// written to a partitioned database (an id CouchDB's general rules
// accept): design and local docs are exempt; another needs a partition
// and a doc id, "p:docid". nil when it passes.
func CheckPartitionedID(id string) *pb.Error {
	if strings.HasPrefix(id, "_design/") || strings.HasPrefix(id, "_local/") {
		return nil
	}
	p, rest, ok := strings.Cut(id, ":")
	switch {
	case !ok:
		return perr("illegal_docid", "Doc id must be of form partition:id")
	case p == "":
		return perr("illegal_partition", "Partition must not be empty")
	case rest == "":
		return perr("illegal_docid", "Document id must not be empty")
	}
	return nil
}

// sizeDelta is how one doc's write moves its shard's (and partition's)
// counts and sizes.
type sizeDelta struct{ docs, dels, ext, act int64 }

func (d *sizeDelta) add(o sizeDelta) {
	d.docs += o.docs
	d.dels += o.dels
	d.ext += o.ext
	d.act += o.act
}

// countDelta is the count change of a doc that existed (or not) and was
// deleted (or not) before and after.
func countDelta(existed, oldDeleted, exists, deleted bool) sizeDelta {
	var d sizeDelta
	if existed {
		if oldDeleted {
			d.dels--
		} else {
			d.docs--
		}
	}
	if exists {
		if deleted {
			d.dels++
		} else {
			d.docs++
		}
	}
	return d
}

// account moves the shard's header by d and, in a partitioned database,
// the doc's partition by the same amounts (written at the group's end).
func (s *store) account(w *writer, meta *pb.ShardMeta, id string, d sizeDelta) {
	meta.DocCount = uint64(int64(meta.DocCount) + d.docs)
	meta.DelCount = uint64(int64(meta.DelCount) + d.dels)
	meta.ExternalSize += d.ext
	meta.ActiveSize += d.act
	if !s.partitioned {
		return
	}
	p := PartitionOf(id)
	if p == "" {
		return
	}
	if w.parts == nil {
		w.parts = map[string]*sizeDelta{}
	}
	pd := w.parts[p]
	if pd == nil {
		pd = &sizeDelta{}
		w.parts[p] = pd
	}
	pd.add(d)
}

// overflow reports whether a new_edits=true write that grows id's
// partition is refused: the partition's docs held max_partition_size
// bytes or more when the group began. CouchDB checks the size before the
// update, so the write that crosses the limit is accepted; deletions,
// edits that shrink a doc and replicated writes get through.
func (s *store) overflow(w *writer, id string) (bool, error) {
	if !s.partitioned || s.maxPartition == nil {
		return false, nil
	}
	max := s.maxPartition()
	p := PartitionOf(id)
	if max <= 0 || p == "" {
		return false, nil
	}
	if w.partSizes == nil {
		w.partSizes = map[string]int64{}
	}
	size, ok := w.partSizes[p]
	if !ok {
		st, err := s.partitionStats(w.txn, p)
		if err != nil {
			return false, err
		}
		size = st.ExternalSize
		w.partSizes[p] = size
	}
	return size >= max, nil
}

// writePartitions adds the group's partition deltas to their records.
func (s *store) writePartitions(w *writer) error {
	for p, d := range w.parts {
		st, err := s.partitionStats(w.txn, p)
		if err != nil {
			return err
		}
		st.DocCount = uint64(int64(st.DocCount) + d.docs)
		st.DelCount = uint64(int64(st.DelCount) + d.dels)
		st.ExternalSize += d.ext
		st.ActiveSize += d.act
		if st.DocCount == 0 && st.DelCount == 0 {
			if err := w.del(s.k.partition(p)); err != nil {
				return err
			}
			continue
		}
		b, err := proto.Marshal(st)
		if err != nil {
			return err
		}
		if err := w.set(s.k.partition(p), b); err != nil {
			return err
		}
	}
	return nil
}

// partitionStats reads one partition's record (zero when it has none).
func (s *store) partitionStats(txn *badger.Txn, p string) (*pb.PartitionStats, error) {
	st := &pb.PartitionStats{}
	it, err := txn.Get(s.k.partition(p))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	err = it.Value(func(v []byte) error { return proto.Unmarshal(v, st) })
	return st, err
}

// readPartition answers GetPartitionInfo on a snapshot.
func (s *store) readPartition(m *pb.GetPartitionInfo) *pb.PartitionInfo {
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	st, err := s.partitionStats(txn, m.Partition)
	if err != nil {
		return &pb.PartitionInfo{Error: perr("internal_error", err.Error())}
	}
	return &pb.PartitionInfo{Stats: st}
}
