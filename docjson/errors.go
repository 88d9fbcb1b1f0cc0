package docjson

import "errors"

// Sentinel errors. Every error returned by this package is an *Error that
// unwraps to one of these, so callers can test with errors.Is and read
// CouchDB's reason text and error name from the *Error (errors.As). All of
// them answer HTTP 400 in CouchDB. Error() of a sentinel is the reason
// text clients get (errOf), so it is worded as CouchDB words it, capitals
// and full stops included, against Go's style for error strings.
var (
	// ErrInvalidJSON: the input is not exactly one well-formed JSON value
	// (CouchDB: bad_request "invalid UTF-8 JSON").
	ErrInvalidJSON = errors.New("invalid UTF-8 JSON")
	// ErrNotObject: a document is valid JSON but not an object
	// (bad_request "Document must be a JSON object").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrNotObject = errors.New("Document must be a JSON object")
	// ErrIDNotString: _id is not a string
	// (illegal_docid "Document id must be a string").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrIDNotString = errors.New("Document id must be a string")
	// ErrBadRev: _rev is not a string (bad_request "Invalid rev format").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrBadRev = errors.New("Invalid rev format")
	// ErrBadSpecialMember: an unknown top-level member starting with "_", or
	// a known one of the wrong type (doc_validation
	// "Bad special document member: _foo").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrBadSpecialMember = errors.New("Bad special document member")
	// ErrBadRevisions: _revisions is an object but its start or ids are wrong
	// (doc_validation, e.g. "_revisions.start isn't an integer.").
	ErrBadRevisions = errors.New("invalid _revisions")
	// ErrBodyNotObject: a _bulk_docs body is not an object
	// (bad_request "Request body must be a JSON object").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrBodyNotObject = errors.New("Request body must be a JSON object")
	// ErrMissingDocs: a _bulk_docs body has no docs member
	// (bad_request "POST body must include `docs` parameter.").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrMissingDocs = errors.New("POST body must include `docs` parameter.")
	// ErrDocsNotArray: docs is not an array
	// (bad_request "`docs` parameter must be an array.").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrDocsNotArray = errors.New("`docs` parameter must be an array.")
	// ErrBadNewEdits: new_edits is present but not a boolean
	// (bad_request "`new_edits` parameter must be a boolean.").
	//lint:ignore ST1005 CouchDB's reason, as clients get it
	ErrBadNewEdits = errors.New("`new_edits` parameter must be a boolean.")
)

// CouchDB error names carried by *Error.
const (
	BadRequest    = "bad_request"
	DocValidation = "doc_validation"
	IllegalDocID  = "illegal_docid"
)

// Error is the error type of this package. Error() returns exactly the
// reason text CouchDB sends, so it can go into a response as it is.
type Error struct {
	Kind       error  // the sentinel this error unwraps to
	CouchError string // CouchDB's error name: BadRequest, DocValidation or IllegalDocID
	Reason     string // CouchDB's reason text, also returned by Error()
	Offset     int    // byte offset of a syntax error in the input, -1 if not a syntax error
	Detail     string // what the scanner found wrong (syntax errors only), for logs
}

func (e *Error) Error() string { return e.Reason }

// Unwrap returns the sentinel, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

func newErr(kind error, couch, reason string) *Error {
	return &Error{Kind: kind, CouchError: couch, Reason: reason, Offset: -1}
}

func errOf(kind error, couch string) *Error { return newErr(kind, couch, kind.Error()) }

func syntaxErr(off int, detail string) *Error {
	return &Error{Kind: ErrInvalidJSON, CouchError: BadRequest, Reason: ErrInvalidJSON.Error(), Offset: off, Detail: detail}
}

func badSpecial(name string) *Error {
	return newErr(ErrBadSpecialMember, DocValidation, "Bad special document member: "+name)
}
