package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// changesSmallPrintSteps are _changes details the differential tester
// found (tools/difftest): a batch's seqs in id order, a negative limit,
// pending when descending or filtered, seq_interval's rows. On a q=1
// database, where one shard's order is the feed's.
var changesSmallPrintSteps = []wireStep{
	{method: "PUT", path: "/{db}-1?q=1", status: 201},
	{method: "POST", path: "/{db}-1/_bulk_docs", body: `{"docs":[{"_id":"z","v":1},{"_id":"m","v":2},{"_id":"a","v":3}]}`, status: 201},
	// one _bulk_docs numbers its docs in id order
	{method: "GET", path: "/{db}-1/_changes?limit=1", status: 200, inBody: `"id":"a"`},
	{method: "GET", path: "/{db}-1/_changes?limit=1", status: 200, inBody: `"pending":2}`},
	// a negative limit is none
	{method: "GET", path: "/{db}-1/_changes?limit=-1", status: 200, inBody: `"pending":0}`},
	// descending, the rows not reached are pending
	{method: "GET", path: "/{db}-1/_changes?descending=true&limit=1", status: 200, inBody: `"pending":2}`},
	{method: "GET", path: "/{db}-1/_changes?descending=true&limit=1", status: 200, inBody: `"id":"z"`},
	// seq_interval: a seq where the countdown from the limit is a multiple of it
	{method: "GET", path: "/{db}-1/_changes?seq_interval=2&limit=1", status: 200, inBody: `"seq":null`},
	{method: "GET", path: "/{db}-1/_changes?seq_interval=2&limit=2", status: 200, inBody: `"seq":"1-`},
	// a filter function reads the whole feed: nothing is pending after it
	{method: "PUT", path: "/{db}-1/_design/f", status: 201,
		body: `{"filters":{"odd":"function(doc, req) { return doc.v % 2 == 1; }"},"views":{"v":{"map":"function(doc) { if (doc.v == 2) emit(doc.v); }"}}}`},
	{method: "GET", path: "/{db}-1/_changes?filter=f/odd", status: 200, inBody: `"pending":0}`},
	{method: "GET", path: "/{db}-1/_changes?filter=_view&view=f/v", status: 200, inBody: `"pending":0}`},
	{method: "DELETE", path: "/{db}-1", status: 200},
}

func TestChangesSmallPrint(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	mustCall(t, s, 201, "PUT", "/cs", nil, nil)
	runSteps(t, s.URL, testserver.AdminUser, testserver.AdminPassword, "cs", changesSmallPrintSteps)
}

func TestChangesSmallPrintAsCouchDB(t *testing.T) {
	t.Parallel()
	runOnCouchDB(t, "cs", changesSmallPrintSteps)
}
