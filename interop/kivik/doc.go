// Package kivik holds tests only: a real settee server driven through a
// real CouchDB client, kivik v4 (github.com/go-kivik/kivik/v4) with its
// couchdb driver and default options (so request bodies are gzipped), as
// a kivik user would drive CouchDB. The tests assert what the user sees:
// values, revs, and errors through kivik.HTTPStatus.
//
// Each scenario runs against settee (TestSettee) and, when a CouchDB
// 3.5.2 is present (internal/testcouch), the very same steps against
// CouchDB (TestCouchDB), which shows the assertions are CouchDB's. A step
// settee does not answer as CouchDB does is skipped on settee only, with a
// message naming the request, settee's answer and CouchDB's.
package kivik
