package shard

import (
	"errors"

	pb "github.com/settee/settee/proto"
)

// Errors a shard reports per document or per request. They are proto
// messages so that they cross nodes unchanged; httpgw maps codes to statuses.
var (
	ErrConflict    = &pb.Error{Code: "conflict", Reason: "Document update conflict."}
	ErrNotFound    = &pb.Error{Code: "not_found", Reason: "missing"}
	ErrDeleted     = &pb.Error{Code: "not_found", Reason: "deleted"}
	ErrMissingStub = &pb.Error{Code: "missing_stub", Reason: "Invalid attachment stub"}
	ErrInternal    = &pb.Error{Code: "internal_error", Reason: "storage failure"}
	ErrBadRev      = &pb.Error{Code: "bad_request", Reason: "Invalid rev format"}
)

// errStopping answers work the actor had queued when it was told to stop.
var errStopping = errors.New("shard: stopping")

func perr(code, reason string) *pb.Error { return &pb.Error{Code: code, Reason: reason} }
