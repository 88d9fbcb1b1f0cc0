package shard

import (
	"bytes"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
)

// Pages are bounded by rows and bytes so that a range read never holds a
// whole database in memory; the coordinator asks again from the last key.
const (
	defaultPageRows  = 1000
	defaultPageBytes = 1 << 20
)

// rowBytesGuess is about one json_rows row: a short id twice, a rev.
const rowBytesGuess = 96

func pageLimits(limit, maxBytes uint32) (int, int) {
	rows, bytes := int(limit), int(maxBytes)
	if rows <= 0 || rows > defaultPageRows*10 {
		rows = defaultPageRows
	}
	if bytes <= 0 {
		bytes = defaultPageBytes
	}
	return rows, bytes
}

// readRange answers one page of _all_docs (or _local_docs).
func (s *store) readRange(m *pb.ReadRange) *pb.RangeReply {
	reply := &pb.RangeReply{}
	rows, maxBytes := pageLimits(m.Limit, m.MaxBytes)
	if m.JsonRows {
		// sized for the page up front: grown by append, the page was
		// copied about twice over
		reply.Json = make([]byte, 0, min(rows*rowBytesGuess, maxBytes+4096))
		reply.Ids = make([]byte, 0, rows*16)
	}
	prefix := s.k.idPrefix()
	if m.Local {
		prefix = s.k.localPrefix()
	}
	var lastID []byte // json_rows: the last id read, where the next page starts
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.Reverse = m.Descending
		// no prefetch: badger starts a goroutine per item to fetch its
		// value, and these values (doc infos) sit in the LSM tree beside
		// their keys, so a read is a copy: the goroutines were a fifth of
		// an _all_docs stream's CPU
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()

		var seek []byte
		switch {
		case m.HasStart:
			seek = append(append([]byte{}, prefix...), m.StartKey...)
			if m.Descending {
				// reverse seek lands on the last key <= seek; keys with
				// seek as a proper prefix sort after it, so add 0xff.
				seek = append(seek, 0xff)
			}
		case m.Descending:
			seek = append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff)
		default:
			seek = prefix
		}
		var endKey []byte
		if m.HasEnd {
			endKey = []byte(m.EndKey)
		}
		size, read := 0, 0
		for it.Seek(seek); it.Valid(); it.Next() {
			item := it.Item()
			id := item.Key()[len(prefix):]
			if m.HasStart {
				c := bytes.Compare(id, []byte(m.StartKey))
				if m.Descending && (c > 0 || (c == 0 && m.SkipStart)) {
					continue
				}
				if !m.Descending && (c < 0 || (c == 0 && m.SkipStart)) {
					continue
				}
			}
			if endKey != nil {
				c := bytes.Compare(id, endKey)
				if m.Descending {
					c = -c
				}
				if c > 0 || (c == 0 && !m.InclusiveEnd) {
					return nil
				}
			}
			if read >= rows || size >= maxBytes {
				reply.More = true
				return nil
			}
			read++
			if m.JsonRows {
				n, err := appendJSONRow(reply, item)
				if err != nil {
					return err
				}
				size += n
				lastID = append(lastID[:0], id...)
				continue
			}
			row := &pb.Row{}
			if m.Local {
				d := &pb.LocalDoc{}
				if err := item.Value(func(v []byte) error { return proto.Unmarshal(v, d) }); err != nil {
					return err
				}
				row.Local = d
				size += len(d.Json) + len(d.Id)
			} else {
				info := &pb.FullDocInfo{}
				decode := decodeInfo
				if !m.IncludeDocs {
					decode = decodeWinner // the row shows id, winner and deleted only
				}
				if err := item.Value(func(v []byte) error { return decode(v, info) }); err != nil {
					return err
				}
				row.Info = info
				size += 64 + len(info.Id)
				if m.IncludeDocs && !info.Deleted {
					n, err := s.addWinnerBody(txn, row)
					if err != nil {
						return err
					}
					size += n
				}
			}
			reply.Rows = append(reply.Rows, row)
		}
		return nil
	})
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	reply.LastKey = string(lastID)
	return reply
}

// anyWinner is readWinner of a record in either form: an older
// protobuf one is decoded, then seen the same way.
func anyWinner(v []byte, w *winnerRef) error {
	if err := readWinner(v, w); err != errNotV1 {
		return err
	}
	info := &pb.FullDocInfo{}
	if err := decodeWinner(v, info); err != nil {
		return err
	}
	*w = winnerRef{id: []byte(info.Id), seq: info.Seq, deleted: info.Deleted, str: []byte(info.Winner)}
	return nil
}

// AppendAllDocsRow appends a json_rows page's _all_docs row of doc id at
// its winning rev: {"id":…,"key":…,"value":{"rev":…}}.
func AppendAllDocsRow(dst, id, rev []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = docjson.AppendBytes(dst, id)
	dst = append(dst, `,"key":`...)
	dst = docjson.AppendBytes(dst, id)
	dst = append(dst, `,"value":{"rev":`...)
	dst = docjson.AppendBytes(dst, rev)
	return append(dst, `}}`...)
}

// AppendChangeFragment appends a json_rows page's change of doc id, the
// row after its seq: "id":…,"changes":[{"rev":…}] and ,"deleted":true
// for a deleted doc.
func AppendChangeFragment(dst, id, rev []byte, deleted bool) []byte {
	dst = append(dst, `"id":`...)
	dst = docjson.AppendBytes(dst, id)
	dst = append(dst, `,"changes":[{"rev":`...)
	dst = docjson.AppendBytes(dst, rev)
	dst = append(dst, `}]`...)
	if deleted {
		dst = append(dst, `,"deleted":true`...)
	}
	return dst
}

