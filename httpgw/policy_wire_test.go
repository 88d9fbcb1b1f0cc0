package httpgw_test

import (
	"strings"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// Every write path meets the database's validate_doc_update (package
// policy): a refused write answers CouchDB's 403 and leaves nothing
// behind, and a repeated id in one _bulk_docs batch cannot ride past the
// VDU on the revision an earlier entry will make. The same table runs
// against the real CouchDB, whose answers these are.
const refusingVDU = `{"validate_doc_update":"function(n, o, u) { if (n.forbidden || (n._attachments && n._attachments['no.txt'])) throw({forbidden: 'no'}); }",
 "updates": {"u": "function(doc, req) { return [{_id: req.id, forbidden: true}, 'ok']; }"}}`

// rev1 is the revision CouchDB (and settee, whose revision ids are
// CouchDB's) gives {"_id":"t","owner":"a","v":1} when it is created.
const rev1 = "1-c8417aa4a165eb4c65f6f496264b4e3b"

var vduPathSteps = []wireStep{
	{method: "PUT", path: "/{db}/_design/v", body: refusingVDU, status: 201},
	// the attack as found: the second entry names the revision the first
	// will get, and is a conflict, not a write past the VDU
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"t","owner":"a","v":1},{"_id":"t","_rev":"` + rev1 + `","forbidden":true}]}`,
		status: 201, inBodyAll: []string{`{"ok":true,"id":"t","rev":"` + rev1 + `"}`, `{"id":"t","error":"conflict","reason":"Document update conflict."}`}},
	{method: "GET", path: "/{db}/t", status: 200, raw: `{"_id":"t","_rev":"` + rev1 + `","owner":"a","v":1}` + "\n"},
	// a delete, then a re-creation without a rev in the same batch
	{method: "PUT", path: "/{db}/y", body: `{"v":1}`, status: 201, keep: "y"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"y","_rev":"{y}","_deleted":true},{"_id":"y","forbidden":true}]}`,
		status: 201, inBody: `{"id":"y","error":"conflict","reason":"Document update conflict."}`},
	{method: "GET", path: "/{db}/y", status: 404, err: "not_found", reason: "deleted"},
	// each write path
	{method: "PUT", path: "/{db}/p", body: `{"forbidden":true}`, status: 403, err: "forbidden", reason: "no"},
	{method: "POST", path: "/{db}", body: `{"_id":"q","forbidden":true}`, status: 403, err: "forbidden", reason: "no"},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"b","forbidden":true}]}`, status: 201,
		inBody: `{"id":"b","error":"forbidden","reason":"no"}`},
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"r","_rev":"1-abc","forbidden":true}]}`, status: 201,
		inBody: `"error":"forbidden","reason":"no"`},
	{method: "PUT", path: "/{db}/src", body: `{"forbidden":false}`, status: 201, keep: "src"},
	{method: "PUT", path: "/{db}/src?rev={src}", body: `{"forbidden":true}`, status: 403, err: "forbidden", reason: "no"},
	{method: "PUT", path: "/{db}/src/no.txt?rev={src}", body: "x", hdr: map[string]string{"Content-Type": "text/plain"},
		status: 403, err: "forbidden", reason: "no"},
	{method: "POST", path: "/{db}/_design/v/_update/u/upd", status: 403, err: "forbidden", reason: "no"},
	// nothing of the refused writes is there
	{method: "GET", path: "/{db}/p", status: 404},
	{method: "GET", path: "/{db}/q", status: 404},
	{method: "GET", path: "/{db}/b", status: 404},
	{method: "GET", path: "/{db}/r", status: 404},
	{method: "GET", path: "/{db}/upd", status: 404},
	{method: "GET", path: "/{db}/src", status: 200, inBodyAll: []string{`"_rev":"1-`, `"forbidden":false}`}},
}

func TestEveryWritePathMeetsTheVDU(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/vdupaths", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "vdupaths", vduPathSteps)
}

func TestEveryWritePathMeetsTheVDUAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "vdupaths", vduPathSteps)
}

