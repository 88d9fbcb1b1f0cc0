package coordinator

import (
	"errors"

	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/shard"
)

// The errors the coordinator answers with, for callers to test with
// errors.Is; httpgw's error table (toCouch) turns them into CouchDB
// answers. Errors from the copies pass up wrapped (%w), never rebuilt:
// they are the shard's *pb.Error values, which cross nodes unchanged and
// match with errors.Is by code.
var (
	// ErrDBNotFound is returned for a database that does not exist.
	ErrDBNotFound = errors.New("coordinator: database does not exist")

	// ErrBadSeq is returned for a since value that is not a sequence this
	// database gave out.
	ErrBadSeq = errors.New("coordinator: malformed sequence")

	// ErrNoCopies is a doc's error (Outcome.Err) when no copy of its shard
	// could be reached.
	ErrNoCopies = &pb.Error{Code: "internal_server_error", Reason: "No shard copy of this document could be reached"}

	// ErrNotFound is GetLocal's error for a missing _local doc and
	// GetAtt's for missing attachment data (a doc read answers a missing
	// doc with no Info, not an error). Any not_found from a copy matches
	// it, "deleted" too: errors.Is compares codes.
	ErrNotFound = shard.ErrNotFound

	// ErrConflict is a doc's error in a write (Outcome.Err) when its edit
	// does not extend a leaf of the doc.
	ErrConflict = shard.ErrConflict
)

// replyWithError is a shard answer that may carry a shard error: every
// reply message has one (proto's GetError), so askAll can hand it up
// without knowing the reply's type.
type replyWithError interface{ GetError() *pb.Error }