// appendJSONRow adds a by-id record to a json_rows page: its id, and its
// _all_docs row unless the doc is deleted; it returns the bytes added.
func appendJSONRow(reply *pb.RangeReply, item *badger.Item) (int, error) {
	n := 0
	err := item.Value(func(v []byte) error {
		var w winnerRef
		if err := anyWinner(v, &w); err != nil {
			return err
		}
		if w.deleted {
			return nil // _all_docs shows live docs only
		}
		start := len(reply.Json)
		var rb [64]byte
		b := AppendAllDocsRow(reply.Json, w.id, w.appendRev(rb[:0]))
		reply.Json = b
		reply.JsonEnds = append(reply.JsonEnds, uint32(len(b)))
		reply.Ids = append(reply.Ids, w.id...)
		reply.IdEnds = append(reply.IdEnds, uint32(len(reply.Ids)))
		n = len(b) - start + len(w.id)
		return nil
	})
	return n, err
}

// appendJSONChange adds a by-seq record to a json_rows page of changes
// and returns the bytes added.
func appendJSONChange(reply *pb.ChangesReply, item *badger.Item) (int, error) {
	n := 0
	err := item.Value(func(v []byte) error {
		var w winnerRef
		if err := anyWinner(v, &w); err != nil {
			return err
		}
		start := len(reply.Json)
		var rb [64]byte
		b := AppendChangeFragment(reply.Json, w.id, w.appendRev(rb[:0]), w.deleted)
		reply.Json = b
		reply.JsonEnds = append(reply.JsonEnds, uint32(len(b)))
		reply.Seqs = append(reply.Seqs, w.seq)
		n = len(b) - start
		return nil
	})
	return n, err
}

// addWinnerBody puts the winning revision's body in row (include_docs) and
// returns its size; a compacted-away body leaves the row without one.
func (s *store) addWinnerBody(txn *badger.Txn, row *pb.Row) (int, error) {
	b, err := s.body(txn, row.Info.Id, row.Info.Winner)
	if err != nil || b == nil {
		return 0, err
	}
	row.Json, row.Atts = b.Json, b.Atts
	return len(b.Json), nil
}

// readChanges answers one page of the by-seq index. It reads that index
// alone: each seq record carries the doc's id, winner and leaves
// (seqRecord), small enough to sit in badger's LSM tree beside its key.
func (s *store) readChanges(m *pb.ReadChanges) *pb.ChangesReply {
	reply := &pb.ChangesReply{}
	rows, maxBytes := pageLimits(m.Limit, m.MaxBytes)
	if m.JsonRows {
		reply.Json = make([]byte, 0, min(rows*rowBytesGuess, maxBytes+4096)) // as readRange
	}
	prefix := s.k.seqPrefix()
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.Reverse = m.Descending
		opts.PrefetchValues = false // values in the LSM tree: see readRange
		decode := decodeInfo
		if m.WinnerOnly && !m.IncludeDocs {
			decode = decodeWinner
		}
		it := txn.NewIterator(opts)
		defer it.Close()
		var seek []byte
		if m.Descending {
			if m.Before == 0 {
				seek = append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
			} else {
				seek = s.k.seq(m.Before - 1)
			}
		} else {
			seek = s.k.seq(m.Since + 1)
		}
		size := 0
		for it.Seek(seek); it.Valid(); it.Next() {
			if len(reply.Rows)+len(reply.Seqs) >= rows || size >= maxBytes {
				reply.More = true
				return nil
			}
			if m.JsonRows {
				n, err := appendJSONChange(reply, it.Item())
				if err != nil {
					return err
				}
				size += n
				continue
			}
			info := &pb.FullDocInfo{}
			if err := it.Item().Value(func(v []byte) error { return decode(v, info) }); err != nil {
				return err
			}
			row := &pb.Row{Info: info}
			size += 64 + len(info.Id)
			if m.IncludeDocs {
				n, err := s.addWinnerBody(txn, row)
				if err != nil {
					return err
				}
				size += n
			}
			reply.Rows = append(reply.Rows, row)
		}
		return nil
	})
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	return reply
}

// metaDeleted marks a by-id entry whose winner is deleted, in badger's
// per-key user meta, so that counting live docs reads keys only.
const metaDeleted byte = 1

func (s *store) countRange(m *pb.CountRange) *pb.Count {
	reply := &pb.Count{}
	prefix := s.k.idPrefix()
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		seek := prefix
		if m.HasLo {
			seek = append(append([]byte{}, prefix...), m.Lo...)
		}
		for it.Seek(seek); it.Valid(); it.Next() {
			item := it.Item()
			id := item.Key()[len(prefix):]
			if m.HasLo && !m.LoInclusive && string(id) == m.Lo {
				continue
			}
			if m.HasHi {
				c := bytes.Compare(id, []byte(m.Hi))
				if c > 0 || (c == 0 && !m.HiInclusive) {
					return nil
				}
			}
			if item.UserMeta()&metaDeleted == 0 {
				reply.N++
			}
		}
		return nil
	})
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	return reply
}

func (s *store) countChanges(since uint64) *pb.Count {
	reply := &pb.Count{}
	prefix := s.k.seqPrefix()
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(s.k.seq(since + 1)); it.Valid(); it.Next() {
			reply.N++
		}
		return nil
	})
	if err != nil {
		reply.Error = perr(ErrInternal.Code, err.Error())
	}
	return reply
}
