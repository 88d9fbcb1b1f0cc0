package shard

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/couchdoc"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/revtree"
)

// renderWinner answers a GetDoc with render: the winner's JSON is made
// inside the read's transaction straight from the stored body record,
// one copy from the stored bytes to the answer, where a decoded
// BodyRecord and couchdoc.Append after it copied each body twice (a
// _find of 25 medium docs spent a quarter of its CPU on those copies and
// their garbage). reply.Bodies gets the winner's rev, deleted and
// missing flags, without its json.
func (s *store) renderWinner(txn *badger.Txn, info *pb.FullDocInfo, m *pb.GetDoc, reply *pb.DocReply, buf []byte) ([]byte, error) {
	r, err := revtree.ParseRev(info.Winner)
	idx := -1
	if err == nil {
		idx = revtree.Find(info, r)
	}
	if idx < 0 || !info.Nodes[idx].HasBody {
		reply.Bodies = append(reply.Bodies, &pb.RevBody{Rev: info.Winner, Missing: true})
		return buf, nil
	}
	item, err := txn.Get(s.k.body(info.Id, info.Winner))
	if errors.Is(err, badger.ErrKeyNotFound) {
		// compacted away: CouchDB answers such a rev as missing
		reply.Bodies = append(reply.Bodies, &pb.RevBody{Rev: info.Winner, Missing: true})
		return buf, nil
	}
	if err != nil {
		return buf, err
	}
	deleted := info.Nodes[idx].Deleted
	reply.Bodies = append(reply.Bodies, &pb.RevBody{Rev: info.Winner, Deleted: deleted})
	err = item.Value(func(v []byte) error {
		rb := pb.RevBody{Rev: info.Winner, Deleted: deleted}
		if err := aliasBodyRecord(v, &rb); err != nil {
			return err
		}
		start := len(buf)
		buf = couchdoc.Append(buf, info.Id, info, &rb, &couchdoc.Options{Conflicts: m.RenderConflicts})
		// the room after it is kept for a doc read alone (a GET
		// appends its newline there); readDocsInto caps it
		reply.Rendered = buf[start:]
		return nil
	})
	return buf, err
}

// aliasBodyRecord decodes a stored BodyRecord into rb with rb.Json
// aliasing b (valid while b is): the body is not copied.
func aliasBodyRecord(b []byte, rb *pb.RevBody) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("shard: body record: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // json
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("shard: body record json: %w", protowire.ParseError(n))
			}
			rb.Json, b = v, b[n:]
		case num == 2 && typ == protowire.BytesType: // atts
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("shard: body record att: %w", protowire.ParseError(n))
			}
			a := &pb.AttMeta{}
			if err := proto.Unmarshal(v, a); err != nil {
				return fmt.Errorf("shard: body record att: %w", err)
			}
			rb.Atts, b = append(rb.Atts, a), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("shard: body record: %w", protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return nil
}
