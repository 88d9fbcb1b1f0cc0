package httpgw

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/settee/settee/docjson"
	"github.com/settee/settee/revtree"
)

var errNotGzipped = badRequest("Request body is not properly gzipped.")

// gzipped reports whether the request body is gzip-encoded. kivik (and
// any client set up so) compresses every body; CouchDB takes gzip and
// identity, exactly so written, and answers any other encoding 415.
func gzipped(rq *req) (bool, error) {
	switch ce := strings.TrimSpace(rq.r.Header.Get("Content-Encoding")); ce {
	case "", "identity":
		return false, nil
	case "gzip":
		return true, nil
	default:
		return false, newErr(415, "bad_content_type", ce+" is not a supported content encoding.")
	}
}

// gzipErr is what a failed read of a gzipped body answers: too large when
// the compressed bytes passed the limit, else not properly gzipped (a bad
// header, a corrupt stream, a checksum that does not match, bytes after
// the last member).
func gzipErr(err error) error {
	var ce *couchError
	if errors.As(err, &ce) {
		return err // the limits' answers (limits.go)
	}
	return errNotGzipped
}

var errNotObject = badRequest("Request body must be a JSON object")

// decodeObject decodes a request body that must be a JSON object into v, a
// pointer to a struct or a map, answering as chttpd's json_body_obj and the
// handler's checks after it do: a body that is not JSON is "invalid UTF-8
// JSON", JSON that is not an object (null, an array) is "Request body must
// be a JSON object". Into a struct, a member goes to the field whose json
// name it has exactly (encoding/json would take "KEYS" for "keys"; CouchDB
// does not), the last of duplicates winning as with jiffy, and a member of
// the wrong type answers the field's reason tag: CouchDB's words for that
// member, e.g. "`keys` member must be an array.". A slice field (but
// json.RawMessage) takes only an array, not null. A field without a reason
// tag answers a wrong type "invalid UTF-8 JSON", as settee always did.
func decodeObject(b []byte, v any) error {
	if !docjson.Valid(b) {
		return errInvalidJSON
	}
	if i := docjson.SkipWS(b, 0); i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	rv := reflect.ValueOf(v).Elem()
	if rv.Kind() != reflect.Struct {
		if json.Unmarshal(b, v) != nil {
			return errInvalidJSON
		}
		return nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return errInvalidJSON
	}
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		raw, ok := members[name]
		if !ok || name == "" || name == "-" {
			continue
		}
		if err := decodeMember(raw, rv.Field(i).Addr().Interface(), f.Tag.Get("reason")); err != nil {
			return err
		}
	}
	return nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// decodeMember decodes raw, one valid JSON value of a request, into v; a
// value of the wrong type (for a slice, anything but an array) answers
// reason, or "invalid UTF-8 JSON" when reason is empty.
func decodeMember(raw json.RawMessage, v any, reason string) error {
	wrong := json.Unmarshal(raw, v) != nil
	if t := reflect.TypeOf(v).Elem(); !wrong && t.Kind() == reflect.Slice && t != rawMessageType {
		i := docjson.SkipWS(raw, 0)
		wrong = i >= len(raw) || raw[i] != '['
	}
	switch {
	case !wrong:
		return nil
	case reason == "":
		return errInvalidJSON
	default:
		return badRequest(reason)
	}
}

var errBadRevList = badRequest("Invalid list of revisions")

// revList reads raw, one valid JSON value, as a list of revisions the way
// couch_doc:parse_revs does (_purge's members, open_revs): anything but an
// array is "Invalid list of revisions", an element that is not a rev
// string "Invalid rev format".
func revList(raw json.RawMessage) ([]string, error) {
	var elems []json.RawMessage
	if err := decodeMember(raw, &elems, "x"); err != nil {
		return nil, errBadRevList
	}
	revs := make([]string, len(elems))
	for i, e := range elems {
		if json.Unmarshal(e, &revs[i]) != nil {
			return nil, errBadRev
		}
		if _, err := revtree.ParseRev(revs[i]); err != nil {
			return nil, errBadRev
		}
	}
	return revs, nil
}