// What one user may see of another's documents in the system databases
// (package policy's read rule): in _users nothing, through any read path;
// in _replicator the doc without its credentials, and no write of it.
var systemReadSteps = []wireStep{
	{method: "PUT", path: "/_users/org.couchdb.user:pu1", body: `{"name":"pu1","password":"p1","roles":[],"type":"user"}`, status: 201},
	{method: "PUT", path: "/_users/org.couchdb.user:pu2", body: `{"name":"pu2","password":"p2","roles":[],"type":"user"}`, status: 201},
	{method: "PUT", path: "/_replicator/_security", body: `{"members":{"names":[],"roles":[]},"admins":{"names":[],"roles":[]}}`, status: 200},
	{method: "PUT", path: "/_replicator/rx", as: "pu1:p1", body: `{"source":"http://pu1:p1@127.0.0.1:9/a","target":{"url":"http://127.0.0.1:9/b","headers":{"Authorization":"Basic cHUxOnAx"}}}`, status: 201},
	{method: "GET", path: "/_replicator/rx", as: "pu1:p1", status: 200, inBodyAll: []string{`"source":"http://pu1:p1@127.0.0.1:9/a"`, `"Authorization"`, `"owner":"pu1"`}},
	{method: "GET", path: "/_replicator/rx", as: "pu2:p2", status: 200, inBodyAll: []string{`"source":"http://127.0.0.1:9/a"`, `"owner":"pu1"`}},
	{method: "POST", path: "/_replicator/_find", as: "pu2:p2", body: `{"selector":{"_id":"rx"}}`, status: 200, inBody: `"source":"http://127.0.0.1:9/a"`},
	{method: "PUT", path: "/_replicator/ry", as: "pu2:p2", body: `{"source":"http://127.0.0.1:9/a","target":"http://127.0.0.1:9/b","owner":"pu1"}`,
		status: 403, err: "forbidden", reason: "Can't update replication documents from other users."},
	{method: "GET", path: "/_replicator/ry", status: 404},
	// _users, open to its members (as sign-up apps set it): another
	// user's doc is not there for a member
	{method: "PUT", path: "/_node/_local/_config/couchdb/users_db_security_editable", body: `"true"`, status: 200},
	{method: "PUT", path: "/_users/_security", body: `{"members":{"names":[],"roles":[]},"admins":{"names":[],"roles":[]}}`, status: 200},
	{method: "POST", path: "/_users/_find", as: "pu1:p1", body: `{"selector":{"name":"pu2"}}`, status: 200, inBody: `"docs":[`},
	{method: "COPY", path: "/_users/org.couchdb.user:pu2", as: "pu1:p1", hdr: map[string]string{"Destination": "_local/x"}, status: 404},
	{method: "GET", path: "/_users/_local/x", status: 404},
}

func TestSystemDBReadRules(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "", systemReadSteps)
}

func TestSystemDBReadRulesAsCouchDB(t *testing.T) {
	t.Parallel()
	cs := startCouchDB(t)
	runSteps(t, cs.URL, cs.User, cs.Password, "", systemReadSteps)
}

// A local replication writes through the policy too: the target's size
// limit refuses a doc over it (the HTTP write paths refuse the request
// whole before the policy sees it; settee only: CouchDB has no local
// endpoints).
func TestLocalReplicationMeetsTheSizeLimit(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	big := `{"pad":"` + strings.Repeat("x", 2000) + `"}`
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "", []wireStep{
		{method: "PUT", path: "/szsrc", status: 201},
		{method: "PUT", path: "/szsrc/big", body: big, status: 201},
		{method: "PUT", path: "/szsrc/small", body: `{"v":1}`, status: 201},
		{method: "PUT", path: "/_node/_local/_config/couchdb/max_document_size", body: `"1000"`, status: 200},
		{method: "PUT", path: "/szsrc/big2", body: big, status: 413, err: "document_too_large"},
		{method: "POST", path: "/_replicate", body: `{"source":"szsrc","target":"szdst","create_target":true}`, status: 200,
			inBody: `"doc_write_failures":1`},
		{method: "GET", path: "/szdst/small", status: 200},
		{method: "GET", path: "/szdst/big", status: 404},
	})
}
