package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// serverDiffSteps are what the differential tester (tools/difftest) found
// settee answering otherwise than CouchDB 3.5.2 in the server endpoints,
// paths and auth, fixed; TestServerDiffAsCouchDB runs them on CouchDB.
var serverDiffSteps = []wireStep{
	// a "+" in a path is a space to CouchDB (mochiweb's unquote)
	{method: "PUT", path: "/{db}-a+b", status: 400, inBody: `"error":"illegal_database_name"`},
	{method: "PUT", path: "/{db}/a+b", body: `{}`, status: 201, inBody: `"id":"a b"`},
	{method: "GET", path: "/{db}/a%20b", status: 200, inBody: `"_id":"a b"`},
	{method: "PUT", path: "/{db}/a%2Bb", body: `{}`, status: 201, inBody: `"id":"a+b"`},
	{method: "GET", path: "/{db}/_all_docs", status: 200, rows: 2},
	// /_node/<name>/<db> is a node's own shard file in CouchDB
	{method: "GET", path: "/_node/_local/_nope", status: 400, inBody: `"error":"illegal_database_name"`},
	{method: "GET", path: "/_node/_local/abc", status: 404, err: "not_found", reason: "no_db_file"},
	{method: "GET", path: "/_node/_local/abc/doc", status: 404, err: "not_found", reason: "no_db_file"},
	// Erlang's name for a node without distribution is a known name
	{method: "GET", path: "/_node/nonode@nohost/_config", status: 412, err: "nodedown", reason: "nonode@nohost is down"},
	{method: "GET", path: "/_node/nonode@nohost", status: 412, err: "nodedown", reason: "nonode@nohost is down"},
	// keys CouchDB's default.ini leaves commented out are not listed
	{method: "GET", path: "/_node/_local/_config/chttpd/require_valid_user", status: 404, err: "not_found", reason: "unknown_config_value"},
	{method: "GET", path: "/_node/_local/_config/chttpd/require_valid_user_except_for_up", status: 404, err: "not_found", reason: "unknown_config_value"},
	{method: "GET", path: "/_node/_local/_config/couchdb/max_attachment_size", status: 404, err: "not_found", reason: "unknown_config_value"},
	{method: "PUT", path: "/_node/_local/_config/chttpd/require_valid_user", body: `"false"`, status: 200, raw: `""` + "\n"},
	{method: "GET", path: "/_node/_local/_config/chttpd/require_valid_user", status: 200, raw: `"false"` + "\n"},
	{method: "DELETE", path: "/_node/_local/_config/chttpd/require_valid_user", status: 200, raw: `"false"` + "\n"},
	{method: "GET", path: "/_node/_local/_config/chttpd/require_valid_user", status: 404, err: "not_found", reason: "unknown_config_value"},
	// the scheduler's paths
	{method: "GET", path: "/_scheduler/nope", status: 404, raw: `{"error":"not found"}` + "\n"},
	{method: "GET", path: "/_scheduler", status: 404, raw: `{"error":"not found"}` + "\n"},
	{method: "GET", path: "/_scheduler/jobs/x/y", status: 404, raw: `{"error":"not found"}` + "\n"},
	{method: "GET", path: "/_scheduler/docs/x", status: 400, err: "bad_request", reason: "Invalid path"},
	{method: "GET", path: "/_scheduler/docs/x/y/z", status: 400, err: "bad_request", reason: "Invalid path"},
	{method: "GET", path: "/_scheduler/docs/x/_replicator", status: 404, err: "not_found", reason: "Database does not exist."},
	{method: "GET", path: "/_scheduler/docs/_replicator/nope", status: 404, err: "not_found", reason: "missing"},
	// _session
	{method: "POST", path: "/_session", as: "-", body: `{}`, status: 400, err: "bad_request", reason: "request body must contain a username"},
	{method: "POST", path: "/_session", as: "-", body: `{"password":"x"}`, status: 400, err: "bad_request", reason: "request body must contain a username"},
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-nobody","password":"x"}`, status: 401, err: "unauthorized", reason: "Name or password is incorrect."},
	{method: "GET", path: "/_session", as: "-", hdr: map[string]string{"Cookie": "AuthSession=garbage"}, status: 400,
		err: "bad_request", reason: "Malformed AuthSession cookie. Please clear your cookies."},
	{method: "GET", path: "/", as: "-", hdr: map[string]string{"Cookie": "AuthSession=YWRtaW46"}, status: 400,
		err: "bad_request", reason: "Malformed AuthSession cookie. Please clear your cookies."},
	{method: "GET", path: "/_session", as: "-", hdr: map[string]string{"Cookie": "AuthSession=YWRtaW46NjkyRUQ2QTI6"}, status: 200, inBody: `"name":null`},
	// five failed logins lock the client out of that name (chttpd_auth_lockout)
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-lock","password":"x"}`, status: 401},
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-lock","password":"x"}`, status: 401},
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-lock","password":"x"}`, status: 401},
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-lock","password":"x"}`, status: 401},
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-lock","password":"x"}`, status: 401},
	{method: "POST", path: "/_session", as: "-", body: `{"name":"sd-lock","password":"x"}`, status: 403,
		err: "forbidden", reason: "Account is temporarily locked due to multiple authentication failures"},
	// basic auth counts only an account that exists
	{method: "GET", path: "/", as: "sd-nobody2:x", status: 401},
	{method: "GET", path: "/", as: "sd-nobody2:x", status: 401},
	{method: "GET", path: "/", as: "sd-nobody2:x", status: 401},
	{method: "GET", path: "/", as: "sd-nobody2:x", status: 401},
	{method: "GET", path: "/", as: "sd-nobody2:x", status: 401},
	{method: "GET", path: "/", as: "sd-nobody2:x", status: 401},
	{method: "PUT", path: "/_users/org.couchdb.user:sd-u", body: `{"name":"sd-u","password":"p","roles":[],"type":"user"}`, status: 201},
	{method: "GET", path: "/", as: "sd-u:x", status: 401},
	{method: "GET", path: "/", as: "sd-u:x", status: 401},
	{method: "GET", path: "/", as: "sd-u:x", status: 401},
	{method: "GET", path: "/", as: "sd-u:x", status: 401},
	{method: "GET", path: "/", as: "sd-u:x", status: 401},
	{method: "GET", path: "/", as: "sd-u:p", status: 403, err: "forbidden", reason: "Account is temporarily locked due to multiple authentication failures"},
	// _all_dbs?key
	{method: "GET", path: `/_all_dbs?key="_users"`, status: 200, raw: `["_users"]` + "\n"},
	{method: "GET", path: `/_all_dbs?key="_users"&startkey="a"`, status: 200, raw: `[]` + "\n"},
	// offsets: at most total_rows; _design_docs counts the docs before it too
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"docs":[{"_id":"_design/a"},{"_id":"_design/b"},{"_id":"z"},{"_id":"A"}]}`, status: 201},
	{method: "GET", path: "/{db}/_all_docs?skip=100", status: 200, inBody: `"total_rows":6,"offset":6,`},
	{method: "GET", path: `/{db}/_all_docs?startkey="b"&skip=10`, status: 200, inBody: `"total_rows":6,"offset":6,`},
	{method: "GET", path: "/{db}/_design_docs", status: 200, inBody: `"total_rows":2,"offset":1,`},
	{method: "GET", path: "/{db}/_design_docs?descending=true", status: 200, inBody: `"total_rows":2,"offset":2,`}, // 3 after it, at most total_rows
	{method: "GET", path: "/{db}/_design_docs?skip=10", status: 200, inBody: `"total_rows":2,"offset":2,`},
	// keys outside the range count for skip and limit, then are dropped
	{method: "POST", path: "/{db}/_design_docs", body: `{"keys":["_design/a","_design/zz","z",1,"_local/x"]}`, status: 200, rows: 2},
	{method: "POST", path: "/{db}/_design_docs?limit=1", body: `{"keys":["z","_design/a"]}`, status: 200, inBody: `"offset":null`, rows: -1},
	{method: "POST", path: "/{db}/_design_docs?skip=1", body: `{"keys":["_design/a","z","_design/b"]}`, status: 200, rows: 1},
	{method: "POST", path: "/{db}/_local_docs", body: `{"keys":["_design/a","z","_local/x"]}`, status: 200, rows: 1},
	// latest=true answers the winner, whatever rev says
	{method: "POST", path: "/{db}/_bulk_docs", body: `{"new_edits":false,"docs":[{"_id":"lc","_rev":"1-aaaa","v":"a"},{"_id":"lc","_rev":"1-bbbb","v":"b"},` +
		`{"_id":"lc","_rev":"2-cccc","_revisions":{"start":2,"ids":["cccc","aaaa"]},"_deleted":true},` +
		`{"_id":"le","_rev":"1-aaaa","v":"a"},{"_id":"le","_rev":"2-cccc","_revisions":{"start":2,"ids":["cccc","aaaa"]},"_deleted":true}]}`, status: 201},
	{method: "GET", path: "/{db}/lc?rev=1-aaaa&latest=true", status: 200, raw: `{"_id":"lc","_rev":"1-bbbb","v":"b"}` + "\n"},
	{method: "GET", path: "/{db}/lc?rev=2-cccc&latest=true", status: 200, raw: `{"_id":"lc","_rev":"1-bbbb","v":"b"}` + "\n"},
	{method: "GET", path: "/{db}/lc?rev=9-zzzz&latest=true", status: 200, raw: `{"_id":"lc","_rev":"1-bbbb","v":"b"}` + "\n"},
	{method: "GET", path: "/{db}/lc?rev=2-cccc", status: 200, raw: `{"_id":"lc","_rev":"2-cccc","_deleted":true}` + "\n"},
	{method: "GET", path: "/{db}/le?rev=1-aaaa&latest=true", status: 404, err: "not_found", reason: "deleted"},
	{method: "GET", path: "/{db}/lc?rev=bad&latest=true", status: 400, err: "bad_request", reason: "Invalid rev format"},
	// r and w that are not positive integers stand for the defaults
	{method: "GET", path: "/{db}/lc?r=abc", status: 200},
	{method: "GET", path: "/{db}/lc?r=-1", status: 200},
	{method: "PUT", path: "/{db}/qw?w=abc", body: `{}`, status: 201},
	{method: "PUT", path: "/{db}/qw2?w=", body: `{}`, status: 201},
	// _purged_infos: every purge request, each (id, revs) once, revs in
	// the order of their parsed form
	{method: "PUT", path: "/{db}/pa", body: `{}`, status: 201},
	{method: "POST", path: "/{db}/_purge", body: `{"pa":["1-bbb","1-967a00dff5e02add41819138abb3284d","1-aaa"],"pnone":["2-y","1-x"]}`, status: 201,
		raw: `{"purge_seq":null,"purged":{"pa":["1-967a00dff5e02add41819138abb3284d"],"pnone":[]}}` + "\n"},
	{method: "POST", path: "/{db}/_purge", body: `{"pnone":["1-x","2-y"]}`, status: 201},
	{method: "GET", path: "/{db}/_purged_infos", status: 200,
		raw: `{"purged_infos":[{"id":"pa","revs":["1-aaa","1-bbb","1-967a00dff5e02add41819138abb3284d"]},{"id":"pnone","revs":["1-x","2-y"]}]}` + "\n"},
	{method: "POST", path: "/{db}/_purged_infos", status: 405, err: "method_not_allowed", reason: "Only GET allowed"},
	{method: "GET", path: "/{db}/_purged_infos/x", status: 404, err: "not_found", reason: "missing"},
	// a key that is not a string sorts before every id; parameters are
	// read in their order
	{method: "GET", path: "/{db}/_all_docs?startkey=1&limit=1", status: 200, rows: 1},
	{method: "GET", path: "/{db}/_all_docs?startkey=%7B%7D&limit=1", status: 200, rows: 1},
	{method: "GET", path: "/{db}/_all_docs?endkey=1", status: 200, inBody: `"offset":0,"rows":[`, rows: -1},
	{method: "GET", path: "/{db}/_all_docs?key=null", status: 200, rows: -1},
	{method: "GET", path: "/{db}/_all_docs?startkey=1&descending=true", status: 200, rows: -1},
	{method: "GET", path: "/{db}/_all_docs?endkey=%5B%5D&descending=true&limit=2", status: 200, rows: 2},
	{method: "GET", path: "/{db}/_all_docs?skip=-1&descending=&start_key=1", status: 400, err: "query_parse_error", reason: `Invalid value for positive integer: "-1"`},
	{method: "GET", path: "/{db}/_all_docs?limit=&inclusive_end=1", status: 400, err: "query_parse_error", reason: "Invalid value for integer: []"},
	{method: "GET", path: "/_all_dbs?endkey=1", status: 200, raw: "[]\n"},
	{method: "GET", path: "/_all_dbs?startkey=1&limit=1", status: 200, raw: `["_global_changes"]` + "\n"},
	{method: "GET", path: "/_all_dbs?conflicts=maybe&key=%7B%7D", status: 400, err: "query_parse_error", reason: `Invalid boolean parameter: "maybe"`},
	{method: "GET", path: "/_all_dbs?include_docs=1", status: 400, err: "query_parse_error", reason: `Invalid boolean parameter: "1"`},
}

func TestServerDiff(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/sd", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "sd", serverDiffSteps)
}

func TestServerDiffAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "sd", serverDiffSteps)
}
