package shard

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// DefaultRevsLimit is CouchDB's default _revs_limit.
const DefaultRevsLimit = 1000

// store is the shard's view of badger. Its read methods are safe for
// concurrent use; apply must only run from the shard's committer, one at a
// time.
type store struct {
	db *badger.DB
	k  keys
	// partitioned and maxPartition: Config's Partitioned and
	// MaxPartitionSize
	partitioned  bool
	maxPartition func() int64
	// applied counts the committer's applies (every write to the copy's
	// keys goes through one); lastSeq and lastPurgeSeq, asked on every
	// view and Mango query to see whether an index is current, each cost
	// a badger iterator's seek, and are kept for as long as it does not
	// move (lastKeySeqCached)
	applied                    atomic.Uint64
	lastSeqHint, lastPurgeHint atomic.Pointer[seqHint]
}

// seqHint is a last seq found while applied was gen.
type seqHint struct{ gen, seq uint64 }

func newStore(cfg Config) *store {
	return &store{db: cfg.DB, k: newKeys(cfg.Handle), partitioned: cfg.Partitioned, maxPartition: cfg.MaxPartitionSize}
}

func loadMeta(db *badger.DB, k keys) (*pb.ShardMeta, error) {
	m := &pb.ShardMeta{RevsLimit: DefaultRevsLimit}
	err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(k.meta())
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error { return proto.Unmarshal(v, m) })
	})
	if err != nil {
		return nil, fmt.Errorf("shard: load meta: %w", err)
	}
	// The meta record is written in the last transaction of a group; a
	// crash between two transactions of one oversized group can leave seqs
	// past it. The by-seq index is the truth.
	err = db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Reverse = true
		opts.Prefix = k.seqPrefix()
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Seek(append(k.seqPrefix(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if it.Valid() {
			key := it.Item().Key()
			if s := beUint64(key[5:]); s > m.UpdateSeq {
				m.UpdateSeq = s
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shard: load meta: %w", err)
	}
	return m, nil
}

func beUint64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

func getProto(txn *badger.Txn, key []byte, m proto.Message) (bool, error) {
	it, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, it.Value(func(v []byte) error { return proto.Unmarshal(v, m) })
}

func (s *store) docInfo(txn *badger.Txn, id string) (*pb.FullDocInfo, error) {
	info, _, err := s.docInfoSized(txn, id)
	return info, err
}

// docInfoSized is docInfo and the size of its stored record; nil and 0
// when the doc does not exist.
func (s *store) docInfoSized(txn *badger.Txn, id string) (*pb.FullDocInfo, int, error) {
	item, err := txn.Get(s.k.id(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	info := &pb.FullDocInfo{}
	n := 0
	err = item.Value(func(v []byte) error {
		n = len(v)
		return decodeInfo(v, info)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("doc info %q: %w", id, err)
	}
	return info, n, nil
}

func (s *store) body(txn *badger.Txn, id, rev string) (*pb.BodyRecord, error) {
	b := &pb.BodyRecord{}
	ok, err := getProto(txn, s.k.body(id, rev), b)
	if err != nil || !ok {
		return nil, err
	}
	return b, nil
}

// attData reads an attachment's data: under the SHA-256 its record names
// (sum), or, for a record written before settee kept one, under its
// digest, where the older settee stored it (attKey).
func (s *store) attData(txn *badger.Txn, digest string, sum []byte) ([]byte, error) {
	if len(sum) == 0 {
		return s.attValue(txn, digest)
	}
	d, err := s.attValue(txn, sha256Key(sum))
	if !errors.Is(err, badger.ErrKeyNotFound) {
		return d, err
	}
	// a record from another copy (GetAtt) that this copy stored before it
	// kept SHA-256 keys: the data under the digest is the record's only if
	// it has the record's SHA-256 (else it may be another doc's colliding
	// bytes)
	d, err = s.attValue(txn, digest)
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(d); !bytes.Equal(got[:], sum) {
		return nil, badger.ErrKeyNotFound
	}
	return d, nil
}

func (s *store) attValue(txn *badger.Txn, key string) ([]byte, error) {
	it, err := txn.Get(s.k.att(key))
	if err != nil {
		return nil, err
	}
	return it.ValueCopy(nil)
}

// readDoc answers a GetDoc, a rendered doc appended to buf (see
// readDocIn); it returns the grown buf.
func (s *store) readDoc(m *pb.GetDoc, buf []byte) (*pb.DocReply, []byte) {
	var reply *pb.DocReply
	err := s.db.View(func(txn *badger.Txn) error {
		reply, buf = s.readDocIn(txn, m, buf)
		return nil
	})
	if err != nil {
		reply = &pb.DocReply{Error: perr(ErrInternal.Code, err.Error())}
	}
	return reply, buf
}

// readDocIn answers m from txn's snapshot. A rendered doc (m.Render) is
// appended to buf, and reply.Rendered is that part of it; the grown buf
// is returned.
func (s *store) readDocIn(txn *badger.Txn, m *pb.GetDoc, buf []byte) (*pb.DocReply, []byte) {
	reply := &pb.DocReply{}
	err := func() error {
		info, err := s.docInfo(txn, m.Id)
		if err != nil {
			return err
		}
		if info == nil {
			return nil
		}
		reply.Info = info
		if m.Render && !m.OpenRevsAll && len(m.Revs) == 0 && !m.WithAttsData {
			buf, err = s.renderWinner(txn, info, m, reply, buf)
			return err
		}
		var want []string
		switch {
		case m.OpenRevsAll:
			for _, l := range revtree.Leaves(info) {
				want = append(want, l.Rev.String())
			}
		case len(m.Revs) > 0:
			want = m.Revs
		default:
			want = []string{info.Winner}
		}
		seen := make(map[string]bool, len(want))
		for _, rs := range want {
			rb, err := s.readRev(txn, info, rs, m)
			if err != nil {
				return err
			}
			for _, b := range rb {
				if seen[b.Rev] {
					continue
				}
				seen[b.Rev] = true
				reply.Bodies = append(reply.Bodies, b)
			}
		}
		return nil
	}()
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	return reply, buf
}

func (s *store) readRev(txn *badger.Txn, info *pb.FullDocInfo, rs string, m *pb.GetDoc) ([]*pb.RevBody, error) {
	r, err := revtree.ParseRev(rs)
	if err != nil {
		return []*pb.RevBody{{Rev: rs, Missing: true}}, nil
	}
	idx := revtree.Find(info, r)
	if idx < 0 {
		return []*pb.RevBody{{Rev: rs, Missing: true}}, nil
	}
	targets := []int{idx}
	if m.Latest && !revtree.IsLeaf(info, idx) {
		targets = targets[:0]
		for _, l := range revtree.Latest(info, idx) {
			targets = append(targets, l.Index)
		}
	}
	out := make([]*pb.RevBody, 0, len(targets))
	for _, i := range targets {
		n := info.Nodes[i]
		rev := revtree.Rev{Pos: n.Pos, Hash: n.Hash}.String()
		if !n.HasBody {
			out = append(out, &pb.RevBody{Rev: rev, Missing: true})
			continue
		}
		b, err := s.body(txn, info.Id, rev)
		if err != nil {
			return nil, err
		}
		if b == nil {
			// compacted away: CouchDB answers such a rev as missing
			out = append(out, &pb.RevBody{Rev: rev, Missing: true})
			continue
		}
		rb := &pb.RevBody{Rev: rev, Deleted: n.Deleted, Json: b.Json, Atts: b.Atts}
		if m.WithAttsData {
			for _, a := range b.Atts {
				d, err := s.attData(txn, a.Digest, a.Sha256)
				if err != nil {
					return nil, fmt.Errorf("attachment %s: %w", a.Name, err)
				}
				rb.AttData = append(rb.AttData, d)
			}
		}
		out = append(out, rb)
	}
	return out, nil
}

func (s *store) readDocInfos(ids []string) *pb.DocInfosReply {
	reply := &pb.DocInfosReply{Infos: make([]*pb.FullDocInfo, len(ids))}
	err := s.db.View(func(txn *badger.Txn) error {
		for i, id := range ids {
			info, err := s.docInfo(txn, id)
			if err != nil {
				return err
			}
			if info == nil {
				info = &pb.FullDocInfo{}
			}
			reply.Infos[i] = info
		}
		return nil
	})
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	return reply
}

func (s *store) readAtt(m *pb.GetAtt) *pb.AttReply {
	reply := &pb.AttReply{}
	err := s.db.View(func(txn *badger.Txn) error {
		d, err := s.attData(txn, m.Digest, m.Sha256)
		reply.Data = d
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		reply.Error = ErrNotFound
	} else if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	return reply
}

func (s *store) getLocal(id string) *pb.LocalReply {
	reply := &pb.LocalReply{}
	err := s.db.View(func(txn *badger.Txn) error {
		d := &pb.LocalDoc{}
		ok, err := getProto(txn, s.k.local(id), d)
		if ok {
			reply.Doc = d
		}
		return err
	})
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	} else if reply.Doc == nil {
		reply.Error = ErrNotFound
	}
	return reply
}
