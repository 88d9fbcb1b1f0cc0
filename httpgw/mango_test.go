package httpgw_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

// mangoDocs are written with new_edits=false so their revs are the
// test's own on any server: numbers, strings of mixed case (ICU order),
// nested objects, arrays, a doc missing the indexed fields, a deleted
// one and a design doc that _find never answers.
const mangoDocs = `{"new_edits":false,"docs":[
 {"_id":"m01","_rev":"1-abc","n":1,"s":"apple","t":["x","y"],"o":{"a":1,"b":"p"},"c":"red"},
 {"_id":"m02","_rev":"1-abc","n":2,"s":"Banana","t":["y"],"o":{"a":2,"b":"q"},"c":"blue"},
 {"_id":"m03","_rev":"1-abc","n":3,"s":"cherry","t":[],"o":{"a":3,"b":"p"},"c":"red"},
 {"_id":"m04","_rev":"1-abc","n":4,"s":"apple","t":["z"],"o":{"a":4},"c":"green"},
 {"_id":"m05","_rev":"1-abc","n":5,"s":"date","t":["x"],"o":{"a":5,"b":"r"},"c":"blue"},
 {"_id":"m06","_rev":"1-abc","n":6,"s":"Elder","t":["x","z"],"c":"red"},
 {"_id":"m07","_rev":"1-abc","n":7.5,"s":"fig","o":{"a":7},"c":"red"},
 {"_id":"m08","_rev":"1-abc","n":null,"s":"grape","c":"blue"},
 {"_id":"m09","_rev":"1-abc","s":"honeydew","c":"green"},
 {"_id":"m10","_rev":"1-abc","n":"10","s":"ice","c":"red"},
 {"_id":"m11","_rev":"2-abc","_revisions":{"start":2,"ids":["abc","abc"]},"_deleted":true,"n":11},
 {"_id":"a.b","_rev":"1-abc","n":12,"a.b":"dotted","c":"green"},
 {"_id":"_design/plain","_rev":"1-abc","n":0,"views":{}}
]}`

