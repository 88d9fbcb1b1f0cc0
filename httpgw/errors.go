package httpgw

import (
	"context"
	"errors"
	"net/http"

	"github.com/settee/settee/actors"
	"github.com/settee/settee/auth"
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/mango"
	"github.com/settee/settee/node"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/reduce"
	"github.com/settee/settee/smoosh"
	"github.com/settee/settee/views"
)

// couchError is an error with its CouchDB wire form.
type couchError struct {
	status int
	code   string
	reason string
	// noReason: the body has no reason member (CouchDB's bare not_found
	// of an unknown /_scheduler path is {"error":"not found"})
	noReason bool
}

func (e *couchError) Error() string { return e.code + ": " + e.reason }

func newErr(status int, code, reason string) *couchError {
	return &couchError{status: status, code: code, reason: reason}
}

func badRequest(reason string) *couchError { return newErr(400, "bad_request", reason) }

var (
	errInvalidJSON   = badRequest("invalid UTF-8 JSON")
	errBadRev        = badRequest("Invalid rev format")
	errMissingRev    = newErr(409, "not_found", "missing_rev") // CouchDB's {{not_found, missing}, Rev}
	errDBNotFound    = newErr(404, "not_found", "Database does not exist.")
	errMissing       = newErr(404, "not_found", "missing")
	errNotFoundBare  = &couchError{status: 404, code: "not found", noReason: true}
	errDeleted       = newErr(404, "not_found", "deleted")
	errConflict      = newErr(409, "conflict", "Document update conflict.")
	errNotAdmin      = newErr(401, "unauthorized", "You are not a server admin.")
	errBadCType      = newErr(415, "bad_content_type", "Content-Type must be application/json")
	errDBExists      = newErr(412, "file_exists", "The database could not be created, the file already exists.")
	errTooLarge      = newErr(413, "too_large", "the request entity is too large")
	errBadSeq        = badRequest("Malformed sequence supplied in 'since' parameter.")
	errIllegalDocID  = newErr(400, "illegal_docid", "Only reserved document ids may start with underscore.")
	errDocIDEmpty    = newErr(400, "illegal_docid", "Document id must not be empty")
	errDocIDNotUTF8  = newErr(400, "illegal_docid", "Document id must be valid UTF-8")
	errRevMismatchQ  = badRequest("Document rev from request body and query string have different values")
	errRevMismatchIM = badRequest("Document rev and etag have different values")
	errBadLocalID    = badRequest("Invalid _local document id.")
)

// codeStatus maps error names that cross actors (pb.Error codes) to HTTP
// statuses.
var codeStatus = map[string]int{
	"not_found":                404,
	"conflict":                 409,
	"bad_request":              400,
	"missing_stub":             412,
	"precondition_failed":      412,
	"forbidden":                403,
	"unauthorized":             401,
	"doc_validation":           400,
	"illegal_docid":            400,
	"illegal_partition":        400,
	"partition_overflow":       403,
	"document_too_large":       413,
	"attachment_too_large":     413,
	"internal_error":           500,
	"request_entity_too_large": 413,
	// design docs and their JavaScript (views, couchjs)
	"compilation_error":  400,
	"invalid_design_doc": 400,
}

// statusOf is the status of an error name; 500 for a name not in
// codeStatus (a JavaScript function's own, os_process_error, …).
func statusOf(code string) int {
	if st, ok := codeStatus[code]; ok {
		return st
	}
	return 500
}

// toCouch is the one place an error becomes CouchDB's wire form: the
// packages below answer with their own exported error values and types,
// and this table says what a client sees for each.
func toCouch(err error) *couchError {
	var ce *couchError
	var pe *pb.Error
	var dj *docjson.Error
	var me *mango.Error
	var mbe *http.MaxBytesError
	var re *auth.RuleError
	var de *views.DesignError
	var je *couchjs.Error
	var rde *reduce.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, coordinator.ErrDBNotFound):
		return errDBNotFound
	case errors.Is(err, coordinator.ErrBadSeq):
		return errBadSeq
	case errors.Is(err, node.ErrDBExists):
		return errDBExists
	case errors.As(err, &pe):
		return newErr(statusOf(pe.Code), pe.Code, pe.Reason)
	case errors.As(err, &dj):
		return newErr(400, dj.CouchError, dj.Reason)
	case errors.As(err, &me):
		return badRequest(me.Reason)
	case errors.Is(err, couchdoc.ErrNotJSONPart):
		return errBadCType
	case errors.Is(err, couchdoc.ErrDocTooLarge):
		return newErr(413, "document_too_large", "")
	case errors.Is(err, couchdoc.ErrBadMultipart):
		return badRequest(err.Error())
	case errors.As(err, &mbe):
		return errTooLarge
	case errors.As(err, &re):
		return newErr(403, "forbidden", re.Reason)
	case errors.As(err, &de):
		return newErr(statusOf(de.Code), de.Code, de.Reason)
	case errors.As(err, &rde):
		return newErr(500, rde.Name, rde.Reason)
	case errors.As(err, &je):
		return newErr(statusOf(je.Code), je.Code, je.Reason)
	case errors.Is(err, context.DeadlineExceeded):
		return newErr(500, "timeout", "The request could not be processed in a reasonable amount of time.")
	case errors.Is(err, actors.ErrUnreachable):
		// no copy that the request needs answered (its node is down):
		// CouchDB's answer when a range has no live copy
		return newErr(500, "nodedown", "progress not possible")
	// the cluster admin endpoints (/_cluster_setup, /_node/_local/_nodes,
	// /_node/<name>/…, PUT /db with a shard map no node set can meet)
	case errors.Is(err, node.ErrBadCredentials):
		return nodeErr(err, 400, "bad_request", "the other node refused the credentials")
	case errors.Is(err, node.ErrClusterUnreachable):
		return nodeErr(err, 400, "bad_request", "the other node did not answer on its node port: is it running with --node-addr and the same cluster secret?")
	case errors.Is(err, node.ErrNotClustered):
		return nodeErr(err, 400, "bad_request", "no cluster")
	case errors.Is(err, node.ErrNoSuchMember):
		return nodeErr(err, 404, "not_found", "no such node")
	case errors.Is(err, node.ErrQuorum):
		return nodeErr(err, 400, "bad_request", "the shard map cannot be met")
	// /_node/_local/_config
	case errors.Is(err, node.ErrConfigNotFound):
		return newErr(404, "not_found", "unknown_config_value")
	case errors.Is(err, node.ErrConfigForbidden):
		return newErr(403, "forbidden", "Config section blacklisted for modification over HTTP API.")
	case errors.Is(err, node.ErrConfigBadValue), errors.Is(err, smoosh.ErrUnknownKey), errors.Is(err, smoosh.ErrBadValue):
		return badRequest(err.Error())
	}
	return newErr(500, "unknown_error", err.Error())
}

// nodeErr is a node error's answer: the reason says what went wrong, then
// the node's own words.
func nodeErr(err error, status int, code, reason string) *couchError {
	return newErr(status, code, reason+": "+err.Error())
}
