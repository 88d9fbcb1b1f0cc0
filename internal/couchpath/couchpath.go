// Package couchpath escapes and unescapes URL path segments as CouchDB
// reads them.
//
// CouchDB (mochiweb's unquote) decodes a "+" in a path segment as a space:
// PUT /db/a+b makes the doc "a b". url.PathEscape leaves "+" alone, as a
// path may, so a client that escapes with it and talks to CouchDB loses
// the plus sign; every path settee sends or reads goes through here.
package couchpath

import (
	"net/url"
	"strings"
)

// Escape escapes one path segment so that CouchDB reads it back unchanged.
func Escape(seg string) string {
	return strings.ReplaceAll(url.PathEscape(seg), "+", "%2B")
}

// Unescape decodes one path segment as CouchDB does: %XX escapes, and "+"
// as a space.
func Unescape(seg string) (string, error) {
	return url.QueryUnescape(seg)
}
