package httpgw_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// poison is what the attacking design doc's functions do to their
// JavaScript runtime before doing their job (couchjs's TestIsolation
// tries many more).
const poison = `Array.prototype.indexOf = function () { return 0; };`

// evilDDoc's map, validate_doc_update, show and filter all poison their
// runtime; guardDDoc's validate_doc_update refuses what is not allowed.
var (
	evilDDoc = jsonOf(map[string]any{
		"views":               map[string]any{"v": map[string]any{"map": "function (doc) { " + poison + " emit(doc._id, null); }"}},
		"validate_doc_update": "function (newDoc) { " + poison + " }",
		"shows":               map[string]any{"s": "function (doc, req) { " + poison + " return 'ok'; }"},
		"filters":             map[string]any{"f": "function (doc, req) { " + poison + " return true; }"},
	})
	guardDDoc = jsonOf(map[string]any{
		"validate_doc_update": `function (newDoc, oldDoc, userCtx) { if (["yes"].indexOf(newDoc.allowed) < 0) throw({forbidden: "no"}); }`,
	})
)

// TestJSIsolation is the attack on pooled runtimes: a design doc whose
// functions patch Array.prototype.indexOf to answer 0 runs (its view is
// queried, its show and filter called), then another design doc's
// validate_doc_update must still refuse every doc it forbids, in another
// database and in the same one.
func TestJSIsolation(t *testing.T) {
	t.Parallel()
	s := testserver.Start(t)
	for _, tc := range []struct{ name, attackDB, victimDB string }{
		{"other database", "iso_a", "iso_b"},
		{"same database", "iso_c", "iso_c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustCall(t, s, 201, "PUT", "/"+tc.attackDB, nil, nil)
			if tc.victimDB != tc.attackDB {
				mustCall(t, s, 201, "PUT", "/"+tc.victimDB, nil, nil)
			}
			mustCall(t, s, 201, "PUT", "/"+tc.attackDB+"/_design/evil", evilDDoc, nil)
			for i := range 4 {
				mustCall(t, s, 201, "PUT", fmt.Sprintf("/%s/a%d", tc.attackDB, i), `{"allowed":"yes"}`, nil)
			}
			var rows struct {
				Rows []json.RawMessage `json:"rows"`
			}
			mustCall(t, s, 200, "GET", "/"+tc.attackDB+"/_design/evil/_view/v", nil, &rows)
			if len(rows.Rows) != 4 {
				t.Fatalf("view rows %d, want 4", len(rows.Rows))
			}
			if st := call(t, s, "GET", "/"+tc.attackDB+"/_design/evil/_show/s", nil, nil); st != 200 {
				t.Fatalf("show: %d", st)
			}
			mustCall(t, s, 200, "GET", "/"+tc.attackDB+"/_changes?filter=evil/f", nil, nil)

			mustCall(t, s, 201, "PUT", "/"+tc.victimDB+"/_design/guard", guardDDoc, nil)
			refused := 0
			for i := range 40 {
				allowed := "yes"
				if i%2 == 1 {
					allowed = "no"
				}
				var out struct{ Error, Reason string }
				st := call(t, s, "PUT", fmt.Sprintf("/%s/b%d", tc.victimDB, i), `{"allowed":"`+allowed+`"}`, &out)
				switch {
				case allowed == "yes" && st != 201:
					t.Errorf("doc %d allowed: %d %+v", i, st, out)
				case allowed == "no" && (st != 403 || out.Error != "forbidden" || out.Reason != "no"):
					t.Errorf("doc %d not allowed: %d %+v", i, st, out)
				case allowed == "no":
					refused++
				}
			}
			if refused != 20 {
				t.Errorf("%d of 20 forbidden docs refused", refused)
			}
		})
	}

	// runtime code evaluation is refused, as CouchDB's couchjs refuses it
	mustCall(t, s, 201, "PUT", "/iso_eval", nil, nil)
	mustCall(t, s, 201, "PUT", "/iso_eval/_design/e", jsonOf(map[string]any{
		"validate_doc_update": `function (newDoc) { if (newDoc.code) eval(newDoc.code); if (newDoc.fn) emit.constructor(newDoc.fn)(); }`,
		"shows":               map[string]any{"s": `function (doc, req) { return (function* () {}).constructor("yield 1")().next().value; }`},
	}), nil)
	for _, tc := range []struct {
		method, path, body string
		status             int
		err                string
	}{
		{"PUT", "/iso_eval/e1", `{"code":"1"}`, 500, "EvalError"},
		{"PUT", "/iso_eval/e2", `{"fn":"return this"}`, 500, "EvalError"},
		{"PUT", "/iso_eval/e3", `{}`, 201, ""},
		{"GET", "/iso_eval/_design/e/_show/s", ``, 500, "render_error"},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		var out struct{ Error, Reason string }
		if st := call(t, s, tc.method, tc.path, body, &out); st != tc.status || out.Error != tc.err {
			t.Errorf("%s %s: %d %+v, want %d %s", tc.method, tc.path, st, out, tc.status, tc.err)
		}
	}
}