var mangoSteps = []viewStep{
	{method: "POST", path: "/{db}/_bulk_docs", body: mangoDocs, status: 201},

	// no index: _all_docs, with CouchDB's warning
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"c":"red"},"fields":["_id","n"]}`, status: 200, want: `{"docs":[{"_id":"m01","n":1},{"_id":"m03","n":3},{"_id":"m06","n":6},{"_id":"m07","n":7.5},{"_id":"m10","n":"10"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFIwwSwAhHsOVw","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"_id":{"$gt":"m05"}},"fields":["_id"]}`, status: 200, want: `{"docs":[{"_id":"m06"},{"_id":"m07"},{"_id":"m08"},{"_id":"m09"},{"_id":"m10"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFIwwSwAhHsOVw","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gte":3,"$lt":7}},"fields":["_id","n"],"execution_stats":true}`, status: 200, want: `{"docs":[{"_id":"m03","n":3},{"_id":"m04","n":4},{"_id":"m05","n":5},{"_id":"m06","n":6}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYgaQ4YFIwwSwAhPYOYQ","execution_stats":{"total_keys_examined":12,"total_docs_examined":12,"total_quorum_docs_examined":0,"results_returned":4,"execution_time_ms":1.309},"warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"s":{"$gt":"apple"}},"fields":["_id","s"],"limit":4}`, status: 200, want: `{"docs":[{"_id":"m02","s":"Banana"},{"_id":"m03","s":"cherry"},{"_id":"m05","s":"date"},{"_id":"m06","s":"Elder"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYgaQ4YFIwwSwAhPYOYQ","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"o.b":"p"},"fields":["_id","o.a"]}`, status: 200, want: `{"docs":[{"_id":"m01","o":{"a":1}},{"_id":"m03","o":{"a":3}}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoYg6Q4YFIwwSwAhKsOWw","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"a\\.b":"dotted"},"fields":["_id","a\\.b"]}`, status: 200, want: `{"docs":[{"_id":"a.b","a.b":"dotted"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYozJ-olgaQ4YFIwwSwAh7AOnQ","warning":"No matching index found, create an index to optimize query time.\nThe number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"t":{"$elemMatch":{"$eq":"z"}}},"fields":["_id"]}`, status: 200, want: `{"docs":[{"_id":"m04"},{"_id":"m06"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYgaQ4YFIwwSwAhPYOYQ","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"t":{"$allMatch":{"$eq":"x"}}},"fields":["_id"]}`, status: 200, want: `{"docs":[{"_id":"m05"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYgqQ4YFIwwSwAhN0OXw","warning":"No matching index found, create an index to optimize query time.\nThe number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"$or":[{"c":"green"},{"n":{"$lt":2}}]},"fields":["_id"]}`, status: 200, want: `{"docs":[{"_id":"a.b"},{"_id":"m01"},{"_id":"m04"},{"_id":"m08"},{"_id":"m09"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xpYgqQ4YFIwwSwAhUEOZw","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"c":{"$in":["blue","green"]},"n":{"$exists":true}},"fields":["_id","c"],"skip":1,"limit":2}`, status: 200, want: `{"docs":[{"_id":"m02","c":"blue"},{"_id":"m04","c":"green"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYgKQ4YFIwwSwAhMQOXQ","warning":"No matching index found, create an index to optimize query time."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$type":"string"}}}`, status: 200, want: `{"docs":[{"_id":"m10","_rev":"1-abc","n":"10","s":"ice","c":"red"}],"bookmark":"g1AAAAA2eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFIwwSwAhHsOVw","warning":"No matching index found, create an index to optimize query time.\nThe number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"c":"nothing"}}`, status: 200, want: `{"docs":[],"bookmark":"nil","warning":"No matching index found, create an index to optimize query time.\nThe number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this."}`},

	// bad input
	{method: "POST", path: "/{db}/_find", body: `{}`, status: 400, want: `{"error":"missing_required_key","reason":"Missing required key: selector"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":[]}`, status: 400, want: `{"error":"invalid_selector_json","reason":"Selector must be a JSON object, not: []"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$foo":1}}}`, status: 400, want: `{"error":"invalid_operator","reason":"Invalid operator: $foo"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"limit":"x"}`, status: 400, want: `{"error":"invalid_non_neg_integer","reason":"<<120>> is not an integer greater than or equal to zero"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"skip":-1}`, status: 400, want: `{"error":"invalid_non_neg_integer","reason":"-1 is not an integer greater than or equal to zero"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"sort":"n"}`, status: 400, want: `{"error":"invalid_sort_json","reason":"Sort must be an array of sort specs, not: <<\"n\">>"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"sort":[{"n":"asc"},{"s":"desc"}]}`, status: 400, want: `{"error":"unsupported_mixed_sort","reason":"Sorts currently only support a single direction for all fields."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"fields":"n"}`, status: 400, want: `{"error":"invalid_fields","reason":"Fields must be an array of strings, not: <<110>>"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"use_index":3}`, status: 400, want: `{"error":"invalid_index_name","reason":"Invalid index name: 3"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"bookmark":"not-ours"}`, status: 400, want: `{"error":"invalid_bookmark","reason":"Invalid bookmark value: \"not-ours\""}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":1}},"sort":["n"]}`, status: 400, want: `{"error":"no_usable_index","reason":"No index exists for this sort, try indexing by the sort fields."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":1},"nope":1}`, status: 400, want: `{"error":"invalid_key","reason":"Invalid key nope for this request."}`},
	{method: "POST", path: "/{db}/_find", body: `not json`, status: 400, want: `{"error":"bad_request","reason":"invalid UTF-8 JSON"}`},
	{method: "GET", path: "/{db}/_find", status: 405, want: `{"error":"method_not_allowed","reason":"Only POST allowed"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{}}`, status: 400, want: `{"error":"missing_required_key","reason":"Missing required key: fields"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":[]}}`, status: 200, want: `{"result":"created","id":"_design/16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","name":"16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["n"]},"type":"text"}`, status: 503, want: `{"error":"required index service unavailable","reason":"text"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["n"]},"type":"nouveau"}`, status: 503, want: `{"error":"required index service unavailable","reason":"nouveau"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["n"]},"type":"other"}`, status: 400, want: `{"error":"invalid_index","reason":"Invalid type for index: other"}`},
	{method: "PUT", path: "/{db}/_index", body: `{}`, status: 405, want: `{"error":"method_not_allowed","reason":"Only GET,POST allowed"}`},

	// indexes
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["n"]},"name":"by-n","ddoc":"mi"}`, status: 200, want: `{"result":"created","id":"_design/mi","name":"by-n"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["n"]},"name":"by-n","ddoc":"mi"}`, status: 200, want: `{"result":"exists","id":"_design/mi","name":"by-n"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["c","n"]}}`, status: 200, want: `{"result":"created","id":"_design/81dc5e1c85afc80521da4cdffb943eec47165982","name":"81dc5e1c85afc80521da4cdffb943eec47165982"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":[{"s":"desc"}]},"name":"by-s","ddoc":"ms"}`, status: 200, want: `{"result":"created","id":"_design/ms","name":"by-s"}`},
	{method: "POST", path: "/{db}/_index", body: `{"index":{"fields":["o.a"],"partial_filter_selector":{"c":"red"}},"name":"red-oa","ddoc":"mp"}`, status: 200, want: `{"result":"created","id":"_design/mp","name":"red-oa"}`},
	{method: "GET", path: "/{db}/_index", lags: true, status: 200, want: `{"total_rows":6,"indexes":[{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}},{"ddoc":"_design/16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","name":"16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","type":"json","partitioned":false,"def":{"fields":[]}},{"ddoc":"_design/81dc5e1c85afc80521da4cdffb943eec47165982","name":"81dc5e1c85afc80521da4cdffb943eec47165982","type":"json","partitioned":false,"def":{"fields":[{"c":"asc"},{"n":"asc"}]}},{"ddoc":"_design/mi","name":"by-n","type":"json","partitioned":false,"def":{"fields":[{"n":"asc"}]}},{"ddoc":"_design/mp","name":"red-oa","type":"json","partitioned":false,"def":{"fields":[{"o.a":"asc"}],"partial_filter_selector":{"c":{"$eq":"red"}}}},{"ddoc":"_design/ms","name":"by-s","type":"json","partitioned":false,"def":{"fields":[{"s":"desc"}]}}]}`},
	{method: "GET", path: "/{db}/_design/mi", status: 200, want: `{"_id":"_design/mi","_rev":"1-9dcacf75d9c5adf4bce6de6018f2e147","language":"query","views":{"by-n":{"map":{"fields":{"n":"asc"},"partial_filter_selector":{}},"reduce":"_count","options":{"def":{"fields":["n"]}}}}}`},

	// queries on them
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":2}},"fields":["_id","n"]}`, status: 200, want: `{"docs":[{"_id":"m03","n":3},{"_id":"m04","n":4},{"_id":"m05","n":5},{"_id":"m06","n":6},{"_id":"m07","n":7.5},{"_id":"a.b","n":12},{"_id":"m10","n":"10"}],"bookmark":"g1AAAAA7eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFI5QEFGkAyToUFWFgDJVA7A"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":2}},"fields":["_id","n"],"sort":[{"n":"desc"}],"limit":3}`, status: 200, want: `{"docs":[{"_id":"m10","n":"10"},{"_id":"a.b","n":12},{"_id":"m07","n":7.5}],"bookmark":"g1AAAAA9eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYg6Q4YFI5QEFGNwc5BjDIygIA5ZwOmg"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gte":2,"$lte":5}},"fields":["_id"],"execution_stats":true}`, status: 200, want: `{"docs":[{"_id":"m02"},{"_id":"m03"},{"_id":"m04"},{"_id":"m05"}],"bookmark":"g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAADbTA1aAJkAAhzdGFydGtleWsAAQVq","execution_stats":{"total_keys_examined":4,"total_docs_examined":0,"total_quorum_docs_examined":0,"results_returned":4,"execution_time_ms":1.528}}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":null}},"sort":["n"],"fields":["_id","n"]}`, status: 200, want: `{"docs":[{"_id":"m01","n":1},{"_id":"m02","n":2},{"_id":"m03","n":3},{"_id":"m04","n":4},{"_id":"m05","n":5},{"_id":"m06","n":6},{"_id":"m07","n":7.5},{"_id":"a.b","n":12},{"_id":"m10","n":"10"}],"bookmark":"g1AAAAA7eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFI5QEFGkAyToUFWFgDJVA7A"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"c":"red","n":{"$gt":1}},"fields":["_id","c","n"]}`, status: 200, want: `{"docs":[{"_id":"m03","c":"red","n":3},{"_id":"m06","c":"red","n":6},{"_id":"m07","c":"red","n":7.5},{"_id":"m10","c":"red","n":"10"}],"bookmark":"g1AAAABDeJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFI5IMVgmaJUsAomQ4OsLABHUBBs"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"c":{"$gt":null}},"sort":["c","n"],"fields":["_id"]}`, status: 200, want: `{"docs":[{"_id":"m08"},{"_id":"m02"},{"_id":"m05"},{"_id":"m04"},{"_id":"a.b"},{"_id":"m01"},{"_id":"m03"},{"_id":"m06"},{"_id":"m07"},{"_id":"m10"}],"bookmark":"g1AAAABDeJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoagKQ4YFI5IMVgmaJUsAomQ4OsLABHUBBs"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"s":{"$gt":null}},"sort":[{"s":"desc"}],"fields":["s"]}`, status: 200, want: `{"docs":[{"s":"ice"},{"s":"honeydew"},{"s":"grape"},{"s":"fig"},{"s":"Elder"},{"s":"date"},{"s":"cherry"},{"s":"Banana"},{"s":"apple"},{"s":"apple"}],"bookmark":"g1AAAAA-eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xoYgqQ4YFI5QEFGkAxrYkFBTmpWFgD7DhB0"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"s":{"$gte":"b","$lt":"e"}},"use_index":"ms","fields":["_id","s"]}`, status: 200, want: `{"docs":[{"_id":"m02","s":"Banana"},{"_id":"m03","s":"cherry"},{"_id":"m05","s":"date"}],"bookmark":"g1AAAAA9eJzLYWBgYMpgSmHgKy5JLCrJTq2MT8lPzkzJBYoz5xqYgqQ4YFI5QEFGkAxLSmJJalYWAOrXEAM"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"c":"red","o.a":{"$gt":0}},"use_index":["mp","red-oa"],"fields":["_id"]}`, status: 200, want: `{"docs":[{"_id":"m01"},{"_id":"m03"},{"_id":"m07"}],"bookmark":"g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAADbTA3aAJkAAhzdGFydGtleWsAAQdq"}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":2}},"use_index":"nope","fields":["_id"],"limit":1}`, status: 200, want: `{"docs":[{"_id":"m03"}],"bookmark":"g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAADbTAzaAJkAAhzdGFydGtleWsAAQNq","warning":"_design/nope was not used because it does not contain a valid index for this query."}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":2}},"use_index":"nope","allow_fallback":false}`, status: 400, want: "{\"error\":\"invalid_index\",\"reason\":\"_design/nope specified by `use_index` could not be found or it is not suitable.\"}"},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":0}},"fields":["_id","n"],"limit":2}`, status: 200, want: `{"docs":[{"_id":"m01","n":1},{"_id":"m02","n":2}],"bookmark":"g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAADbTAyaAJkAAhzdGFydGtleWsAAQJq"}`, keep: "bm1"},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":0}},"fields":["_id","n"],"limit":2,"bookmark":"{bm1}"}`, status: 200, want: `{"docs":[{"_id":"m03","n":3},{"_id":"m04","n":4}],"bookmark":"g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAADbTA0aAJkAAhzdGFydGtleWsAAQRq"}`, keep: "bm2"},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":0}},"fields":["_id","n"],"limit":2,"bookmark":"{bm2}"}`, status: 200, want: `{"docs":[{"_id":"m05","n":5},{"_id":"m06","n":6}],"bookmark":"g2wAAAACaAJkAA5zdGFydGtleV9kb2NpZG0AAAADbTA2aAJkAAhzdGFydGtleWsAAQZq"}`},

	// explain
	{method: "POST", path: "/{db}/_explain", body: `{"selector":{"n":{"$gt":2}},"fields":["_id","n"],"sort":[{"n":"desc"}],"limit":3}`, status: 200, want: `{"dbname":"mango","index":{"ddoc":"_design/mi","name":"by-n","type":"json","partitioned":false,"def":{"fields":[{"n":"asc"}]}},"partitioned":false,"selector":{"n":{"$gt":2}},"opts":{"use_index":[],"bookmark":"nil","limit":3,"skip":0,"sort":{"n":"desc"},"fields":["_id","n"],"partition":"","r":1,"conflicts":false,"stale":false,"update":true,"stable":false,"execution_stats":false,"allow_fallback":true},"limit":3,"skip":0,"fields":["_id","n"],"index_candidates":[{"index":{"ddoc":"_design/ms","name":"by-s","type":"json","partitioned":false,"def":{"fields":[{"s":"desc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":false}},{"index":{"ddoc":"_design/mp","name":"red-oa","type":"json","partitioned":false,"def":{"fields":[{"o.a":"asc"}],"partial_filter_selector":{"c":{"$eq":"red"}}}},"analysis":{"usable":false,"reasons":[{"name":"is_partial"}],"ranking":2,"covering":false}},{"index":{"ddoc":"_design/81dc5e1c85afc80521da4cdffb943eec47165982","name":"81dc5e1c85afc80521da4cdffb943eec47165982","type":"json","partitioned":false,"def":{"fields":[{"c":"asc"},{"n":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":true}},{"index":{"ddoc":"_design/16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","name":"16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","type":"json","partitioned":false,"def":{"fields":[]}},"analysis":{"usable":false,"reasons":[{"name":"sort_order_mismatch"}],"ranking":1,"covering":false}},{"index":{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":null}}],"selector_hints":[{"type":"json","indexable_fields":["n"],"unindexable_fields":[]}],"mrargs":{"include_docs":false,"view_type":"map","reduce":false,"partition":null,"start_key":["<MAX>"],"end_key":[2],"direction":"rev","stable":false,"update":true,"conflicts":"undefined"},"covering":true}`},
	{method: "POST", path: "/{db}/_explain", body: `{"selector":{"c":"red"}}`, status: 200, want: `{"dbname":"mango","index":{"ddoc":"_design/16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","name":"16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","type":"json","partitioned":false,"def":{"fields":[]}},"partitioned":false,"selector":{"c":{"$eq":"red"}},"opts":{"use_index":[],"bookmark":"nil","limit":25,"skip":0,"sort":{},"fields":[],"partition":"","r":1,"conflicts":false,"stale":false,"update":true,"stable":false,"execution_stats":false,"allow_fallback":true},"limit":25,"skip":0,"fields":[],"index_candidates":[{"index":{"ddoc":"_design/ms","name":"by-s","type":"json","partitioned":false,"def":{"fields":[{"s":"desc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":2,"covering":false}},{"index":{"ddoc":"_design/mp","name":"red-oa","type":"json","partitioned":false,"def":{"fields":[{"o.a":"asc"}],"partial_filter_selector":{"c":{"$eq":"red"}}}},"analysis":{"usable":false,"reasons":[{"name":"is_partial"}],"ranking":3,"covering":false}},{"index":{"ddoc":"_design/mi","name":"by-n","type":"json","partitioned":false,"def":{"fields":[{"n":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":2,"covering":false}},{"index":{"ddoc":"_design/81dc5e1c85afc80521da4cdffb943eec47165982","name":"81dc5e1c85afc80521da4cdffb943eec47165982","type":"json","partitioned":false,"def":{"fields":[{"c":"asc"},{"n":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":2,"covering":false}},{"index":{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}},"analysis":{"usable":true,"reasons":[{"name":"unfavored_type"}],"ranking":1,"covering":null}}],"selector_hints":[{"type":"json","indexable_fields":["c"],"unindexable_fields":[]}],"mrargs":{"include_docs":true,"view_type":"map","reduce":false,"partition":null,"start_key":[],"end_key":["<MAX>"],"direction":"fwd","stable":false,"update":true,"conflicts":"undefined"},"covering":false}`},
	{method: "POST", path: "/{db}/_explain", body: `{"selector":{"x":1},"sort":["x"]}`, status: 200, want: `{"dbname":"mango","index":null,"partitioned":false,"selector":{"x":{"$eq":1}},"opts":{"use_index":[],"bookmark":"nil","limit":25,"skip":0,"sort":{"x":"asc"},"fields":[],"partition":"","r":1,"conflicts":false,"stale":false,"update":true,"stable":false,"execution_stats":false,"allow_fallback":true},"limit":25,"skip":0,"fields":[],"index_candidates":[{"index":{"ddoc":"_design/ms","name":"by-s","type":"json","partitioned":false,"def":{"fields":[{"s":"desc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":false}},{"index":{"ddoc":"_design/mp","name":"red-oa","type":"json","partitioned":false,"def":{"fields":[{"o.a":"asc"}],"partial_filter_selector":{"c":{"$eq":"red"}}}},"analysis":{"usable":false,"reasons":[{"name":"is_partial"}],"ranking":2,"covering":false}},{"index":{"ddoc":"_design/mi","name":"by-n","type":"json","partitioned":false,"def":{"fields":[{"n":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":false}},{"index":{"ddoc":"_design/81dc5e1c85afc80521da4cdffb943eec47165982","name":"81dc5e1c85afc80521da4cdffb943eec47165982","type":"json","partitioned":false,"def":{"fields":[{"c":"asc"},{"n":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":false}},{"index":{"ddoc":"_design/16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","name":"16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","type":"json","partitioned":false,"def":{"fields":[]}},"analysis":{"usable":false,"reasons":[{"name":"sort_order_mismatch"}],"ranking":1,"covering":false}},{"index":{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}},"analysis":{"usable":false,"reasons":[{"name":"field_mismatch"}],"ranking":1,"covering":null}}],"selector_hints":[{"type":"json","indexable_fields":["x"],"unindexable_fields":[]}]}`},

	// deletion
	{method: "DELETE", path: "/{db}/_index/_design/mi/json/by-n", status: 200, want: `{"ok":true}`},
	{method: "DELETE", path: "/{db}/_index/mi/json/by-n", lags: true, status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "DELETE", path: "/{db}/_index/ms/json/nope", status: 404, want: `{"error":"not_found","reason":"missing"}`},
	{method: "GET", path: "/{db}/_design/mi", status: 404, want: `{"error":"not_found","reason":"deleted"}`},
	{method: "POST", path: "/{db}/_index/_bulk_delete", body: `{"docids":["_design/ms","_design/none"]}`, status: 200, want: `{"success":[{"id":"_design/ms","ok":true}],"fail":[{"id":"_design/none","error":"not_found"}]}`},
	{method: "POST", path: "/{db}/_index/_bulk_delete", body: `{}`, status: 400, want: `{"error":"missing_required_key","reason":"Missing required key: docids"}`},
	{method: "GET", path: "/{db}/_index/_bulk_delete", status: 405, want: `{"error":"method_not_allowed","reason":"Only POST allowed"}`},
	{method: "GET", path: "/{db}/_index?limit=1&skip=1", status: 200, want: `{"total_rows":4,"indexes":[{"ddoc":"_design/16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","name":"16d64bc5aa5ac9a0662f02b45a7d70d4a6923ccc","type":"json","partitioned":false,"def":{"fields":[]}}]}`},
	{method: "POST", path: "/{db}/_find", body: `{"selector":{"n":{"$gt":2}},"fields":["_id"],"sort":[{"n":"desc"}]}`, status: 400, want: `{"error":"no_usable_index","reason":"No index exists for this sort, try indexing by the sort fields."}`},
}

func TestMango(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/mango", nil, nil)
	runViewSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "mango", mangoSteps)
}

func TestMangoAsCouchDB(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	cs := testcouch.Start(t, "")
	runViewSteps(t, cs.URL, cs.User, cs.Password, "", []viewStep{{method: "PUT", path: "/mango", status: 201}})
	runViewSteps(t, cs.URL, cs.User, cs.Password, "mango", couchSettles(mangoSteps))
}

// Beyond CouchDB: execution_stats names the fields the index's range
// served, and mango/max_docs_scanned refuses a whole-database scan
// without an index (off by default), letting indexed queries and _id
// ranges through.
func TestMangoServedFieldsAndScanGuard(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	c := caller{t, s.URL, testserver.AdminUser, testserver.AdminPassword}
	c.do("PUT", "/guard", "", nil)
	var docs []string
	for i := range 40 {
		docs = append(docs, fmt.Sprintf(`{"_id":"g%02d","g":%d,"v":%d,"w":%d}`, i, i%4, i, i%5))
	}
	c.do("POST", "/guard/_bulk_docs", `{"docs":[`+strings.Join(docs, ",")+`]}`, nil)
	c.do("POST", "/guard/_index", `{"index":{"fields":["g","v"]},"name":"gv","ddoc":"gv"}`, nil)
	served := func(body string) []string {
		resp, b := c.do("POST", "/guard/_find", body, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
		var r struct {
			Stats struct {
				Served []string `json:"index_fields_served"`
			} `json:"execution_stats"`
		}
		_ = json.Unmarshal([]byte(b), &r)
		return r.Stats.Served
	}
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"selector":{"g":1,"v":{"$gt":10}},"execution_stats":true}`, []string{"g", "v"}},
		{`{"selector":{"g":1,"v":{"$exists":true},"w":2},"execution_stats":true}`, []string{"g"}},
		// [g, v] needs both in the selector (CouchDB's rule): _all_docs
		{`{"selector":{"g":{"$gt":1}},"execution_stats":true}`, []string{}},
		{`{"selector":{"g":{"$gt":1},"v":{"$gt":0}},"execution_stats":true}`, []string{"g"}},
		{`{"selector":{"w":2},"execution_stats":true}`, []string{}},
		{`{"selector":{"_id":{"$gt":"g30"}},"execution_stats":true}`, []string{"_id"}},
	} {
		if got := served(tc.body); !slices.Equal(got, tc.want) {
			t.Errorf("%s: index_fields_served %v, want %v", tc.body, got, tc.want)
		}
	}

	c.do("PUT", "/_node/_local/_config/mango/max_docs_scanned", `"20"`, nil)
	resp, b := c.do("POST", "/guard/_find", `{"selector":{"w":2}}`, nil)
	if resp.StatusCode != 400 || !strings.Contains(b, `"too_many_docs_scanned"`) || !strings.Contains(b, "41 documents") { // 40 and the index's design doc
		t.Fatalf("unindexed find over 40 docs with max_docs_scanned 20: %d %s", resp.StatusCode, b)
	}
	for _, ok := range []string{`{"selector":{"g":1,"v":{"$exists":true},"w":2}}`, `{"selector":{"_id":{"$gt":"g30"},"w":2}}`} {
		if resp, b := c.do("POST", "/guard/_find", ok, nil); resp.StatusCode != 200 {
			t.Errorf("%s under the guard: %d %s", ok, resp.StatusCode, b)
		}
	}
	c.do("PUT", "/_node/_local/_config/mango/max_docs_scanned", `"0"`, nil)
	if resp, b := c.do("POST", "/guard/_find", `{"selector":{"w":2}}`, nil); resp.StatusCode != 200 {
		t.Errorf("with the guard off: %d %s", resp.StatusCode, b)
	}
	if resp, b := c.do("PUT", "/_node/_local/_config/mango/max_docs_scanned", `"x"`, nil); resp.StatusCode != 400 {
		t.Errorf("max_docs_scanned x: %d %s", resp.StatusCode, b)
	}
}
