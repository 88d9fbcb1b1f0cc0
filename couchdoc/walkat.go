package couchdoc

import "github.com/settee/settee/docjson"

// ObjectAt walks the JSON object at b[i] (after white space) as WalkObject
// does, except that f parses each value itself, from its start vs, and
// returns where it ends (-1 to stop): a value is scanned once, by the
// caller, instead of once to delimit it and again to read it. ObjectAt
// returns the end of the object, or -1 when f stops or the object is
// malformed. It is docjson.Object, under the name its callers know.
func ObjectAt(b []byte, i int, f func(key []byte, vs int) int) int { return docjson.Object(b, i, f) }

// ArrayAt is ObjectAt for the elements of the JSON array at b[i]
// (docjson.Array).
func ArrayAt(b []byte, i int, f func(vs int) int) int { return docjson.Array(b, i, f) }

// SkipValue returns the end of the JSON value at b[i], or -1 (scalars
// delimited, not validated, as in WalkObject): docjson.SkipValue.
func SkipValue(b []byte, i int) int { return docjson.SkipValue(b, i) }
