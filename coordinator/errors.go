package coordinator

import (
	"errors"

	pb "github.com/settee/settee/proto"
)

// The errors the coordinator answers with, for callers to test with
// errors.Is; httpgw's error table (toCouch) turns them into CouchDB
// answers.
var (
	// ErrDBNotFound is returned for a database that does not exist.
	ErrDBNotFound = errors.New("coordinator: database does not exist")

	// ErrBadSeq is returned for a since value that is not a sequence this
	// database gave out.
	ErrBadSeq = errors.New("coordinator: malformed sequence")

	// ErrNoCopies is a doc's error (Outcome.Err) when no copy of its shard
	// could be reached.
	ErrNoCopies = &pb.Error{Code: "internal_server_error", Reason: "No shard copy of this document could be reached"}
)

// replyWithError is a shard answer that may carry a shard error: every
// reply message has one (proto's GetError), so askAll can hand it up
// without knowing the reply's type.
type replyWithError interface{ GetError() *pb.Error }
